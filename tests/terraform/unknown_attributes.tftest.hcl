# A misspelt attribute in an object input is refused at plan, not dropped.
# Terraform's conversion to an object type discards the attributes the type
# does not declare (hashicorp/terraform#29204), so `batch_sise = 5` used to plan
# the default batch size; these inputs take the value as given and check its
# attribute names against the ones the module knows (variables.tf, Inputs).
# One misspelling per input per run (validation.tftest.hcl says why).
# test_validate_messages.py reads the messages.

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

run "misspelt_attributes_of_the_object_inputs_are_refused" {
  command = plan

  variables {
    stream_mapping = { batch_sise = 5 }
    alarms         = { action = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
    table          = { partition_kye = "id" }
    sweeper        = { max_item = 10 }
    consumers = {
      audit = { event_pattern = "{\"source\":[\"orders\"]}", batch_sise = 5 }
    }
  }

  expect_failures = [
    var.stream_mapping,
    var.alarms,
    var.table,
    var.sweeper,
    var.consumers,
  ]
}

run "misspelt_attributes_of_the_smaller_object_inputs_are_refused" {
  command = plan

  variables {
    event_bus         = { nam = "orders" }
    publisher         = { memory_size = 1024 }
    event_archive     = { retention_day = 30 }
    dashboard         = { enable = false }
    idempotency_table = { deletion_protection = true }
  }

  expect_failures = [
    var.event_bus,
    var.publisher,
    var.event_archive,
    var.dashboard,
    var.idempotency_table,
  ]
}

run "misspelt_attribute_of_a_consumers_function_is_refused" {
  command = plan

  variables {
    consumers = {
      billing = {
        event_pattern = "{\"source\":[\"orders\"]}"
        function = {
          arn      = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          rol_name = "billing-role"
        }
      }
    }
  }

  expect_failures = [var.consumers]
}

run "an_object_input_that_is_not_an_object_is_refused" {
  command = plan

  variables {
    stream_mapping = 100
    sweeper        = ["enabled"]
  }

  expect_failures = [var.stream_mapping, var.sweeper]
}

# Every attribute each input declares, spelt right, set at once: the names the
# module checks against are complete, and nulls take the defaults as before.
run "every_known_attribute_is_accepted" {
  command = plan

  variables {
    stream_mapping = {
      batch_size                         = 50
      maximum_batching_window_in_seconds = 1
      parallelization_factor             = 2
      maximum_retry_attempts             = 3
      maximum_record_age_in_seconds      = 3600
      enabled                            = true
    }
    alarms = {
      enabled                              = true
      disabled                             = ["consumer_errors"]
      actions                              = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      ok_actions                           = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      period_seconds                       = 120
      publisher_iterator_age_threshold_ms  = 1000
      publisher_errors_threshold           = 1
      sweeper_errors_threshold             = 1
      oldest_pending_age_threshold_seconds = 900
      consumer_dlq_age_threshold_seconds   = null
    }
    table = {
      create                      = true
      name                        = "orders-table"
      partition_key               = "pk"
      sort_key                    = "sk"
      stream_view_type            = "NEW_AND_OLD_IMAGES"
      billing_mode                = "PROVISIONED"
      read_capacity               = 5
      write_capacity              = 5
      deletion_protection_enabled = false
      ttl_attribute_name          = null
    }
    sweeper = {
      enabled             = true
      schedule_expression = "rate(10 minutes)"
      min_age_seconds     = 600
      max_items           = 50
      memory_size_mb      = 512
      timeout_seconds     = 300
      log_level           = null
    }
    event_bus = { create = true, name = null }
    publisher = {
      memory_size_mb   = 512
      timeout_seconds  = 30
      log_level        = "DEBUG"
      extra_layer_arns = null
    }
    event_archive     = { enabled = true, retention_days = 30, event_pattern = null }
    dashboard         = { enabled = false }
    idempotency_table = { deletion_protection_enabled = true }
    consumers = {
      audit = {
        event_pattern                      = "{\"source\":[\"orders\"]}"
        filter_policy                      = null
        function                           = null
        function_timeout_seconds           = 60
        function_memory_size_mb            = 512
        visibility_timeout_seconds         = null
        message_retention_seconds          = 1209600
        max_receive_count                  = 10
        batch_size                         = 20
        maximum_batching_window_in_seconds = 2
        maximum_concurrency                = 5
        maximum_event_age_in_seconds       = 3600
        maximum_retry_attempts             = 10
        idempotency_expires_after_seconds  = null
        retired                            = false
      }
      billing = {
        event_pattern = "{\"detail-type\":[\"OrderCreated\"]}"
        function = {
          arn          = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          role_name    = "billing-role"
          uses_toolkit = null
        }
      }
    }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.batch_size == 50 && aws_lambda_event_source_mapping.publisher.parallelization_factor == 2
    error_message = "stream_mapping was not applied as given."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].ttl[0].attribute_name == "expires_at" && aws_dynamodb_table.this[0].hash_key == "pk"
    error_message = "table: a null ttl_attribute_name must take the default expires_at, and partition_key must be applied."
  }

  assert {
    condition     = aws_lambda_function.sweeper[0].environment[0].variables["LOG_LEVEL"] == "INFO" && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_SWEEPER_MAX_ITEMS"] == "50"
    error_message = "sweeper: a null log_level must take the default INFO, and max_items must be applied."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.consumer["audit"].batch_size == 20 && aws_sqs_queue.consumer["audit"].visibility_timeout_seconds == 360
    error_message = "consumers: batch_size must be applied and a null visibility_timeout_seconds derived (6 x 60)."
  }

  assert {
    condition     = contains(keys(aws_iam_role_policy.consumer_caller_role), "billing") && !contains(keys(aws_lambda_function.consumer), "billing")
    error_message = "consumers: a null function.uses_toolkit must take the default (true) and a caller's function must be used."
  }

  assert {
    condition     = aws_lambda_function.publisher.memory_size == 512 && aws_cloudwatch_event_archive.this[0].retention_days == 30 && aws_dynamodb_table.idempotency[0].deletion_protection_enabled && length(aws_cloudwatch_dashboard.this) == 0 && aws_cloudwatch_event_bus.this[0].name == "orders-outbox"
    error_message = "publisher, event_archive, idempotency_table, dashboard and event_bus must be applied as given (a null name: var.name)."
  }

  assert {
    condition     = !contains(keys(aws_cloudwatch_metric_alarm.this), "consumer_errors/audit") && aws_cloudwatch_metric_alarm.this["publisher_errors"].period == 120
    error_message = "alarms: disabled and period_seconds must be applied."
  }
}
