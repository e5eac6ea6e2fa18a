output "table_name" {
  description = "The outbox table producer.py writes to."
  value       = module.outbox.table_name
}

output "sns_topic_arn" {
  description = "The topic the outbox publishes to."
  value       = module.outbox.sns_topic_arn
}

output "consumers" {
  description = "Per consumer: queue, DLQ, subscription, mapping and function."
  value       = module.outbox.consumers
}
