################################################################################
# Table
################################################################################

output "table_name" {
  description = "Name of the outbox table (created or existing)."
  value       = try(aws_dynamodb_table.this[0].name, data.aws_dynamodb_table.existing[0].name)
}

output "table_arn" {
  description = "ARN of the outbox table."
  value       = local.table_arn
}

output "writer_environment" {
  description = "What the application's writer needs, as environment variables for `OutboxWriter.from_environment()`: the table (`OUTBOX_TABLE_NAME`), its key names (`OUTBOX_PARTITION_KEY`, `OUTBOX_SORT_KEY`) and the transport whose limits it enforces (`OUTBOX_PUBLISH_TO`), the values the publisher and the sweeper get. With multi_region, also `OUTBOX_MULTI_REGION = true`: the writer stamps its items with the runtime region (`AWS_REGION`)."
  value = merge(local.table_keys_environment, local.writer_multi_region_environment, {
    OUTBOX_TABLE_NAME = local.table_name
    OUTBOX_PUBLISH_TO = var.publish_to
  })
}

output "table_stream_arn" {
  description = "ARN of the table's stream the publisher reads."
  value       = local.table_stream_arn
}

################################################################################
# Event bus
################################################################################

output "event_bus_name" {
  description = "Name of the EventBridge bus the publisher puts events on; null when publish_to = \"sns\"."
  value       = try(aws_cloudwatch_event_bus.this[0].name, data.aws_cloudwatch_event_bus.existing[0].name, null)
}

output "event_bus_arn" {
  description = "ARN of the EventBridge bus the publisher puts events on; null when publish_to = \"sns\"."
  value       = local.event_bus_arn
}

output "event_bus_dlq_url" {
  description = "URL of the bus's dead-letter queue: events the bus accepted but could not encrypt or decrypt with kms_key_arn (the message body is the event). null for an existing bus or with publish_to = \"sns\"."
  value       = try(aws_sqs_queue.event_bus_dlq[0].url, null)
}

output "event_bus_dlq_arn" {
  description = "ARN of the bus's dead-letter queue; null for an existing bus or with publish_to = \"sns\"."
  value       = try(aws_sqs_queue.event_bus_dlq[0].arn, null)
}

output "event_archive_name" {
  description = "Name of the EventBridge archive of the bus's events (`outbox-ops replay --archive`); null when event_archive.enabled is false or with publish_to = \"sns\"."
  value       = try(aws_cloudwatch_event_archive.this[0].name, null)
}

output "event_archive_arn" {
  description = "ARN of the EventBridge archive of the bus's events; null when there is none."
  value       = try(aws_cloudwatch_event_archive.this[0].arn, null)
}

################################################################################
# Publisher
################################################################################

output "publisher_function_name" {
  description = "Name of the publisher Lambda function."
  value       = aws_lambda_function.publisher.function_name
}

output "publisher_function_arn" {
  description = "ARN of the publisher Lambda function."
  value       = aws_lambda_function.publisher.arn
}

output "publisher_role_arn" {
  description = "ARN of the publisher's execution role."
  value       = aws_iam_role.publisher.arn
}

output "publisher_log_group_name" {
  description = "Name of the publisher's CloudWatch log group."
  value       = aws_cloudwatch_log_group.publisher.name
}

output "log_group_name" {
  description = "Deprecated (0.2.0), removed in 0.3.0: use publisher_log_group_name, the same value."
  value       = aws_cloudwatch_log_group.publisher.name
}

output "stream_mapping_uuid" {
  description = "UUID of the event source mapping from the table's stream to the publisher."
  value       = aws_lambda_event_source_mapping.publisher.uuid
}

output "stream_filter_pattern" {
  description = "The mapping's only filter pattern (JSON): INSERTs of items whose sort key (table.sort_key) starts with OUTBOX#."
  value       = local.stream_filter_pattern
}

output "stream_filter_patterns" {
  description = "Every filter pattern (JSON) of the mapping, OR-ed: the one of stream_filter_pattern on a single-region outbox; with multi_region, the INSERTs stamped with this region and, where multi_region.publishes_unstamped, those carrying no region."
  value       = local.stream_filter_patterns
}

output "on_failure_queue_url" {
  description = "URL of the SQS queue receiving records of the stream batches the mapping gave up on."
  value       = aws_sqs_queue.on_failure.url
}

