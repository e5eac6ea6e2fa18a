################################################################################
# Alarms: settings
################################################################################

locals {
  alarm_enabled = {
    for key in [
      "publisher_iterator_age",
      "publisher_errors",
      "sweeper_errors",
      "on_failure_queue_depth",
      "event_bus_dlq_depth",
      "quarantined_events",
      "oldest_pending_item",
      "consumer_failed_invocations",
      "consumer_dlq_depth",
      "consumer_dlq_age",
      "consumer_errors",
      "consumer_untrusted_events",
    ] : key => local.alarms.enabled && !contains(local.alarms.disabled, key)
  }

  # The sweeper reports OldestPendingAgeSeconds on every run. In a healthy outbox
  # an item is at most min age old when it becomes sweepable, plus one interval
  # until the next run picks it up.
  oldest_pending_threshold_seconds = (
    local.alarms.oldest_pending_age_threshold_seconds != null
    ? local.alarms.oldest_pending_age_threshold_seconds
    : (local.sweeper_interval_seconds == null ? null : local.sweeper.min_age_seconds + local.sweeper_interval_seconds)
  )
  # At least one run reports per period (missing data breaches): the schedule's
  # interval, or the threshold for a cron() schedule, in whole minutes; two
  # periods must breach, so one late run never fires it.
  oldest_pending_period_seconds = min(43200, max(60, ceil(coalesce(local.sweeper_interval_seconds, local.oldest_pending_threshold_seconds, 3600) / 60) * 60))

  # The metric of each single-metric alarm (the quarantine alarm adds two up: see
  # below), whether or not the alarm is on: the dashboard (dashboard.tf) draws them too.
  alarm_metrics = {
    publisher_iterator_age = {
      description        = "The publisher ${local.publisher_name} is falling behind its stream: the age of the newest record it read exceeds ${local.alarms.publisher_iterator_age_threshold_ms} ms. Stream records are trimmed after 24 hours (the sweeper then re-publishes the items)."
      namespace          = "AWS/Lambda"
      metric_name        = "IteratorAge"
      statistic          = "Maximum"
      dimensions         = tomap({ FunctionName = aws_lambda_function.publisher.function_name })
      threshold          = local.alarms.publisher_iterator_age_threshold_ms
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
    publisher_errors = {
      description        = "The publisher ${local.publisher_name} failed invocations (errors, timeouts). Its stream mapping retries, bisects, and records what it gives up on in the on-failure queue."
      namespace          = "AWS/Lambda"
      metric_name        = "Errors"
      statistic          = "Sum"
      dimensions         = tomap({ FunctionName = aws_lambda_function.publisher.function_name })
      threshold          = local.alarms.publisher_errors_threshold
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
    sweeper_errors = {
      description        = "The sweeper ${local.sweeper_name} failed invocations (errors, timeouts): pending outbox items are not being re-published."
      namespace          = "AWS/Lambda"
      metric_name        = "Errors"
      statistic          = "Sum"
      dimensions         = tomap({ FunctionName = try(aws_lambda_function.sweeper[0].function_name, "") })
      threshold          = local.alarms.sweeper_errors_threshold
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
    on_failure_queue_depth = {
      description        = "The stream mapping of ${local.publisher_name} gave up on a batch: its record (shard and sequence numbers) is in ${local.on_failure_queue_name}. The outbox items stay in the table for the sweeper."
      namespace          = "AWS/SQS"
      metric_name        = "ApproximateNumberOfMessagesVisible"
      statistic          = "Maximum"
      dimensions         = tomap({ QueueName = aws_sqs_queue.on_failure.name })
      threshold          = 0
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
    event_bus_dlq_depth = {
      description        = "The bus ${local.event_bus_name} could not encrypt or decrypt events with its customer key (key disabled, pending deletion, or no longer allowing events.amazonaws.com): they are in ${local.event_bus_dlq_name}, not on any rule, and their outbox items are already deleted. Fix the key, then put them back on the bus (README, Alarms runbook) within the queue's 14 days."
      namespace          = "AWS/SQS"
      metric_name        = "ApproximateNumberOfMessagesVisible"
      statistic          = "Maximum"
      dimensions         = tomap({ QueueName = try(aws_sqs_queue.event_bus_dlq[0].name, "") })
      threshold          = 0
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
    oldest_pending_item = {
      description        = "An outbox item of ${local.table_name} has been pending longer than ${coalesce(local.oldest_pending_threshold_seconds, 0)} s (sweeper min age plus its interval), or the sweeper ${local.sweeper_name} stopped reporting (missing data breaches)."
      namespace          = local.metrics_namespace
      metric_name        = "OldestPendingAgeSeconds"
      statistic          = "Maximum"
      dimensions         = tomap({ service = try(aws_lambda_function.sweeper[0].environment[0].variables["POWERTOOLS_SERVICE_NAME"], "") })
      threshold          = coalesce(local.oldest_pending_threshold_seconds, 0)
      period             = local.oldest_pending_period_seconds
      evaluation_periods = 2
      treat_missing_data = "breaching"
    }
  }

  # Those of the metrics above whose alarm is on and whose resource exists.
  metric_alarms = {
    for key, alarm in local.alarm_metrics :
    key => merge(alarm, { name = "${var.name}-${replace(key, "_", "-")}" }) if local.alarm_enabled[key] && local.alarm_metric_exists[key]
  }
  alarm_metric_exists = { for key in keys(local.alarm_metrics) : key => lookup(local.alarm_resource_exists, key, true) }

  # Alarms on a resource that only exists in some configurations.
  alarm_resource_exists = {
    sweeper_errors      = local.sweeper_enabled
    oldest_pending_item = local.sweeper_enabled
    event_bus_dlq_depth = local.create_event_bus_dlq
  }

  # Per consumer, keyed "<alarm>/<consumer key>". Rules exist with publish_to =
  # "eventbridge" only; their metrics carry EventBusName except on the default bus.
  consumer_rule_metrics = {
    for key, rule in aws_cloudwatch_event_rule.consumer : "consumer_failed_invocations/${key}" => {
      name               = "${local.consumer_names[key]}-failed-invocations"
      description        = "EventBridge failed to deliver events of ${var.name} to the ${key} consumer's queue after its retries (they went to ${local.consumer_names[key]}-dlq)."
      namespace          = "AWS/Events"
      metric_name        = "FailedInvocations"
      statistic          = "Sum"
      dimensions         = local.event_bus_name == "default" ? tomap({ RuleName = rule.name }) : tomap({ EventBusName = local.event_bus_name, RuleName = rule.name })
      threshold          = 0
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
  }

  consumer_dlq_metrics = merge(
    {
      for key, dlq in aws_sqs_queue.consumer_dlq : "consumer_dlq_depth/${key}" => {
        name               = "${local.consumer_names[key]}-dlq-depth"
        description        = "Events for the ${key} consumer of ${var.name} are in its DLQ ${dlq.name}: its function failed them ${local.consumers[key].max_receive_count} times, or they could not be delivered. Fix the cause, then move them back to the queue."
        namespace          = "AWS/SQS"
        metric_name        = "ApproximateNumberOfMessagesVisible"
        statistic          = "Maximum"
        dimensions         = tomap({ QueueName = dlq.name })
        threshold          = 0
        period             = local.alarms.period_seconds
        evaluation_periods = 1
        treat_missing_data = "notBreaching"
      }
    },
    {
      for key, dlq in aws_sqs_queue.consumer_dlq : "consumer_dlq_age/${key}" => {
        name               = "${local.consumer_names[key]}-dlq-age"
        description        = "The oldest message in ${dlq.name} (the ${key} consumer's DLQ) has been there ${module.windows.consumer_dlq_age_threshold_seconds[key]} s; SQS deletes it ${module.windows.dlq_life_after_move_seconds[key]} s after the move at the earliest. Redrive it before (outbox-ops redrive): the consumer's idempotency window covers a redrive until then."
        namespace          = "AWS/SQS"
        metric_name        = "ApproximateAgeOfOldestMessage"
        statistic          = "Maximum"
        dimensions         = tomap({ QueueName = dlq.name })
        threshold          = module.windows.consumer_dlq_age_threshold_seconds[key]
        period             = local.alarms.period_seconds
        evaluation_periods = 1
        treat_missing_data = "notBreaching"
      }
    },
  )

  # The function consuming each queue, the module's reference consumer or the
  # caller's own: invocations that raised or timed out. The toolkit reports failed
  # messages as partial batch failures, which are not Errors; an error is the
  # whole batch back on the queue (the DLQ alarms fire only receives later).
  consumer_function_metrics = {
    for key, c in local.consumers : "consumer_errors/${key}" => {
      name               = "${local.consumer_names[key]}-errors"
      description        = "The function consuming the ${key} queue of ${var.name} failed invocations (errors, timeouts): the whole batch goes back to ${local.consumer_names[key]} and, after ${c.max_receive_count} receives, to its DLQ."
      namespace          = "AWS/Lambda"
      metric_name        = "Errors"
      statistic          = "Sum"
      dimensions         = tomap({ FunctionName = c.function == null ? aws_lambda_function.consumer[key].function_name : split(":", c.function.arn)[6] })
      threshold          = 0
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
  }

  # The module's reference consumers: messages refused because they are not what
  # the bus or topic delivers (the toolkit's UntrustedEvents, Powertools service
  # "<name>-<key>"). A caller's function reports it under its own service name.
  consumer_untrusted_metrics = {
    for key, c in local.module_consumers : "consumer_untrusted_events/${key}" => {
      name               = "${local.consumer_names[key]}-untrusted-events"
      description        = "The ${key} consumer of ${var.name} refused messages that its bus or topic cannot have delivered (a forged event, a wrong replay name, or a queue another sender writes to). They are never processed; after ${c.max_receive_count} receives they wait in ${local.consumer_names[key]}-dlq. Find the sender (docs/threat-model.md)."
      namespace          = local.metrics_namespace
      metric_name        = "UntrustedEvents"
      statistic          = "Sum"
      dimensions         = tomap({ service = aws_lambda_function.consumer[key].environment[0].variables["POWERTOOLS_SERVICE_NAME"] })
      threshold          = 0
      period             = local.alarms.period_seconds
      evaluation_periods = 1
      treat_missing_data = "notBreaching"
    }
  }

  # The per-consumer alarms that are on, keyed "<alarm>/<consumer key>".
  consumer_alarms = {
    for key, alarm in merge(local.consumer_rule_metrics, local.consumer_dlq_metrics, local.consumer_function_metrics, local.consumer_untrusted_metrics) :
    key => alarm if local.alarm_enabled[split("/", key)[0]]
  }

  # QuarantinedEvents of the publisher and of the sweeper (each has its own
  # Powertools service dimension), missing points read as 0.
  quarantine_metric_services = compact([
    aws_lambda_function.publisher.environment[0].variables["POWERTOOLS_SERVICE_NAME"],
    try(aws_lambda_function.sweeper[0].environment[0].variables["POWERTOOLS_SERVICE_NAME"], ""),
  ])
}

################################################################################
# Alarms: someone to notify
################################################################################

# Alarms without actions change state in the console and notify no one. Not an
# error (a caller may wire them elsewhere, e.g. through EventBridge's alarm state
# change events), so a warning at every plan rather than a validation.
check "alarms_notify_someone" {
  assert {
    condition     = !anytrue(values(local.alarm_enabled)) || length(local.alarms.actions) > 0
    error_message = "alarms.actions is empty: the outbox's alarms (stream falling behind, quarantined events, messages in a DLQ, ...) will change state without notifying anyone. Set alarms.actions to an SNS topic ARN (and ok_actions if you want the all-clear), or alarms.enabled = false if you alarm on these metrics elsewhere."
  }
}

################################################################################
# Alarms: one metric each
################################################################################

resource "aws_cloudwatch_metric_alarm" "this" {
  for_each = merge(
    local.metric_alarms,
    local.consumer_alarms,
  )

  alarm_name        = each.value.name
  alarm_description = each.value.description

  namespace   = each.value.namespace
  metric_name = each.value.metric_name
  statistic   = each.value.statistic
  dimensions  = each.value.dimensions

  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  period              = each.value.period
  evaluation_periods  = each.value.evaluation_periods
  datapoints_to_alarm = each.value.evaluation_periods
  treat_missing_data  = each.value.treat_missing_data

  alarm_actions = local.alarms.actions
  ok_actions    = local.alarms.ok_actions

  tags = local.tags

  lifecycle {
    # The DLQ-age alarm must fire while SQS still keeps the message (docs/seams.md, Windows).
    precondition {
      condition     = !startswith(each.key, "consumer_dlq_age/") || try(module.windows.consumer_dlq_age_threshold_seconds[split("/", each.key)[1]] + local.alarms.period_seconds < module.windows.dlq_life_after_move_seconds[split("/", each.key)[1]] || module.windows.dlq_life_after_move_seconds[split("/", each.key)[1]] == 0, true)
      error_message = "The DLQ-age alarm of consumer ${try(split("/", each.key)[1], "")} (threshold ${each.value.threshold} s, plus alarms.period_seconds ${local.alarms.period_seconds} s before it fires) does not fire before SQS deletes a message from its DLQ: a message moved there after waiting its queue's message_retention_seconds (${try(local.consumers[split("/", each.key)[1]].message_retention_seconds, "")}) is kept ${try(module.windows.dlq_life_after_move_seconds[split("/", each.key)[1]], "")} s more (a standard DLQ counts retention from the first enqueue). Lower alarms.consumer_dlq_age_threshold_seconds (or leave it null to derive it), alarms.period_seconds, or the queue's message_retention_seconds (docs/seams.md, Windows)."
    }
    precondition {
      condition     = each.key != "oldest_pending_item" || local.oldest_pending_threshold_seconds != null
      error_message = "With a cron() sweeper schedule, set alarms.oldest_pending_age_threshold_seconds (the age a pending item must never reach: sweeper.min_age_seconds plus the longest gap between runs), or add \"oldest_pending_item\" to alarms.disabled."
    }
  }
}

################################################################################
# Alarms: quarantined items
################################################################################

resource "aws_cloudwatch_metric_alarm" "quarantined_events" {
  count = local.alarm_enabled["quarantined_events"] ? 1 : 0

  alarm_name        = "${var.name}-quarantined-events"
  alarm_description = "The publisher or the sweeper quarantined poison outbox items of ${local.table_name}: they stay in the table, marked, out of the pending index, until an operator fixes and releases them."

  metric_query {
    id          = "quarantined"
    label       = "QuarantinedEvents (publisher + sweeper)"
    expression  = join(" + ", [for i, _ in local.quarantine_metric_services : "FILL(m${i}, 0)"])
    return_data = true
  }

  dynamic "metric_query" {
    for_each = local.quarantine_metric_services

    content {
      id          = "m${metric_query.key}"
      return_data = false

      metric {
        namespace   = local.metrics_namespace
        metric_name = "QuarantinedEvents"
        stat        = "Sum"
        period      = local.alarms.period_seconds
        dimensions  = { service = metric_query.value }
      }
    }
  }

  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  alarm_actions = local.alarms.actions
  ok_actions    = local.alarms.ok_actions

  tags = local.tags
}
