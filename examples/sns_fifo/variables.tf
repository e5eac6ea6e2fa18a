variable "region" {
  description = "AWS Region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "shipping_zip_path" {
  description = "Zip of consumer.py, the shipping function (`python3 -m zipfile -c shipping.zip consumer.py`)."
  type        = string
  default     = "shipping.zip"
}

variable "event_source" {
  description = "The `source` the producer's events carry (producer.py's OutboxWriter source)."
  type        = string
  default     = "shop.orders"
}
