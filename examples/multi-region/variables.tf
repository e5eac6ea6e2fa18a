variable "home_region" {
  description = "The region the table is created in (and, for a table that was single-region before, the one that ran the outbox)."
  type        = string
  default     = "eu-west-1"
}

variable "other_region" {
  description = "The second region: a replica of the table and an outbox instance of its own."
  type        = string
  default     = "us-east-1"
}

variable "adopt_after_seconds" {
  description = "After how long each region's sweeper publishes the other region's pending items (failover)."
  type        = number
  default     = 3600
}
