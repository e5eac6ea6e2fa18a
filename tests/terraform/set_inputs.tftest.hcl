# A set of strings where the typed inputs took list(string) (alarms.actions,
# alarms.ok_actions, publisher.extra_layer_arns): the typed input converted it,
# e.g. a caller's `actions = var.oncall_topic_arns` declared set(string). With
# `type = any` the set reaches concat() (the ARN check, local.function_layers),
# which takes lists and tuples only. Each run must plan.
mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

# The mocks' ARNs, as consumers.tftest.hcl gives them: the module's
# postconditions compare each resource's ARN with the one its policies name.
override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-billing-consumer-dlq"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-audit-consumer-dlq"
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
  target          = aws_cloudwatch_event_rule.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_cloudwatch_event_rule.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-audit-consumer"
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
  target          = aws_sns_topic_subscription.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
  }
}

override_resource {
  target          = aws_lambda_function.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:lambda:eu-west-1:111122223333:function:orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_iam_role.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:iam::111122223333:role/orders-outbox-audit-consumer"
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
  target          = aws_lambda_layer_version.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:lambda:eu-west-1:111122223333:layer:orders-outbox-dynamodb-outbox:1"
  }
}

override_resource {
  target          = aws_lambda_event_source_mapping.consumer["billing"]
  override_during = plan
  values = {
    uuid = "b1111111-2222-3333-4444-555555555555"
  }
}

variables {
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
}

run "alarm_actions_given_as_a_set_are_accepted" {
  command = plan

  variables {
    alarms = {
      actions    = toset(["arn:aws:sns:eu-west-1:111122223333:oncall"])
      ok_actions = toset(["arn:aws:sns:eu-west-1:111122223333:oncall"])
    }
  }

  assert {
    condition     = contains(aws_cloudwatch_metric_alarm.this["publisher_errors"].alarm_actions, "arn:aws:sns:eu-west-1:111122223333:oncall")
    error_message = "alarms.actions given as a set must be applied."
  }
}

run "extra_layer_arns_given_as_a_set_are_accepted" {
  command = plan

  variables {
    publisher = { extra_layer_arns = toset(["arn:aws:lambda:eu-west-1:111122223333:layer:extra:1"]) }
  }

  assert {
    condition     = contains(aws_lambda_function.publisher.layers, "arn:aws:lambda:eu-west-1:111122223333:layer:extra:1")
    error_message = "publisher.extra_layer_arns given as a set must be applied."
  }
}
