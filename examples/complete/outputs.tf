output "table_name" {
  description = "Name of the outbox table."
  value       = module.outbox.table_name
}

output "table_stream_arn" {
  description = "ARN of the table's stream."
  value       = module.outbox.table_stream_arn
}

output "event_bus_arn" {
  description = "ARN of the bus the outbox publishes to."
  value       = module.outbox.event_bus_arn
}

output "publisher_function_name" {
  description = "Name of the publisher function."
  value       = module.outbox.publisher_function_name
}

output "stream_mapping_uuid" {
  description = "UUID of the stream mapping."
  value       = module.outbox.stream_mapping_uuid
}

output "on_failure_queue_url" {
  description = "URL of the queue receiving records of abandoned stream batches: alarm on its depth."
  value       = module.outbox.on_failure_queue_url
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

output "kms_key_arn" {
  description = "ARN of the key encrypting the outbox."
  value       = aws_kms_key.outbox.arn
}

output "consumers" {
  description = "Per consumer: queue, DLQ, rule, mapping, function and the policy its role needs."
  value       = module.outbox.consumers
}

output "layer_arn" {
  description = "The dynamodb_outbox layer for the service's own functions."
  value       = module.outbox.layer_arn
}
