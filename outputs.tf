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

output "table_stream_arn" {
  description = "ARN of the table's stream the publisher reads."
  value       = local.table_stream_arn
}

################################################################################
# Event bus
################################################################################

output "event_bus_name" {
  description = "Name of the EventBridge bus the publisher puts events on."
  value       = try(aws_cloudwatch_event_bus.this[0].name, data.aws_cloudwatch_event_bus.existing[0].name)
}

output "event_bus_arn" {
  description = "ARN of the EventBridge bus the publisher puts events on."
  value       = local.event_bus_arn
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

output "log_group_name" {
  description = "Name of the publisher's CloudWatch log group."
  value       = aws_cloudwatch_log_group.publisher.name
}

output "stream_mapping_uuid" {
  description = "UUID of the event source mapping from the table's stream to the publisher."
  value       = aws_lambda_event_source_mapping.publisher.uuid
}

output "stream_filter_pattern" {
  description = "The mapping's only filter pattern (JSON): INSERTs of items whose SK starts with OUTBOX#."
  value       = local.stream_filter_pattern
}

output "on_failure_queue_url" {
  description = "URL of the SQS queue receiving records of the stream batches the mapping gave up on."
  value       = aws_sqs_queue.on_failure.url
}

output "on_failure_queue_arn" {
  description = "ARN of the SQS queue receiving records of the stream batches the mapping gave up on."
  value       = aws_sqs_queue.on_failure.arn
}
