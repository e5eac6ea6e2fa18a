output "table_name" {
  description = "The outbox table producer.py writes to."
  value       = module.outbox.table_name
}

output "sns_topic_arn" {
  description = "The FIFO topic the outbox publishes to (its name ends in .fifo)."
  value       = module.outbox.sns_topic_arn
}

output "consumers" {
  description = "Per consumer: FIFO queue, FIFO DLQ, subscription, mapping and function."
  value       = module.outbox.consumers
}