output "on_failure_queue_arn" {
  description = "ARN of the SQS queue receiving records of the stream batches the mapping gave up on."
  value       = aws_sqs_queue.on_failure.arn
}

################################################################################
# Publishing target
################################################################################

output "sns_topic_arn" {
  description = "ARN of the SNS topic the publisher publishes to when publish_to = \"sns\" or \"sns_fifo\"; null otherwise."
  value       = try(aws_sns_topic.this[0].arn, null)
}

################################################################################
# Consumers
################################################################################

output "consumers" {
  description = <<-EOT
    Per consumer key:
    - `queue_url`, `queue_arn`: its queue `<name>-<key>-consumer`;
    - `dlq_url`, `dlq_arn`: its DLQ (failed `max_receive_count` times, or undeliverable);
    - `rule_arn` (publish_to = "eventbridge") or `subscription_arn` (publish_to = "sns"),
      the other null;
    - `event_source_mapping_uuid`: the queue's mapping to the function;
    - `function_name`, `function_arn`: the function consuming the queue (the module's
      reference consumer, or yours);
    - `role_arn`, `log_group_name`: of the module's function; null for your own function;
    - `consumer_name`: the name the toolkit must use (`OUTBOX_CONSUMER_NAME`), i.e. the key;
    - `idempotency_expires_after_seconds`: how long its toolkit must remember an event id
      (derived from every window a copy can come through, docs/seams.md);
    - `environment`: what a toolkit function of yours needs in its environment
      (`OUTBOX_CONSUMER_NAME`, `OUTBOX_IDEMPOTENCY_TABLE`, `OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`),
      the same values the module gives its reference consumer;
    - `required_policy_json`: the IAM policy the function's role needs (queue, KMS key,
      idempotency records under its own prefixes); grant it to your function's role when
      you do not pass `function.role_name`.
  EOT
  value = {
    for key, c in local.consumers : key => {
      queue_url                         = aws_sqs_queue.consumer[key].url
      queue_arn                         = aws_sqs_queue.consumer[key].arn
      dlq_url                           = aws_sqs_queue.consumer_dlq[key].url
      dlq_arn                           = aws_sqs_queue.consumer_dlq[key].arn
      rule_arn                          = try(aws_cloudwatch_event_rule.consumer[key].arn, null)
      subscription_arn                  = try(aws_sns_topic_subscription.consumer[key].arn, null)
      event_source_mapping_uuid         = aws_lambda_event_source_mapping.consumer[key].uuid
      function_name                     = c.function == null ? aws_lambda_function.consumer[key].function_name : split(":", c.function.arn)[6]
      function_arn                      = c.function == null ? aws_lambda_function.consumer[key].arn : c.function.arn
      role_arn                          = try(aws_iam_role.consumer[key].arn, null)
      log_group_name                    = try(aws_cloudwatch_log_group.consumer[key].name, null)
      consumer_name                     = key
      idempotency_expires_after_seconds = local.consumer_idempotency_expires_after_seconds[key]
      environment                       = local.consumer_toolkit_environment[key]
      required_policy_json              = data.aws_iam_policy_document.consumer[key].json
    }
  }
}

