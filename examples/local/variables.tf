variable "endpoint_url" {
  description = "URL of the local AWS emulator (a moto server) every AWS API call goes to."
  type        = string
  default     = "http://127.0.0.1:5000"
}

variable "region" {
  description = "Region the emulator pretends to be."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Name of the outbox."
  type        = string
  default     = "outbox-local"
}

variable "publish_to" {
  description = "The module's publish_to: \"eventbridge\" (default), \"sns\" or \"sns_fifo\" (the ordered path: FIFO topic and queues, `make demo ORDERING=fifo`)."
  type        = string
  default     = "eventbridge"

  validation {
    condition     = contains(["eventbridge", "sns", "sns_fifo"], var.publish_to)
    error_message = "The publish_to of examples/local must be \"eventbridge\", \"sns\" or \"sns_fifo\"."
  }
}

variable "event_source" {
  description = "EventBridge source the demo's events carry; the example's consumer receives exactly these."
  type        = string
  default     = "demo.orders"
}

variable "consumer_keys" {
  description = "Keys of the example's consumers, all alike (tests/terraform/test_live_changes_on_emulator.py plans adding and removing one)."
  type        = set(string)
  default     = ["audit"]
}

variable "acknowledged_changes" {
  description = "The module's acknowledged_changes (docs/live-changes.md)."
  type = object({
    serial  = optional(number, 0)
    changes = optional(set(string), [])
  })
  default = {}
}
