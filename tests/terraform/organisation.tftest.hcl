# What an organisation of many accounts imposes (issue 26): role paths, name
# prefixes, boundaries and tags on every role; functions in a VPC; and the
# misconfigurations plan refuses (a filter policy on an attribute no message
# has, a key or function of another region).
# Run from the repository root:
#   terraform test -test-directory=tests/terraform -filter=tests/terraform/organisation.tftest.hcl

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
  }
}

override_resource {
  target          = aws_dynamodb_table.idempotency[0]
  override_during = plan
  values = {
    arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
  }
}

override_resource {
  target          = aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sns_topic.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["a2345678901234567890123456789012"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-a2345678901234567890123456789012-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["a2345678901234567890123456789012"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-a2345678901234567890123456789012-consumer-dlq"
  }
}

override_resource {
  target          = aws_cloudwatch_log_group.consumer["a2345678901234567890123456789012"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-a2345678901234567890123456789012-consumer"
  }
}

variables {
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
  tags   = { Team = "orders" }
  consumers = {
    audit = { event_pattern = "{\"source\":[\"orders\"]}" }
  }
}

################################################################################
# IAM roles
################################################################################

run "every_role_gets_the_path_prefix_boundary_and_role_tags" {
  command = plan

  variables {
    iam_role_path                = "/app/outbox/"
    iam_role_name_prefix         = "acme-"
    iam_permissions_boundary_arn = "arn:aws:iam::111122223333:policy/acme-boundary"
    iam_role_tags                = { Team = "platform", Boundary = "acme" }
    # The forwarder role exists with multi-region event forwarding only.
    multi_region = { forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"] }
  }

  assert {
    condition = (
      aws_iam_role.publisher.name == "acme-orders-outbox-publisher"
      && aws_iam_role.forwarder[0].name == "acme-orders-outbox-forwarder"
      && aws_iam_role.sweeper[0].name == "acme-orders-outbox-sweeper"
      && aws_iam_role.sweeper_schedule[0].name == "acme-orders-outbox-sweeper-schedule"
      && aws_iam_role.consumer["audit"].name == "acme-orders-outbox-audit-consumer"
    )
    error_message = "Every role's name starts with iam_role_name_prefix."
  }

  assert {
    condition = alltrue([
      for role in concat([aws_iam_role.publisher], aws_iam_role.sweeper, aws_iam_role.sweeper_schedule, values(aws_iam_role.consumer), aws_iam_role.forwarder) :
      role.path == "/app/outbox/"
      && role.permissions_boundary == "arn:aws:iam::111122223333:policy/acme-boundary"
      && role.tags == tomap({ Team = "platform", Boundary = "acme" })
    ])
    error_message = "Every role has iam_role_path, the permissions boundary, and iam_role_tags over tags."
  }

  assert {
    condition     = aws_lambda_function.publisher.function_name == "orders-outbox-publisher" && aws_lambda_function.publisher.tags == tomap({ Team = "orders" })
    error_message = "The prefix and role tags are the roles' only: functions keep their names and the module's tags."
  }
}

# Every aws_iam_role the module declares is listed here: a new role without the
# prefix, path and boundary fails this run's first assert above, this one fails
# when a role is left out of the count.
run "the_module_creates_exactly_these_roles" {
  command = plan

  assert {
    condition     = length(concat([aws_iam_role.publisher], aws_iam_role.sweeper, aws_iam_role.sweeper_schedule, values(aws_iam_role.consumer), aws_iam_role.forwarder)) == 4
    error_message = "Publisher, sweeper, sweeper schedule and one reference consumer: four roles (the forwarder only with multi_region.forward_to_event_bus_arns)."
  }
}

# "orders-outbox-<32 characters>-consumer" is 55 characters; a 10-character
# prefix makes 65.
run "a_prefix_that_makes_a_role_name_longer_than_64_is_refused" {
  command = plan

  variables {
    iam_role_name_prefix = "acme-apps-"
    consumers = {
      a2345678901234567890123456789012 = { event_pattern = "{\"source\":[\"orders\"]}" }
    }
  }

  assert {
    condition     = length(aws_iam_role.publisher.name) <= 64
    error_message = "Only the role that is too long is refused."
  }

  expect_failures = [aws_iam_role.consumer["a2345678901234567890123456789012"]]
}

run "a_role_path_without_slashes_is_refused" {
  command = plan

  variables {
    iam_role_path = "app/outbox"
  }

  expect_failures = [var.iam_role_path]
}

run "a_prefix_with_a_character_iam_refuses_is_refused" {
  command = plan

  variables {
    iam_role_name_prefix = "acme/"
  }

  expect_failures = [var.iam_role_name_prefix]
}

################################################################################
# VPC placement
################################################################################

run "vpc_config_places_every_module_function_and_grants_the_eni_actions" {
  command = plan

  variables {
    vpc_config = {
      subnet_ids         = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
      security_group_ids = ["sg-0123456789abcdef0"]
    }
  }

  assert {
    condition = alltrue([
      for function in concat([aws_lambda_function.publisher], aws_lambda_function.sweeper, values(aws_lambda_function.consumer)) :
      length(function.vpc_config) == 1
      && toset(function.vpc_config[0].subnet_ids) == toset(["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"])
      && toset(function.vpc_config[0].security_group_ids) == toset(["sg-0123456789abcdef0"])
    ])
    error_message = "The publisher, the sweeper and each reference consumer are placed in vpc_config's subnets and security groups."
  }

  assert {
    condition = alltrue([
      for document in [data.aws_iam_policy_document.publisher, data.aws_iam_policy_document.sweeper[0], data.aws_iam_policy_document.consumer_function["audit"]] :
      length([
        for statement in document.statement : statement
        if statement.sid == "ManageVpcNetworkInterfaces"
        && toset(statement.actions) == toset(["ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses"])
      ]) == 1
    ])
    error_message = "Each function's role may manage the network interfaces Lambda creates for it in the VPC (AWSLambdaVPCAccessExecutionRole's EC2 actions)."
  }

  assert {
    condition     = length([for statement in data.aws_iam_policy_document.consumer["audit"].statement : statement if statement.sid == "ManageVpcNetworkInterfaces"]) == 0
    error_message = "The consumer policy a caller's function is given (required_policy_json) does not carry the module's VPC permissions."
  }
}

run "without_vpc_config_no_function_is_in_a_vpc_and_no_role_gets_ec2_actions" {
  command = plan

  assert {
    condition = alltrue([
      for function in concat([aws_lambda_function.publisher], aws_lambda_function.sweeper, values(aws_lambda_function.consumer)) :
      length(function.vpc_config) == 0
    ])
    error_message = "No VPC unless vpc_config is given."
  }

  assert {
    condition = alltrue([
      for document in [data.aws_iam_policy_document.publisher, data.aws_iam_policy_document.sweeper[0], data.aws_iam_policy_document.consumer_function["audit"]] :
      length([for statement in document.statement : statement if statement.sid == "ManageVpcNetworkInterfaces"]) == 0
    ])
    error_message = "No EC2 permission without vpc_config."
  }
}

run "vpc_config_with_a_malformed_subnet_is_refused" {
  command = plan

  variables {
    vpc_config = {
      subnet_ids         = ["subnet-0123456789abcdef0", "private-a"]
      security_group_ids = ["sg-0123456789abcdef0"]
    }
  }

  expect_failures = [var.vpc_config]
}

run "vpc_config_without_a_security_group_is_refused" {
  command = plan

  variables {
    vpc_config = {
      subnet_ids         = ["subnet-0123456789abcdef0"]
      security_group_ids = []
    }
  }

  expect_failures = [var.vpc_config]
}

################################################################################
# Filter policies on attributes that exist
################################################################################

run "a_filter_policy_on_the_publishers_attributes_plans" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = { filter_policy = "{\"$or\":[{\"event_type\":[\"OrderCreated\"]},{\"source\":[\"billing\"]}]}" }
    }
  }

  assert {
    condition     = length(local.consumer_filter_policy_unknown_keys["audit"]) == 0
    error_message = "event_type and source, also inside $or, are the attributes the publisher sets."
  }
}

