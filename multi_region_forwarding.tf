################################################################################
# Multi-region: consumers across regions (EventBridge cross-Region bus targets)
################################################################################

# Each region's bus carries the events written in that region. A consumer that
# must see every region's events runs in one region, and the other regions
# forward to its bus: a rule on each sending bus whose target is the receiving
# region's outbox bus (multi_region.forward_to_event_bus_arns), through a role
# EventBridge assumes (a bus in another Region as target needs one: EventBridge
# User Guide, "Sending and receiving events between AWS Regions"). The rule
# takes only events whose `region` is this region's, so an event forwarded here
# from another region is never forwarded again. On the receiving side
# (multi_region.receive_forwarded_from) the bus policy admits the senders'
# roles and the consumers accept their regions (a forwarded event keeps its
# `region` and `account`). docs/multi-region.md, "Consumers across regions".
locals {
  forwards_events = length(local.forward_to_buses) > 0
  forwarder_name  = "${var.name}-forward"
  # IAM role names are global: iam_role_name_prefix tells the regions' roles apart.
  forwarder_role_name = "${var.iam_role_name_prefix}${var.name}-forwarder"
  # The rule's ARN (a custom bus's rule: rule/<bus>/<rule>), known at plan for
  # the role's trust policy and the bus DLQ's policy.
  forwarder_rule_arn = local.event_bus_name == "default" ? "${local.arn_prefix}:events:${local.arn_region_account}:rule/${local.forwarder_name}" : "${local.arn_prefix}:events:${local.arn_region_account}:rule/${local.event_bus_name}/${local.forwarder_name}"
  # The receiving side: roles allowed on this bus, regions the consumers accept.
  forwarder_role_arns_received = sort(values(local.forwarded_from))
  consumer_forwarding_environment = length(local.forwarded_from) > 0 ? {
    OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS = join(",", sort(keys(local.forwarded_from)))
  } : {}
}

data "aws_iam_policy_document" "forwarder_assume_role" {
  count = local.forwards_events ? 1 : 0

  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    # Only this rule (confused deputy: IAM User Guide, "The confused deputy problem").
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [local.forwarder_rule_arn]
    }
  }
}

resource "aws_iam_role" "forwarder" {
  count = local.forwards_events ? 1 : 0

  name                 = local.forwarder_role_name
  path                 = var.iam_role_path
  description          = "Forwards the ${var.name} outbox events published in ${local.region_name} to the other regions' outbox buses."
  assume_role_policy   = data.aws_iam_policy_document.forwarder_assume_role[0].json
  permissions_boundary = var.iam_permissions_boundary_arn

  tags = local.role_tags

  lifecycle {
    precondition {
      condition     = length(local.forwarder_role_name) <= local.iam_role_name_max_length
      error_message = "The IAM role name \"${local.forwarder_role_name}\" (the event forwarder's) is ${length(local.forwarder_role_name)} characters; IAM allows ${local.iam_role_name_max_length}. Shorten iam_role_name_prefix (\"${var.iam_role_name_prefix}\", ${length(var.iam_role_name_prefix)} characters) or name."
    }
  }
}

data "aws_iam_policy_document" "forwarder" {
  count = local.forwards_events ? 1 : 0

  statement {
    sid       = "PutOnTheOtherRegionsBuses"
    actions   = ["events:PutEvents"]
    resources = local.forward_to_buses
  }
}

resource "aws_iam_role_policy" "forwarder" {
  count = local.forwards_events ? 1 : 0

  name   = "forward-events"
  role   = aws_iam_role.forwarder[0].id
  policy = data.aws_iam_policy_document.forwarder[0].json
}

resource "aws_cloudwatch_event_rule" "forward" {
  count = local.forwards_events ? 1 : 0

  name           = local.forwarder_name
  description    = "Outbox events of ${var.name} published in ${local.region_name}, forwarded to the other regions' outbox buses."
  event_bus_name = local.event_bus_ref_name
  event_pattern = jsonencode({
    account = [data.aws_caller_identity.current.account_id]
    region  = [local.region_name]
  })

  tags = local.tags
}

# Keyed by the receiving region (one bus per region, validated): a region's
# new bus ARN is an in-place update of its target. Keyed by ARN, the change was
# a delete and a create of the same target id, run in parallel, and the delete
# could remove the new target (forwarding silently off).
resource "aws_cloudwatch_event_target" "forward" {
  for_each = { for a in local.forward_to_buses : split(":", a)[3] => a }

  rule           = aws_cloudwatch_event_rule.forward[0].name
  event_bus_name = local.event_bus_ref_name
  target_id      = "to-${each.key}"
  arn            = each.value
  role_arn       = aws_iam_role.forwarder[0].arn

  # EventBridge retries for 24 hours (its defaults); what it still cannot
  # deliver lands in the bus DLQ, with the bus's own undeliverable events.
  # Forwarding needs the module's bus, so that DLQ exists (terraform_data.multi_region).
  dynamic "dead_letter_config" {
    for_each = local.create_event_bus_dlq ? [1] : []
    content {
      arn = aws_sqs_queue.event_bus_dlq[0].arn
    }
  }

  depends_on = [aws_iam_role_policy.forwarder]
}
