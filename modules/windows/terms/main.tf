# One consumer's terms of the windows inequality (../main.tf, docs/seams.md
# "Windows"), in a module of their own so that the same formula serves every
# consumer and the longest-lived consumer the variables allow, whose window a
# caller's own consumer function can take without a dependency on `consumers`.

terraform {
  required_version = ">= 1.9"
}

variable "publish_to" {
  type     = string
  nullable = false
}

variable "message_retention_seconds" {
  type     = number
  nullable = false
}

variable "maximum_event_age_in_seconds" {
  type     = number
  nullable = false
}

variable "republish_seconds" {
  type     = number
  nullable = false
}

variable "bus_dlq_retention_seconds" {
  type     = number
  nullable = false
}

variable "archive_retention_days" {
  type     = number
  nullable = false
}

variable "dlq_retention_seconds" {
  type     = number
  nullable = false
}

variable "sns_to_sqs_retry_seconds" {
  type     = number
  nullable = false
}

locals {
  ordered = var.publish_to == "sns_fifo"

  # From PutEvents (or Publish) to the queue: EventBridge's target retry
  # window, or SNS's fixed 23 days. What still fails goes to the DLQ.
  delivery_seconds = var.publish_to == "eventbridge" ? var.maximum_event_age_in_seconds : var.sns_to_sqs_retry_seconds

  # How long the DLQ can hold a copy, counted from the copy's first enqueue
  # in the queue (or in the DLQ, when the rule or subscription put it there):
  # a standard DLQ keeps the original enqueue time, a FIFO DLQ resets it on
  # the move, after up to the queue's whole retention.
  dlq_life_seconds = local.ordered ? var.message_retention_seconds + var.dlq_retention_seconds : max(var.message_retention_seconds, var.dlq_retention_seconds)

  # What the DLQ-age alarm can see: ApproximateAgeOfOldestMessage counts from
  # the move to the DLQ, which comes at most a queue retention after the
  # first enqueue; the message is deleted at the end of its DLQ life.
  dlq_life_after_move_seconds = local.ordered ? var.dlq_retention_seconds : max(0, var.dlq_retention_seconds - var.message_retention_seconds)

  # THE inequality (../main.tf says each term's why).
  minimum_idempotency_seconds = max(
    var.republish_seconds + var.bus_dlq_retention_seconds + local.delivery_seconds + local.dlq_life_seconds + var.message_retention_seconds,
    var.archive_retention_days * 86400,
  )
}

output "delivery_seconds" {
  value = local.delivery_seconds
}

output "dlq_life_seconds" {
  value = local.dlq_life_seconds
}

output "dlq_life_after_move_seconds" {
  value = local.dlq_life_after_move_seconds
}

output "minimum_idempotency_seconds" {
  value = local.minimum_idempotency_seconds
}
