################################################################################
# Event bus
################################################################################

locals {
  # The module's bus gets a DLQ of its own (below); an existing bus keeps whatever
  # its owner configured, and publish_to = "sns" has no bus.
  create_event_bus     = !local.publish_to_sns && local.event_bus.create
  create_event_bus_dlq = local.create_event_bus
  # 14 days, the SQS maximum (modules/windows): a window term when the bus has a customer key.
  event_bus_dlq_retention_seconds = module.windows.dlq_retention_seconds

  # Built from names, like the consumer queues' ARNs (consumers.tf): the bus names
  # its DLQ, whose policy names the bus. Postconditions check both.
  event_bus_built_arn = "${local.arn_prefix}:events:${local.arn_region_account}:event-bus/${local.event_bus_name}"
  event_bus_dlq_arn   = "${local.arn_prefix}:sqs:${local.arn_region_account}:${local.event_bus_dlq_name}"
}

# Neither created nor read when publish_to = "sns" (sns.tf).
resource "aws_cloudwatch_event_bus" "this" {
  count = local.create_event_bus ? 1 : 0

  name = local.event_bus_name

  # Events on the bus are encrypted with the module's key when given, with an AWS
  # owned key otherwise (hashicorp/aws >= 5.61, see versions.tf).
  kms_key_identifier = var.kms_key_arn

  # Where EventBridge sends an event it accepted but cannot encrypt or decrypt with
  # that key while processing it on the bus (key disabled or deleted, key policy
  # no longer allowing events.amazonaws.com). Without it the event is dropped, and
  # the publisher has already deleted the outbox item (hashicorp/aws >= 5.98).
  dead_letter_config {
    arn = aws_sqs_queue.event_bus_dlq[0].arn
  }

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.event_bus_built_arn
      error_message = "The event bus's ARN is ${self.arn}, not the ${local.event_bus_built_arn} its DLQ's policy was given."
    }
  }
}

################################################################################
# Event bus: resource policy
################################################################################

# Only the publisher and the sweeper put events on the module's bus (Security
# Hub's EventBridge.3 asks for a resource policy). The Deny holds against any IAM
# grant in the account, administrators' included, except the principals of
# var.operator_principal_arns (putting the bus DLQ's events back, README). It
# never applies to AWS service principals (aws:PrincipalIsAWSService), so
# EventBridge's own deliveries and replays are unaffected however EventBridge
# authorises them. aws:PrincipalArn with ArnNotLike rather than NotPrincipal, as
# the IAM User Guide ("NotPrincipal") recommends. An existing bus keeps its
# owner's policy: the module never overwrites it (docs/threat-model.md).
data "aws_iam_policy_document" "event_bus" {
  count = local.create_event_bus ? 1 : 0

  statement {
    sid       = "OutboxPutsEvents"
    actions   = ["events:PutEvents"]
    resources = [local.event_bus_built_arn]

    principals {
      type        = "AWS"
      identifiers = local.outbox_publisher_role_arns
    }
  }

  # Multi-region: the other regions' forwarders (multi_region.receive_forwarded_from).
  dynamic "statement" {
    for_each = length(local.forwarder_role_arns_received) > 0 ? [1] : []
    content {
      sid       = "OtherRegionsForwardEvents"
      actions   = ["events:PutEvents"]
      resources = [local.event_bus_built_arn]

      principals {
        type        = "AWS"
        identifiers = local.forwarder_role_arns_received
      }
    }
  }

  statement {
    sid       = "NoOtherSender"
    effect    = "Deny"
    actions   = ["events:PutEvents"]
    resources = [local.event_bus_built_arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotLike"
      variable = "aws:PrincipalArn"
      values   = concat(local.outbox_publisher_role_arns, local.forwarder_role_arns_received, var.operator_principal_arns)
    }

    condition {
      test     = "BoolIfExists"
      variable = "aws:PrincipalIsAWSService"
      values   = ["false"]
    }
  }
}

