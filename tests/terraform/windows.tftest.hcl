# The windows that must agree across days (modules/windows, docs/seams.md
# "Windows"): the consumers' idempotency window, derived from every place a copy
# of an event can still come from; explicit values that break it refused at
# plan; the DLQ-age alarm derived from the same numbers.
# Run from the repository root:
#   terraform test -test-directory=tests/terraform -filter=tests/terraform/windows.tftest.hcl

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq" }
}

override_resource {
  target          = aws_sqs_queue.consumer["audit"]
  override_during = plan
  values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer" }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq" }
}

override_resource {
  target          = aws_dynamodb_table.idempotency[0]
  override_during = plan
  values          = { arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency" }
}

override_resource {
  target          = aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values          = { arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer" }
}

variables {
  alarms    = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name      = "orders-outbox"
  consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}" } }
}

# Defaults: stream 24 h + target retry 24 h + DLQ 14 days (standard: from the
# first enqueue) + queue 4 days again after a redrive = 20 days. Today's 7 days
# let a copy redriven on day 8 take effect twice.
run "default_window_is_twenty_days_and_reaches_the_function_and_the_output" {
  command = plan

  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 20 * 86400
    error_message = "With the defaults the window is 1 (stream) + 1 (target retry) + 14 (DLQ) + 4 (queue, after a redrive) = 20 days, got ${module.windows.minimum_idempotency_seconds["audit"]} s."
  }

  assert {
    condition     = aws_lambda_function.consumer["audit"].environment[0].variables["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(20 * 86400)
    error_message = "The reference consumer must keep its records for the derived window."
  }

  assert {
    condition = (
      output.consumers["audit"].idempotency_expires_after_seconds == 20 * 86400
      && output.consumers["audit"].environment == merge(output.consumer_environment, {
        OUTBOX_CONSUMER_NAME                     = "audit"
        OUTBOX_IDEMPOTENCY_TABLE                 = "orders-outbox-idempotency"
        OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS = tostring(20 * 86400)
      })
    )
    error_message = "The consumers output must give a caller's own function the same window and settings as the reference consumer."
  }

  assert {
    condition     = aws_sqs_queue.consumer_dlq["audit"].message_retention_seconds == 1209600
    error_message = "The consumer DLQ keeps 14 days, the window's DLQ term."
  }

  # What a caller's own function can take without a cycle (consumer_environment
  # does not depend on `consumers`): the window of a consumer whose queue keeps
  # 14 days and whose target retries 24 h: 1 + 1 + 14 + 14 = 30 days.
  assert {
    condition     = output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(30 * 86400)
    error_message = "consumer_environment must carry the longest window any consumer can need: 30 days on eventbridge, got ${output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]}."
  }

  # A standard DLQ keeps a message 14 days from its first enqueue; moved after
  # the queue's 4 days it has 10 left: the alarm fires at half of that.
  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold == 5 * 86400
    error_message = "The DLQ-age alarm fires after 5 days in the DLQ (half of the 10 days a message moved after 4 days has left), got ${aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold}."
  }
}

run "a_longer_queue_retention_and_a_long_archive_widen_the_window" {
  command = plan

  variables {
    consumers     = { audit = { event_pattern = "{\"source\":[\"orders\"]}", message_retention_seconds = 1209600, maximum_event_age_in_seconds = 3600 } }
    event_archive = { retention_days = 90 }
  }

  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 90 * 86400
    error_message = "An archive kept 90 days needs a 90-day window, got ${module.windows.minimum_idempotency_seconds["audit"]}."
  }

  # Queue and DLQ both 14 days: a message moved on its last queue day is
  # deleted at once; the alarm fires on any age.
  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold == 0
    error_message = "With the queue kept as long as the DLQ, any message in the DLQ is due: threshold 0."
  }
}

run "a_slow_sweeper_schedule_widens_the_window_by_its_republish" {
  command = plan

  variables {
    sweeper = { schedule_expression = "rate(2 days)" }
  }

  # The sweeper may re-publish an item until its oldest-pending alarm (min age
  # 300 s + 2 days) fires: that replaces the stream's 24 h.
  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == (300 + 2 * 86400) + 86400 + 1209600 + 345600
    error_message = "The republish term is the sweeper's min age plus its interval, got ${module.windows.minimum_idempotency_seconds["audit"]}."
  }
}

run "sns_fifo_counts_sns_retries_and_the_fifo_dlq_resetting_the_enqueue_time" {
  command = plan

  variables {
    publish_to = "sns_fifo"
    consumers  = { audit = { filter_policy = "{\"event_type\":[\"OrderCreated\"]}" } }
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer["audit"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer_dlq["audit"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq.fifo" }
  }

  # 1 (stream) + 23 (SNS to SQS) + 4 (queue) + 14 (FIFO DLQ, from the move) + 4 (after a redrive).
  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 46 * 86400
    error_message = "sns_fifo: 1 + 23 + 4 + 14 + 4 = 46 days, got ${module.windows.minimum_idempotency_seconds["audit"]} s."
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold == 7 * 86400
    error_message = "A FIFO DLQ keeps a message 14 days from its move: the alarm fires after 7."
  }

  # 1 + 23 + 14 + 14 + 14 = 66 days, whatever the consumers' settings.
  assert {
    condition     = output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(66 * 86400)
    error_message = "sns_fifo: consumer_environment's window must be 66 days, got ${output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]}."
  }
}

run "sns_counts_sns_retries_to_sqs" {
  command = plan

  variables {
    publish_to = "sns"
    consumers  = { audit = { filter_policy = "{\"event_type\":[\"OrderCreated\"]}" } }
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox" }
  }

  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 42 * 86400
    error_message = "sns: 1 + 23 + 14 + 4 = 42 days, got ${module.windows.minimum_idempotency_seconds["audit"]} s."
  }

  # 1 + 23 + 14 + 14 = 52 days: at least the 42 the consumer needs.
  assert {
    condition     = output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(52 * 86400)
    error_message = "sns: consumer_environment's window must be 52 days, got ${output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]}."
  }
}

