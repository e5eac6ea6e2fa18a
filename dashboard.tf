################################################################################
# Dashboard: what it draws
################################################################################

locals {
  # CloudWatch dashboards are global to the account, not regional: with
  # multi_region each region's instance (same name) needs one of its own.
  dashboard_name = local.multi_region ? "${var.name}-outbox-${local.region_name}" : "${var.name}-outbox"

  # Powertools' `service` dimension of each function's metrics (namespace
  # local.metrics_namespace). A caller's toolkit function reports under its own
  # POWERTOOLS_SERVICE_NAME, or its consumer name, the key: the latter is drawn.
  publisher_service = aws_lambda_function.publisher.environment[0].variables["POWERTOOLS_SERVICE_NAME"]
  sweeper_service   = try(aws_lambda_function.sweeper[0].environment[0].variables["POWERTOOLS_SERVICE_NAME"], "")
  consumer_services = {
    for key, c in local.consumers : key => c.function == null ? aws_lambda_function.consumer[key].environment[0].variables["POWERTOOLS_SERVICE_NAME"] : key
  }

  # A metric the module emits (lambda/dynamodb_outbox: publisher, sweeper and
  # consumer toolkit record_metrics / add_metric), summed per period.
  outbox_metric = { namespace = local.metrics_namespace, statistic = "Sum" }

  # One row per hop, in the order events travel; each widget lists its metrics
  # (the alarms' own definitions where there is an alarm, whose threshold is then
  # drawn) and whether what it measures exists in this configuration.
  dashboard_rows = concat([
    [
      {
        title   = "1. Writes: TransactWriteItems on ${local.table_name}"
        exists  = true
        alarm   = null
        metrics = [{ namespace = "AWS/DynamoDB", metric_name = "SuccessfulRequestLatency", statistic = "SampleCount", dimensions = { TableName = local.table_name, Operation = "TransactWriteItems" }, label = "transactions (entity + outbox item)" }]
      },
      {
        title   = "2. Stream: publisher iterator age (ms)"
        exists  = true
        alarm   = "publisher_iterator_age"
        metrics = [merge(local.alarm_metrics.publisher_iterator_age, { label = "IteratorAge" })]
      },
      {
        title   = "3. Published"
        exists  = true
        alarm   = null
        metrics = [merge(local.outbox_metric, { metric_name = "PublishedEvents", dimensions = { service = local.publisher_service }, label = "publisher" })]
      },
      {
        title   = "4. Quarantined (publisher + sweeper)"
        exists  = true
        alarm   = "quarantined_events"
        metrics = [for service in local.quarantine_metric_services : merge(local.outbox_metric, { metric_name = "QuarantinedEvents", dimensions = { service = service }, label = service })]
      },
    ],
    [
      {
        title   = "5. Oldest pending outbox item (s)"
        exists  = local.alarm_metric_exists.oldest_pending_item
        alarm   = "oldest_pending_item"
        metrics = [merge(local.alarm_metrics.oldest_pending_item, { label = "OldestPendingAgeSeconds" })]
      },
      {
        title  = "6. Sweeper recoveries"
        exists = local.sweeper_enabled
        alarm  = null
        # With a standing adoption (multi_region.adopted_regions): the lost regions'
        # released items it leaves to their own region until adopt_after_seconds.
        metrics = concat(
          [merge(local.outbox_metric, { metric_name = "SweptEvents", dimensions = { service = local.sweeper_service }, label = "re-published by the sweeper" })],
          length(local.adopted_regions) > 0 ? [merge(local.outbox_metric, { metric_name = "AdoptionWaitsForRelease", dimensions = { service = local.sweeper_service }, label = "adopted regions' released items left to their region" })] : [],
        )
      },
      {
        title   = "7. Stream batches given up (on-failure queue)"
        exists  = true
        alarm   = "on_failure_queue_depth"
        metrics = [merge(local.alarm_metrics.on_failure_queue_depth, { label = "messages" })]
      },
    ],
    ], [
    for key in keys(local.consumers) : [
      {
        title  = "${key}: processed / failed / duplicates"
        exists = contains(local.toolkit_consumer_keys, key)
        alarm  = null
        metrics = [
          for name, label in { ProcessedEvents = "processed", FailedEvents = "failed", DuplicateEvents = "duplicates" } :
          merge(local.outbox_metric, { metric_name = name, dimensions = { service = local.consumer_services[key] }, label = label })
        ]
      },
      {
        title   = "${key}: queue age (s)"
        exists  = true
        alarm   = null
        metrics = [{ namespace = "AWS/SQS", metric_name = "ApproximateAgeOfOldestMessage", statistic = "Maximum", dimensions = { QueueName = local.consumer_names[key] }, label = "oldest message" }]
      },
      {
        title   = "${key}: DLQ depth"
        exists  = true
        alarm   = "consumer_dlq_depth/${key}"
        metrics = [merge(local.consumer_dlq_metrics["consumer_dlq_depth/${key}"], { label = "messages" })]
      },
    ]
  ])

  # Thresholds of the alarms that are on, by alarm key.
  dashboard_thresholds = merge(
    { for key, alarm in merge(local.metric_alarms, local.consumer_alarms) : key => alarm.threshold },
    local.alarm_enabled["quarantined_events"] ? { quarantined_events = 0 } : {},
  )

  dashboard_widgets = flatten([
    for row_index, row in local.dashboard_rows : [
      for index, widget in [for w in row : w if w.exists] : {
        type   = "metric"
        x      = index * floor(24 / length([for w in row : w if w.exists]))
        y      = row_index * 6
        width  = floor(24 / length([for w in row : w if w.exists]))
        height = 6
        properties = {
          title   = widget.title
          region  = local.region_name
          view    = "timeSeries"
          stacked = false
          period  = local.alarms.period_seconds
          # [namespace, metric name, dimension name, value, ..., options]
          metrics = [
            for metric in widget.metrics : concat(
              [metric.namespace, metric.metric_name],
              flatten([for name, value in metric.dimensions : [name, value]]),
              [{ stat = metric.statistic, label = metric.label }],
            )
          ]
          annotations = {
            horizontal = [
              for key, threshold in local.dashboard_thresholds : { label = "alarm ${key}", value = threshold } if key == widget.alarm
            ]
          }
        }
      }
    ]
  ])
}

################################################################################
# Dashboard
################################################################################

resource "aws_cloudwatch_dashboard" "this" {
  count = local.dashboard.enabled ? 1 : 0

  dashboard_name = local.dashboard_name
  dashboard_body = jsonencode({ widgets = local.dashboard_widgets })
}