resource "aws_cloudwatch_event_bus_policy" "this" {
  count = local.create_event_bus ? 1 : 0

  event_bus_name = aws_cloudwatch_event_bus.this[0].name
  policy         = data.aws_iam_policy_document.event_bus[0].json
}

################################################################################
# Event bus: dead-letter queue
################################################################################

# Only the module's bus may send, and only to this queue (and, multi-region, the
# rule forwarding this region's events to the other regions: its undeliverable ones).
data "aws_iam_policy_document" "event_bus_dlq" {
  count = local.create_event_bus_dlq ? 1 : 0

  statement {
    sid       = "BusDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [local.event_bus_dlq_arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = local.forwards_events ? [local.event_bus_built_arn, local.forwarder_rule_arn] : [local.event_bus_built_arn]
    }
  }
}

# Receives the event itself (the body is the event as the bus held it), so
# putting it back on the bus replays it (README, "Alarms runbook").
#
# Created with every bus the module creates, with or without kms_key_arn: a key
# created in the same apply is unknown at plan, and a count that depended on it
# would fail the plan. Without a customer key the queue stays empty.
#
# Encrypted with SSE-SQS, never with kms_key_arn: the failures it exists for are
# that key being disabled, deleted or closed to events.amazonaws.com, and then
# EventBridge could not write to a queue encrypted with it either.
resource "aws_sqs_queue" "event_bus_dlq" {
  count = local.create_event_bus_dlq ? 1 : 0

  name                      = local.event_bus_dlq_name
  message_retention_seconds = local.event_bus_dlq_retention_seconds
  max_message_size          = local.queue_max_message_bytes

  sqs_managed_sse_enabled = true

  policy = data.aws_iam_policy_document.event_bus_dlq[0].json

  # It holds bus events only: no queue may make it its DLQ.
  redrive_allow_policy = jsonencode({
    redrivePermission = "denyAll"
  })

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.event_bus_dlq_arn
      error_message = "The bus DLQ's ARN is ${self.arn}, not the ${local.event_bus_dlq_arn} its policy was given."
    }
  }
}

################################################################################
# Existing event bus
################################################################################

# Reading the bus makes plan fail when it does not exist, rather than the
# publisher failing at run time (PutEvents to a missing bus fails per entry).
# Its DLQ is its owner's to set (docs/kms.md).
data "aws_cloudwatch_event_bus" "existing" {
  count = !local.publish_to_sns && !local.event_bus.create ? 1 : 0

  name = local.event_bus.name
}

locals {
  # null when publish_to = "sns".
  event_bus_arn = (
    local.publish_to_sns ? null
    : local.event_bus.create ? aws_cloudwatch_event_bus.this[0].arn : data.aws_cloudwatch_event_bus.existing[0].arn
  )
  # The created bus's name, through the resource, so that rules wait for the bus.
  event_bus_ref_name = (
    local.publish_to_sns ? null
    : local.event_bus.create ? aws_cloudwatch_event_bus.this[0].name : local.event_bus_name
  )
}

################################################################################
# Event archive
################################################################################

locals {
  # Only on the bus the publisher uses (publish_to = "sns" has none): see
  # docs/decisions.md for the retention default and its cost.
  create_event_archive = !local.publish_to_sns && local.event_archive.enabled
  event_archive_name   = var.name
}

# Keeps the events put on the bus for replay to one consumer's rule
# (`outbox-ops replay`). EventBridge adds a managed rule that keeps replayed
# events (they carry `replay-name`) out of the archive.
resource "aws_cloudwatch_event_archive" "this" {
  count = local.create_event_archive ? 1 : 0

  name             = local.event_archive_name
  description      = "Events of the ${var.name} outbox, kept ${local.event_archive.retention_days} days for replay to one consumer (outbox-ops replay)."
  event_source_arn = local.event_bus_arn
  event_pattern    = local.event_archive.event_pattern
  retention_days   = local.event_archive.retention_days
}
