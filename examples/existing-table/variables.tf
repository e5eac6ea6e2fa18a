variable "region" {
  description = "AWS Region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "table_name" {
  description = "Name of the application's table (created here to stand for an existing one)."
  type        = string
  default     = "orders"
}

variable "event_bus_name" {
  description = "Name of the application's bus (created here to stand for an existing one)."
  type        = string
  default     = "commerce"
}

variable "event_source" {
  description = "The `source` the producer's events carry (producer.py's OutboxWriter source)."
  type        = string
  default     = "shop.orders"
}