run "a_filter_policy_on_detail_type_is_refused" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = { filter_policy = "{\"detail-type\":[\"OrderCreated\"]}" }
    }
  }

  expect_failures = [aws_sns_topic_subscription.consumer["audit"]]
}

run "a_filter_policy_with_an_unknown_key_inside_or_is_refused" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = { filter_policy = "{\"$or\":[{\"event_type\":[\"OrderCreated\"]},{\"type\":[\"OrderPaid\"]}]}" }
    }
  }

  assert {
    condition     = local.consumer_filter_policy_unknown_keys["audit"] == tolist(["type"])
    error_message = "The keys of each $or alternative are checked too."
  }

  expect_failures = [aws_sns_topic_subscription.consumer["audit"]]
}

run "a_nested_or_on_the_publishers_attributes_plans" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = { filter_policy = "{\"source\":[\"orders\"],\"$or\":[{\"event_type\":[\"A\"]},{\"source\":[\"x\"],\"$or\":[{\"event_type\":[\"B\"]},{\"event_type\":[\"C\"]}]}]}" }
    }
  }

  assert {
    condition     = length(local.consumer_filter_policy_unknown_keys["audit"]) == 0 && !local.consumer_filter_policy_too_deep["audit"]
    error_message = "A $or inside a $or alternative is SNS's OR operator, not an attribute."
  }
}

run "an_unknown_key_in_a_nested_or_is_refused" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = { filter_policy = "{\"$or\":[{\"event_type\":[\"A\"]},{\"source\":[\"x\"],\"$or\":[{\"event_type\":[\"B\"]},{\"detail-type\":[\"C\"]}]}]}" }
    }
  }

  assert {
    condition     = local.consumer_filter_policy_unknown_keys["audit"] == tolist(["detail-type"])
    error_message = "The keys of a nested $or alternative are checked too."
  }

  expect_failures = [aws_sns_topic_subscription.consumer["audit"]]
}

################################################################################
# Keys and functions of another region
################################################################################

run "a_kms_key_of_another_region_is_refused" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:us-east-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
  }

  expect_failures = [aws_lambda_function.publisher]
}

run "a_consumer_function_of_another_region_is_refused" {
  command = plan

  variables {
    consumers = {
      billing = {
        event_pattern = "{\"source\":[\"orders\"]}"
        function      = { arn = "arn:aws:lambda:us-east-1:111122223333:function:billing", role_name = "billing-role" }
      }
    }
  }

  expect_failures = [aws_lambda_event_source_mapping.consumer["billing"]]
}

run "a_key_and_function_of_the_providers_region_plan" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
    consumers = {
      billing = {
        event_pattern = "{\"source\":[\"orders\"]}"
        function      = { arn = "arn:aws:lambda:eu-west-1:111122223333:function:billing", role_name = "billing-role" }
      }
    }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.consumer["billing"].function_name == "arn:aws:lambda:eu-west-1:111122223333:function:billing"
    error_message = "A function of the provider's region consumes its queue."
  }
}
