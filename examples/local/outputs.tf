output "region" {
  description = "Region the stack was applied to."
  value       = var.region
}

output "table_name" {
  description = "Name of the outbox table."
  value       = module.outbox.table_name
}

output "table_arn" {
  description = "ARN of the outbox table."
  value       = module.outbox.table_arn
}

output "table_stream_arn" {
  description = "ARN of the table's stream."
  value       = module.outbox.table_stream_arn
}

output "event_bus_name" {
  description = "Name of the bus."
  value       = module.outbox.event_bus_name
}

output "event_bus_arn" {
  description = "ARN of the bus."
  value       = module.outbox.event_bus_arn
}

output "event_bus_dlq_url" {
  description = "URL of the bus's dead-letter queue."
  value       = module.outbox.event_bus_dlq_url
}

output "event_bus_dlq_arn" {
  description = "ARN of the bus's dead-letter queue."
  value       = module.outbox.event_bus_dlq_arn
}

output "publisher_function_name" {
  description = "Name of the publisher function."
  value       = module.outbox.publisher_function_name
}

output "publisher_function_arn" {
  description = "ARN of the publisher function."
  value       = module.outbox.publisher_function_arn
}

output "publisher_role_arn" {
  description = "ARN of the publisher's role."
  value       = module.outbox.publisher_role_arn
}

output "stream_mapping_uuid" {
  description = "UUID of the stream mapping."
  value       = module.outbox.stream_mapping_uuid
}

output "stream_filter_pattern" {
  description = "The stream mapping's filter pattern."
  value       = module.outbox.stream_filter_pattern
}

output "on_failure_queue_url" {
  description = "URL of the on-failure queue."
  value       = module.outbox.on_failure_queue_url
}

output "on_failure_queue_arn" {
  description = "ARN of the on-failure queue."
  value       = module.outbox.on_failure_queue_arn
}

output "publisher_log_group_name" {
  description = "Publisher log group."
  value       = module.outbox.publisher_log_group_name
}

output "sweeper_log_group_name" {
  description = "Sweeper log group."
  value       = module.outbox.sweeper_log_group_name
}

output "sweeper_schedule_expression" {
  description = "When the sweeper runs (UTC)."
  value       = module.outbox.sweeper_schedule_expression
}

output "event_source" {
  description = "Source the consumer's rule matches."
  value       = var.event_source
}

output "consumers" {
  description = "Per consumer: queue, DLQ, rule, mapping, function, role."
  value       = module.outbox.consumers
}

output "idempotency_table_name" {
  description = "The consumers' idempotency table (and the reference consumer's ledger)."
  value       = module.outbox.idempotency_table_name
}

output "idempotency_table_arn" {
  description = "ARN of the idempotency table."
  value       = module.outbox.idempotency_table_arn
}

output "layer_arn" {
  description = "The dynamodb_outbox layer."
  value       = module.outbox.layer_arn
}

output "event_archive_name" {
  description = "The archive of the bus's events (outbox-ops replay)."
  value       = module.outbox.event_archive_name
}

output "event_archive_arn" {
  description = "ARN of the archive."
  value       = module.outbox.event_archive_arn
}

output "dashboard_name" {
  description = "The outbox's CloudWatch dashboard."
  value       = module.outbox.dashboard_name
}

output "sns_topic_arn" {
  description = "ARN of the SNS topic (publish_to = \"sns_fifo\"); null on the EventBridge path."
  value       = module.outbox.sns_topic_arn
}