# The bus's own DLQ receives the events the bus cannot encrypt or decrypt with
# its customer key; the runbook puts them back on the bus within its 14 days,
# after which each is delivered like a first copy: 14 days more.
run "a_bus_with_a_customer_key_adds_its_dlq_retention_to_the_window" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
  }

  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 34 * 86400
    error_message = "With the bus DLQ: 1 + 14 (bus DLQ) + 1 + 14 + 4 = 34 days, got ${module.windows.minimum_idempotency_seconds["audit"]} s."
  }

  assert {
    condition     = output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(44 * 86400)
    error_message = "With the bus DLQ the bound is 1 + 14 + 1 + 14 + 14 = 44 days, got ${output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]}."
  }
}

# A weekly cron() sweeper with its threshold set: the window counts the
# threshold (8 days), not a day.
run "a_cron_sweeper_schedule_widens_the_window_by_its_explicit_threshold" {
  command = plan

  variables {
    sweeper = { schedule_expression = "cron(0 3 ? * MON *)" }
    alarms = {
      actions                              = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      disabled                             = ["oldest_pending_item"]
      oldest_pending_age_threshold_seconds = 8 * 86400
    }
  }

  assert {
    condition     = module.windows.minimum_idempotency_seconds["audit"] == 27 * 86400
    error_message = "8 (the sweeper's threshold) + 1 + 14 + 4 = 27 days, got ${module.windows.minimum_idempotency_seconds["audit"]} s."
  }
}

# The alarm fires up to a period after its threshold: both must come before SQS
# deletes the message. A queue kept 13 days leaves a moved message 1 day.
run "a_dlq_age_threshold_that_fires_only_after_the_deletion_once_its_period_counts_is_refused" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", message_retention_seconds = 13 * 86400 } }
    alarms = {
      actions                            = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      period_seconds                     = 3600
      consumer_dlq_age_threshold_seconds = 86400 - 1800
    }
  }

  expect_failures = [aws_cloudwatch_metric_alarm.this]
}

run "the_derived_dlq_age_threshold_leaves_its_period_before_the_deletion" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", message_retention_seconds = 1209600 - 7200 } }
    alarms = {
      actions        = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      period_seconds = 3600
    }
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold == 3599
    error_message = "Two hours of DLQ life and a one-hour period: the alarm must cross at 3599 s, got ${aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold}."
  }
}

run "an_explicit_window_at_least_the_minimum_is_kept" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", idempotency_expires_after_seconds = 30 * 86400 } }
  }

  assert {
    condition     = aws_lambda_function.consumer["audit"].environment[0].variables["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == tostring(30 * 86400)
    error_message = "An explicit window above the minimum is the one the consumer keeps."
  }
}

run "an_explicit_window_shorter_than_a_copy_can_arrive_is_refused" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", idempotency_expires_after_seconds = 7 * 86400 } }
  }

  expect_failures = [aws_sqs_queue.consumer_dlq]
}

run "an_explicit_dlq_age_threshold_firing_after_sqs_deletes_is_refused" {
  command = plan

  variables {
    alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"], consumer_dlq_age_threshold_seconds = 10 * 86400 }
  }

  expect_failures = [aws_cloudwatch_metric_alarm.this]
}

run "an_explicit_dlq_age_threshold_before_the_deletion_is_kept" {
  command = plan

  variables {
    alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"], consumer_dlq_age_threshold_seconds = 86400 }
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_dlq_age/audit"].threshold == 86400
    error_message = "An explicit threshold that fires in time is kept."
  }
}

# One setting, one source: the writer's settings are the publisher's and the
# sweeper's, taken from the same locals (OutboxWriter.from_environment reads them).
run "the_writer_gets_the_table_keys_and_transport_the_publisher_and_sweeper_get" {
  command = plan

  variables {
    table = { partition_key = "pk", sort_key = "sk" }
  }

  assert {
    condition = output.writer_environment == {
      OUTBOX_TABLE_NAME    = "orders-outbox"
      OUTBOX_PARTITION_KEY = "pk"
      OUTBOX_SORT_KEY      = "sk"
      OUTBOX_PUBLISH_TO    = "eventbridge"
    }
    error_message = "writer_environment must name the table, its keys and the transport."
  }

  assert {
    condition = alltrue([
      for name, value in output.writer_environment :
      aws_lambda_function.publisher.environment[0].variables[name] == value
      && aws_lambda_function.sweeper[0].environment[0].variables[name] == value
    ])
    error_message = "The writer must get exactly what the publisher and the sweeper get."
  }
}
