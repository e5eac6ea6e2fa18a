# The bus's own dead-letter queue: where EventBridge puts the events it accepted
# (PutEvents succeeded, the publisher deleted the outbox item) and then could not
# encrypt or decrypt with the bus's customer key. Created with every bus the
# module creates, on SSE-SQS so that it does not depend on that key; never for an
# existing bus or with publish_to = "sns". See docs/decisions.md.
# Run from the repository root:
#   terraform test -test-directory=tests/terraform -filter=tests/terraform/event_bus_dlq.tftest.hcl

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

# The bus DLQ's ARN and the bus's are built from names for the queue's policy;
# postconditions compare them with these (the bus's is the mock default).
override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-event-bus-dlq"
  }
}

variables {
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
}

# One plan serves every block of asserts below; each block was a run of its own
# (named in its comment).
run "bus_dlq_is_wired_guarded_and_durable" {
  command = plan

  # was run "bus_sends_what_it_cannot_process_to_its_dlq"
  assert {
    condition = (
      aws_sqs_queue.event_bus_dlq[0].name == "orders-outbox-event-bus-dlq"
      && one(aws_cloudwatch_event_bus.this[0].dead_letter_config).arn == aws_sqs_queue.event_bus_dlq[0].arn
    )
    error_message = "The bus must name its DLQ, orders-outbox-event-bus-dlq, in dead_letter_config."
  }

  assert {
    condition = (
      output.event_bus_dlq_arn == "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
      && output.event_bus_dlq_url == "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-event-bus-dlq"
    )
    error_message = "The event_bus_dlq_arn and event_bus_dlq_url outputs must describe the bus DLQ."
  }

  # was run "only_the_bus_may_send_to_its_dlq"
  assert {
    condition = (
      length(data.aws_iam_policy_document.event_bus_dlq[0].statement) == 1
      && one(data.aws_iam_policy_document.event_bus_dlq[0].statement).actions == toset(["sqs:SendMessage"])
      && one(one(data.aws_iam_policy_document.event_bus_dlq[0].statement).principals).type == "Service"
      && toset(one(one(data.aws_iam_policy_document.event_bus_dlq[0].statement).principals).identifiers) == toset(["events.amazonaws.com"])
      && one(one(data.aws_iam_policy_document.event_bus_dlq[0].statement).condition).test == "ArnEquals"
      && one(one(data.aws_iam_policy_document.event_bus_dlq[0].statement).condition).variable == "aws:SourceArn"
      && toset(one(one(data.aws_iam_policy_document.event_bus_dlq[0].statement).condition).values) == toset([aws_cloudwatch_event_bus.this[0].arn])
    )
    error_message = "The bus DLQ's policy must allow only events.amazonaws.com to SendMessage, with aws:SourceArn = the bus."
  }

  assert {
    condition = (
      one(data.aws_iam_policy_document.event_bus_dlq[0].statement).resources == toset([aws_sqs_queue.event_bus_dlq[0].arn])
      && aws_sqs_queue.event_bus_dlq[0].policy == data.aws_iam_policy_document.event_bus_dlq[0].json
    )
    error_message = "The policy must name the bus DLQ and be set on it."
  }

  assert {
    condition     = jsondecode(aws_sqs_queue.event_bus_dlq[0].redrive_allow_policy) == { redrivePermission = "denyAll" }
    error_message = "No queue may use the bus DLQ as its own DLQ: it holds bus events only."
  }

  # was run "bus_dlq_keeps_14_days_on_sse_sqs"
  assert {
    condition = (
      aws_sqs_queue.event_bus_dlq[0].message_retention_seconds == 1209600
      && aws_sqs_queue.event_bus_dlq[0].sqs_managed_sse_enabled == true
      && aws_sqs_queue.event_bus_dlq[0].kms_master_key_id == null
      && aws_sqs_queue.event_bus_dlq[0].tags == var.tags
    )
    error_message = "The bus DLQ keeps messages 14 days (the SQS maximum), is encrypted with SSE-SQS and tagged."
  }
}

