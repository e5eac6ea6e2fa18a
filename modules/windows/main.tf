# The windows that must agree across days, derived in one place (docs/seams.md,
# "Windows"). A pure module: no provider, no resource, so a test can evaluate it
# on its own (tests/reliability/test_idempotency_timeline.py) and the root module
# reads every window from it.

terraform {
  required_version = ">= 1.9"
}

variable "publish_to" {
  description = "The root module's publish_to: \"eventbridge\", \"sns\" or \"sns_fifo\"."
  type        = string
  nullable    = false
}

variable "consumers" {
  description = <<-EOT
    Per consumer key: `message_retention_seconds` (its queue's), `maximum_event_age_in_seconds`
    (its rule target's retry window; read with publish_to = "eventbridge" only), and
    `idempotency_expires_after_seconds` (explicit window, null to derive it).
  EOT
  type = map(object({
    message_retention_seconds         = number
    maximum_event_age_in_seconds      = number
    idempotency_expires_after_seconds = optional(number)
  }))
  nullable = false
}

variable "archive_retention_days" {
  description = "Retention of the bus's archive, 0 when there is none."
  type        = number
  nullable    = false
}

variable "sweeper_republish_seconds" {
  description = "How long after an item's write the sweeper may still re-publish it (the oldest-pending alarm's threshold), 0 without a sweeper."
  type        = number
  nullable    = false
}

variable "consumer_dlq_age_threshold_seconds" {
  description = "An explicit DLQ-age alarm threshold, null to derive it."
  type        = number
  default     = null
}

locals {
  # AWS's numbers (cited in docs/seams.md, "Windows"):
  # - DynamoDB Streams keeps a record 24 hours: the publisher's stream mapping
  #   can retry (and re-publish) a batch that long.
  stream_record_lifetime_seconds = 86400
  # - SNS retries delivery to an SQS endpoint 100,015 times over 23 days (a
  #   policy no one can change for SQS endpoints).
  sns_to_sqs_retry_seconds = 23 * 86400
  # - SQS keeps a message at most 14 days: the consumers' DLQs keep that long.
  dlq_retention_seconds = 1209600

  ordered = var.publish_to == "sns_fifo"

  # A second publish of an event can follow its first as long as its stream
  # record lives, or as long as its item stays pending for the sweeper.
  republish_seconds = max(local.stream_record_lifetime_seconds, var.sweeper_republish_seconds)

  consumer = {
    for key, c in var.consumers : key => {
      # From PutEvents (or Publish) to the queue: EventBridge's target retry
      # window, or SNS's fixed 23 days. What still fails goes to the DLQ.
      delivery_seconds = var.publish_to == "eventbridge" ? c.maximum_event_age_in_seconds : local.sns_to_sqs_retry_seconds
      # How long the DLQ can hold a copy, counted from the copy's first enqueue
      # in the queue (or in the DLQ, when the rule or subscription put it there):
      # a standard DLQ keeps the original enqueue time, a FIFO DLQ resets it on
      # the move, after up to the queue's whole retention.
      dlq_life_seconds = local.ordered ? c.message_retention_seconds + local.dlq_retention_seconds : max(c.message_retention_seconds, local.dlq_retention_seconds)
      # What the DLQ-age alarm can see: ApproximateAgeOfOldestMessage counts from
      # the move to the DLQ, which comes at most a queue retention after the
      # first enqueue; the message is deleted at the end of its DLQ life.
      dlq_life_after_move_seconds = local.ordered ? local.dlq_retention_seconds : max(0, local.dlq_retention_seconds - c.message_retention_seconds)
    }
  }

  # THE inequality. An event's idempotency record (written when it first takes
  # effect, after its first publish) must outlive every copy that can still
  # reach the function:
  #   window >= republish + delivery + DLQ life + queue retention
  # the last term being a copy redriven from the DLQ on its last day: SQS makes
  # it a new message, with a new enqueue time, kept the queue's retention again.
  # A replay from the archive is a copy too (at most archive retention after
  # the publish); the toolkit also skips an unasked replay older than the
  # window, so the archive term keeps replays deduplicated rather than skipped.
  minimum_idempotency_seconds = {
    for key, c in var.consumers : key => max(
      local.republish_seconds + local.consumer[key].delivery_seconds + local.consumer[key].dlq_life_seconds + c.message_retention_seconds,
      var.archive_retention_days * 86400,
    )
  }

  idempotency_expires_after_seconds = {
    for key, c in var.consumers : key => coalesce(c.idempotency_expires_after_seconds, local.minimum_idempotency_seconds[key])
  }

  # The DLQ-age alarm fires with half of the DLQ's life after the move still
  # ahead (the operator's time to redrive before SQS deletes the copy); the
  # window above covers the redrive whenever it comes in that life.
  consumer_dlq_age_threshold_seconds = {
    for key, c in local.consumer : key => coalesce(var.consumer_dlq_age_threshold_seconds, floor(c.dlq_life_after_move_seconds / 2))
  }
}

output "dlq_retention_seconds" {
  description = "Retention of every consumer DLQ (the SQS maximum)."
  value       = local.dlq_retention_seconds
}

output "minimum_idempotency_seconds" {
  description = "Per consumer, the shortest idempotency window that outlives every copy of an event."
  value       = local.minimum_idempotency_seconds
}

output "idempotency_expires_after_seconds" {
  description = "Per consumer, the idempotency window its toolkit keeps records for."
  value       = local.idempotency_expires_after_seconds
}

output "dlq_life_after_move_seconds" {
  description = "Per consumer, the shortest time a message moved to its DLQ is kept there."
  value       = { for key, c in local.consumer : key => c.dlq_life_after_move_seconds }
}

output "consumer_dlq_age_threshold_seconds" {
  description = "Per consumer, the DLQ-age alarm's threshold."
  value       = local.consumer_dlq_age_threshold_seconds
}
