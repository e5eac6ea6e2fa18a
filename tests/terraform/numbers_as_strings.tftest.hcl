# Numbers written as strings, which object({ optional(number) }) converted
# ("50" -> 50) and the `type = any` inputs must still take (docs/decisions.md,
# "Object inputs are typed any": the given value is read "as optional() did").
# A caller's own string variables, tfvars written with quotes or csvdecode()
# give them so. Each run must plan; the module's checks compare `floor(x) == x`
# and `x == 1`, which are false for the string "50" or "1" (Terraform's == does
# not convert), so they refuse a valid number with a message saying it is not one.
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

run "numbers_given_as_strings_are_taken_as_numbers" {
  command = plan

  variables {
    stream_mapping = { batch_size = "50", maximum_retry_attempts = "3" }
    sweeper        = { max_items = "50", min_age_seconds = "600" }
    publisher      = { memory_size_mb = "512" }
    consumers = {
      audit = {
        event_pattern                      = "{\"source\":[\"orders\"]}"
        batch_size                         = "20"
        maximum_batching_window_in_seconds = "2"
      }
    }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.batch_size == 50 && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_SWEEPER_MAX_ITEMS"] == "50"
    error_message = "stream_mapping.batch_size and sweeper.max_items given as \"50\" must be applied as 50."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.consumer["audit"].batch_size == 20 && aws_lambda_function.publisher.memory_size == 512
    error_message = "consumers.audit.batch_size \"20\" and publisher.memory_size_mb \"512\" must be applied."
  }
}

run "fifo_parallelization_factor_given_as_a_string_is_accepted" {
  command = plan

  variables {
    publish_to     = "sns_fifo"
    stream_mapping = { parallelization_factor = "1" }
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo"
    }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.parallelization_factor == 1
    error_message = "stream_mapping.parallelization_factor \"1\" must be applied as 1 on sns_fifo."
  }
}