run "bus_dlq_does_not_depend_on_the_customer_key" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
    tags = {
      Team = "orders"
    }
  }

  assert {
    condition = (
      aws_cloudwatch_event_bus.this[0].kms_key_identifier == var.kms_key_arn
      && one(aws_cloudwatch_event_bus.this[0].dead_letter_config).arn == aws_sqs_queue.event_bus_dlq[0].arn
    )
    error_message = "A bus encrypted with the customer key must have its DLQ."
  }

  assert {
    condition = (
      aws_sqs_queue.event_bus_dlq[0].kms_master_key_id == null
      && aws_sqs_queue.event_bus_dlq[0].sqs_managed_sse_enabled == true
      && aws_sqs_queue.on_failure.kms_master_key_id == var.kms_key_arn
    )
    error_message = "The bus DLQ must stay on SSE-SQS with a customer key (the key failing is what sends events there), while the other queues take the key."
  }

  assert {
    condition     = aws_sqs_queue.event_bus_dlq[0].tags == var.tags
    error_message = "The bus DLQ must carry var.tags."
  }
}

run "bus_dlq_depth_alarm_fires_on_any_message" {
  command = plan

  variables {
    alarms = {
      actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].alarm_name == "orders-outbox-event-bus-dlq-depth"
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].namespace == "AWS/SQS"
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].metric_name == "ApproximateNumberOfMessagesVisible"
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].statistic == "Maximum"
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].comparison_operator == "GreaterThanThreshold"
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].dimensions == tomap({ QueueName = "orders-outbox-event-bus-dlq" })
      && aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].alarm_actions == toset(["arn:aws:sns:eu-west-1:111122223333:oncall"])
    )
    error_message = "The bus DLQ alarm fires on any visible message in orders-outbox-event-bus-dlq and notifies alarms.actions."
  }

  assert {
    condition     = contains(keys(output.alarm_arns), "event_bus_dlq_depth")
    error_message = "The bus DLQ alarm must appear in alarm_arns."
  }
}

run "bus_dlq_alarm_can_be_turned_off" {
  command = plan

  variables {
    alarms = {
      disabled = ["event_bus_dlq_depth"]
      actions  = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  assert {
    condition     = !contains(keys(aws_cloudwatch_metric_alarm.this), "event_bus_dlq_depth") && length(aws_sqs_queue.event_bus_dlq) == 1
    error_message = "alarms.disabled = [\"event_bus_dlq_depth\"] turns the alarm off and keeps the queue."
  }
}

run "existing_bus_gets_no_dlq_from_the_module" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
    event_bus = {
      create = false
      name   = "shared"
    }
  }

  assert {
    condition = (
      length(aws_sqs_queue.event_bus_dlq) == 0
      && length(data.aws_iam_policy_document.event_bus_dlq) == 0
      && !contains(keys(aws_cloudwatch_metric_alarm.this), "event_bus_dlq_depth")
      && output.event_bus_dlq_arn == null
      && output.event_bus_dlq_url == null
    )
    error_message = "The module cannot set an existing bus's DLQ: no queue, no policy, no alarm, null outputs (the bus's owner sets it)."
  }
}

run "sns_has_no_bus_and_no_bus_dlq" {
  command = plan

  variables {
    publish_to = "sns"
  }

  assert {
    condition = (
      length(aws_sqs_queue.event_bus_dlq) == 0
      && !contains(keys(aws_cloudwatch_metric_alarm.this), "event_bus_dlq_depth")
      && output.event_bus_dlq_arn == null
    )
    error_message = "No bus DLQ with publish_to = \"sns\"."
  }
}

run "longest_name_keeps_the_bus_dlq_name_within_sqs_limits" {
  command = plan

  variables {
    name = "a234567890123456789012345678901234567890"
  }

  override_resource {
    target          = aws_cloudwatch_event_bus.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:events:eu-west-1:111122223333:event-bus/a234567890123456789012345678901234567890"
    }
  }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-event-bus-dlq"
    }
  }

  assert {
    condition     = length(aws_sqs_queue.event_bus_dlq[0].name) <= 80 && length(aws_cloudwatch_metric_alarm.this["event_bus_dlq_depth"].alarm_name) <= 255
    error_message = "A 40-character name must keep the bus DLQ's name within SQS's 80 characters."
  }
}

run "bus_arn_other_than_the_one_built_fails_plan" {
  command = plan

  override_resource {
    target          = aws_cloudwatch_event_bus.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:events:eu-west-1:444455556666:event-bus/orders-outbox"
    }
  }

  expect_failures = [aws_cloudwatch_event_bus.this]
}