output "consumer_environment" {
  description = <<-EOT
    The environment variables every consumer function needs so that the toolkit
    refuses messages the outbox did not send (dynamodb_outbox.sender_checks):
    `OUTBOX_CONSUMER_TRANSPORT` and the bus (`OUTBOX_CONSUMER_EVENT_BUS_ARN`) or topic
    (`OUTBOX_CONSUMER_TOPIC_ARN`). The module sets them on its reference consumers; merge
    them into your own functions' environment. They do not clash with
    `writer_environment` (of this outbox or another): a consumer may also write events.
    Without them the toolkit checks no sender and never reprocesses on a replay's name.
    Also `OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`:
    an idempotency window that covers any consumer of this outbox whatever its settings
    (queue retention and target retry at their maxima), at least every consumer's derived
    minimum (an explicit `consumers[k].idempotency_expires_after_seconds` above it is not
    reflected: set that value in your function's environment yourself); unlike the
    `consumers` output it does not depend on `consumers`, so the function whose ARN you
    give there can take it.
  EOT
  value       = merge(local.consumer_sender_environment, local.consumer_window_environment)
}

output "idempotency_table_name" {
  description = "Name of the consumers' idempotency table (hash key id, TTL on expiration); null when no consumer uses the toolkit."
  value       = try(aws_dynamodb_table.idempotency[0].name, null)
}

output "idempotency_table_arn" {
  description = "ARN of the consumers' idempotency table; null when no consumer uses the toolkit."
  value       = try(aws_dynamodb_table.idempotency[0].arn, null)
}

################################################################################
# Layer
################################################################################

output "powertools_layer_arn" {
  description = "Version ARN of the Powertools for AWS Lambda (Python) layer the module's functions run with; null when they run without one (powertools_layer_arn = \"\")."
  value       = local.powertools_layer_arn == "" ? null : local.powertools_layer_arn
}

output "layer_arn" {
  description = "Version ARN of the Lambda layer holding the dynamodb_outbox package (writer, envelope, consumer toolkit) for functions outside the module; null when create_layer is false. Add the Powertools layer too for the consumer toolkit."
  value       = try(aws_lambda_layer_version.this[0].arn, null)
}

################################################################################
# Sweeper
################################################################################

output "pending_index_name" {
  description = "Name of the sparse global secondary index of pending outbox items the sweeper reads (partition key outbox_pending_shard, sort key the table's sort key)."
  value       = local.pending_index_name
}

output "sweeper_function_name" {
  description = "Name of the sweeper Lambda function; null when sweeper.enabled is false."
  value       = try(aws_lambda_function.sweeper[0].function_name, null)
}

output "sweeper_function_arn" {
  description = "ARN of the sweeper Lambda function; null when sweeper.enabled is false."
  value       = try(aws_lambda_function.sweeper[0].arn, null)
}

output "sweeper_role_arn" {
  description = "ARN of the sweeper's execution role; null when sweeper.enabled is false."
  value       = try(aws_iam_role.sweeper[0].arn, null)
}

output "sweeper_log_group_name" {
  description = "Name of the sweeper's CloudWatch log group; null when sweeper.enabled is false."
  value       = try(aws_cloudwatch_log_group.sweeper[0].name, null)
}

output "sweeper_schedule_name" {
  description = "Name of the EventBridge Scheduler schedule (group \"default\") that runs the sweeper; null when sweeper.enabled is false."
  value       = try(aws_scheduler_schedule.sweeper[0].name, null)
}

output "sweeper_schedule_arn" {
  description = "ARN of the schedule that runs the sweeper; null when sweeper.enabled is false."
  value       = try(aws_scheduler_schedule.sweeper[0].arn, null)
}

output "sweeper_schedule_expression" {
  description = "When the sweeper runs: the schedule's rate() or cron() expression (UTC); null when sweeper.enabled is false."
  value       = try(aws_scheduler_schedule.sweeper[0].schedule_expression, null)
}

################################################################################
# Alarms
################################################################################

output "alarm_arns" {
  description = "ARNs of the CloudWatch alarms the module created, by key: publisher_iterator_age, publisher_errors, sweeper_errors, on_failure_queue_depth, event_bus_dlq_depth, quarantined_events, oldest_pending_item, and per consumer consumer_failed_invocations/<key>, consumer_dlq_depth/<key>, consumer_dlq_age/<key>, consumer_errors/<key>. Empty when alarms are off."
  value = merge(
    { for key, alarm in aws_cloudwatch_metric_alarm.this : key => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.quarantined_events : "quarantined_events" => alarm.arn },
  )
}

################################################################################
# Dashboard
################################################################################

output "dashboard_name" {
  description = "Name of the CloudWatch dashboard of the outbox's flow (`<name>-outbox`; with multi_region `<name>-outbox-<region>`, dashboards being global to the account); null when dashboard.enabled is false."
  value       = try(aws_cloudwatch_dashboard.this[0].dashboard_name, null)
}

output "dashboard_arn" {
  description = "ARN of the CloudWatch dashboard; null when dashboard.enabled is false."
  value       = try(aws_cloudwatch_dashboard.this[0].dashboard_arn, null)
}

output "forwarder_role_arn" {
  description = "With multi_region.forward_to_event_bus_arns: the role forwarding this region's events; give it to each receiving region's multi_region.receive_forwarded_from. Null otherwise."
  value       = try(aws_iam_role.forwarder[0].arn, null)
}
