output "table_name" {
  description = "The global table both regions' writers write to (each in its own region)."
  value       = module.outbox_home.table_name
}

output "writer_environment" {
  description = "Per region, the producer's environment for OutboxWriter.from_environment() (OUTBOX_MULTI_REGION included; the runtime's AWS_REGION is the stamp)."
  value = {
    (var.home_region)  = module.outbox_home.writer_environment
    (var.other_region) = module.outbox_other.writer_environment
  }
}

output "event_bus_names" {
  description = "Per region, the bus the region's events are published to."
  value = {
    (var.home_region)  = module.outbox_home.event_bus_name
    (var.other_region) = module.outbox_other.event_bus_name
  }
}
