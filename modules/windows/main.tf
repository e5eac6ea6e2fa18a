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

variable "bus_dlq_retention_seconds" {
  description = "Retention of the bus's own DLQ when events can land there (a bus with a customer KMS key), 0 otherwise."
  type        = number
  nullable    = false
}

variable "receives_forwarded_events" {
  description = "Multi-region: other regions forward their events to this region's bus (multi_region.receive_forwarded_from), so the consumers also receive copies that crossed the forwarding hop."
  type        = bool
  default     = false
  nullable    = false
}

variable "alarm_period_seconds" {
  description = "The alarms' period (alarms.period_seconds): the DLQ-age alarm fires up to one period after its threshold is crossed."
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
  # - SQS keeps a queue's message at most that long too (MessageRetentionPeriod,
  #   60 to 1,209,600 s), and EventBridge retries a target at most 24 hours
  #   (MaximumEventAgeInSeconds, 60 to 86,400 s): the longest a consumer's
  #   `message_retention_seconds` and `maximum_event_age_in_seconds` can be.
  max_message_retention_seconds = local.dlq_retention_seconds
  max_event_age_seconds         = 86400

  ordered = var.publish_to == "sns_fifo"

  # Multi-region: the longest multi_region.adopt_after_seconds may be (refused
  # above it at plan, terraform_data.multi_region): a surviving region's
  # sweeper publishes an adopted item again up to that long after its write.
  max_adopt_after_seconds = 86400

  # Multi-region, consumers across regions: a copy forwarded from another
  # region can start its delivery here later than a local one. The sending
  # region may have adopted the item (published again up to the adoption bound
  # after its first publish); the forward target retries 24 hours (EventBridge's
  # default, the module sets no retry policy on it), then the copy lands in the
  # sending region's bus DLQ (kept the SQS maximum, whatever the key); put back
  # on that bus, it is forwarded again, with 24 hours of retries. The receiving
  # region knows neither sender's settings, so every term is at its bound.
  forwarding_seconds = var.receives_forwarded_events ? local.max_adopt_after_seconds + 2 * local.max_event_age_seconds + local.dlq_retention_seconds : 0

  # A second publish of an event can follow its first as long as its stream
  # record lives, or as long as its item stays pending for the sweeper.
  republish_seconds = max(local.stream_record_lifetime_seconds, var.sweeper_republish_seconds)

  # How long after an event's first publish a copy can still start its
  # delivery on this region's bus: a republish, or a forwarded copy.
  lead_seconds = local.republish_seconds + local.forwarding_seconds

  # THE inequality. An event's idempotency record (written when it first takes
  # effect, after its first publish) must outlive every copy that can still
  # reach the function:
  #   window >= republish + bus DLQ + delivery + DLQ life + queue retention
  # (each consumer's terms in terms/main.tf),
  # the last term being a copy redriven from the DLQ on its last day: SQS makes
  # it a new message, with a new enqueue time, kept the queue's retention again.
  # A replay from the archive is a copy too (at most archive retention after
  # the publish); the toolkit also skips an unasked replay older than the
  # window, so the archive term keeps replays deduplicated rather than skipped.
  #
  # A copy put back from the bus's own DLQ (events the bus could not encrypt or
  # decrypt with its customer key, kept 14 days; README's runbook) starts its
  # delivery up to that DLQ's retention after a publish: its term adds to the
  # republish one.
  minimum_idempotency_seconds = { for key, c in module.consumer : key => c.minimum_idempotency_seconds }

  # The window of the longest-lived consumer the variables allow: at least every
  # consumer's minimum, whatever its settings. It depends on no consumer, so a
  # caller's own consumer function (whose ARN is in var.consumers) can take it
  # without a cycle.
  idempotency_bound_seconds = module.longest_consumer.minimum_idempotency_seconds

  consumer = module.consumer

  idempotency_expires_after_seconds = {
    for key, c in var.consumers : key => coalesce(c.idempotency_expires_after_seconds, local.minimum_idempotency_seconds[key])
  }

  # The DLQ-age alarm fires with half of the DLQ's life after the move still
  # ahead (the operator's time to redrive before SQS deletes the copy), and in
  # any case one alarm period before the deletion (the alarm fires up to a
  # period after the threshold is crossed); the window above covers the
  # redrive whenever it comes in that life.
  consumer_dlq_age_threshold_seconds = {
    for key, c in local.consumer : key => coalesce(
      var.consumer_dlq_age_threshold_seconds,
      min(floor(c.dlq_life_after_move_seconds / 2), max(0, c.dlq_life_after_move_seconds - var.alarm_period_seconds - 1)),
    )
  }
}

# Each consumer's terms (terms/main.tf holds the formula once).
module "consumer" {
  source   = "./terms"
  for_each = var.consumers

  publish_to                   = var.publish_to
  message_retention_seconds    = each.value.message_retention_seconds
  maximum_event_age_in_seconds = each.value.maximum_event_age_in_seconds
  republish_seconds            = local.lead_seconds
  bus_dlq_retention_seconds    = var.bus_dlq_retention_seconds
  archive_retention_days       = var.archive_retention_days
  dlq_retention_seconds        = local.dlq_retention_seconds
  sns_to_sqs_retry_seconds     = local.sns_to_sqs_retry_seconds
}

# The longest-lived consumer the variables allow: queue retention and target
# retry at their maxima. Nothing here reads var.consumers.
module "longest_consumer" {
  source = "./terms"

  publish_to                   = var.publish_to
  message_retention_seconds    = local.max_message_retention_seconds
  maximum_event_age_in_seconds = local.max_event_age_seconds
  republish_seconds            = local.lead_seconds
  bus_dlq_retention_seconds    = var.bus_dlq_retention_seconds
  archive_retention_days       = var.archive_retention_days
  dlq_retention_seconds        = local.dlq_retention_seconds
  sns_to_sqs_retry_seconds     = local.sns_to_sqs_retry_seconds
}

output "dlq_retention_seconds" {
  description = "Retention of every consumer DLQ (the SQS maximum)."
  value       = local.dlq_retention_seconds
}

output "max_adopt_after_seconds" {
  description = "The longest multi_region.adopt_after_seconds may be: the forwarded copies' window counts it."
  value       = local.max_adopt_after_seconds
}

output "minimum_idempotency_seconds" {
  description = "Per consumer, the shortest idempotency window that outlives every copy of an event."
  value       = local.minimum_idempotency_seconds
}

output "idempotency_bound_seconds" {
  description = "The window that covers every consumer whatever its settings (message retention and target retry at their maxima); depends on no consumer."
  value       = local.idempotency_bound_seconds
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
