# hashicorp/aws 5.x and 6.x alike (versions.tf allows both; docs/decisions.md,
# "hashicorp/aws 6.x"). The region comes from aws_region's `id`, the attribute
# both majors have: `name` is deprecated in 6.x, `region` missing in 5.x. The
# mock provider here has 5.x's schema (the local mirror holds 5.100), and its
# runtime validation: python3.14 on 5.x is planned against the emulator in
# test_provider_compat.py.

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
  target          = aws_dynamodb_table.idempotency[0]
  override_during = plan
  values = {
    arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
  }
}

# The module's postcondition compares the log group's ARN with the one its
# policy was built from (consumers.tf).
override_resource {
  target          = aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
  }
}

variables {
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
  consumers = {
    audit = {
      event_pattern = "{\"source\":[\"orders\"]}"
    }
  }
}

run "the_region_is_read_from_id_never_from_the_deprecated_name" {
  command = plan

  # A `name` that differs from `id` shows which one the module reads.
  override_data {
    target = data.aws_region.current
    values = {
      id   = "eu-west-1"
      name = "not-the-region"
    }
  }

  assert {
    condition = (
      local.region_name == "eu-west-1"
      && local.consumer_queue_arns["audit"] == "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
      && local.idempotency_table_arn == "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
    )
    error_message = "ARNs built from names must take the region from aws_region's id (5.x and 6.x), not its name (deprecated in 6.x)."
  }

  assert {
    condition     = !local.provider_is_6x
    error_message = "The 5.x schema has no `region` attribute on aws_region: the module must see a 5.x provider."
  }
}

run "python3_13_plans_on_5x" {
  command = plan

  variables {
    lambda_runtime = "python3.13"
  }

  assert {
    condition     = aws_lambda_function.publisher.runtime == "python3.13" && !local.lambda_runtime_needs_6x
    error_message = "python3.13 is within 5.x's runtime list and needs no 6.x provider."
  }
}
