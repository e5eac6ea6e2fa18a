output "table_name" {
  description = "The application's table, which now holds the outbox items."
  value       = module.outbox.table_name
}

output "event_bus_name" {
  description = "The application's bus the outbox publishes to."
  value       = module.outbox.event_bus_name
}

output "idempotency_table_name" {
  description = "The consumers' idempotency table (and the reference consumer's ledger)."
  value       = module.outbox.idempotency_table_name
}

output "consumers" {
  description = "Per consumer: queue, DLQ, rule, mapping and function."
  value       = module.outbox.consumers
}
