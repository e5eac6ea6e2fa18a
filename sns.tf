################################################################################
# Publishing target: EventBridge bus or SNS topic
################################################################################

locals {
  publish_to_sns = contains(["sns", "sns_fifo"], var.publish_to)
  # The ordered path: a FIFO topic, FIFO consumer queues, the subject as message group.
  ordered = var.publish_to == "sns_fifo"

  # What dynamodb_outbox.publisher.sink_from_environment reads, for every function
  # that publishes (the publisher, the sweeper): the transport and its target.
  publish_sink_environment = local.publish_to_sns ? {
    OUTBOX_PUBLISH_TO = var.publish_to # "sns" or "sns_fifo"
    OUTBOX_TOPIC_ARN  = aws_sns_topic.this[0].arn
    } : {
    OUTBOX_PUBLISH_TO     = "eventbridge"
    OUTBOX_EVENT_BUS_NAME = local.event_bus_name
  }

  # The one action and resource a publishing role needs. sns:Publish also
  # authorises PublishBatch.
  publish_actions    = local.publish_to_sns ? ["sns:Publish"] : ["events:PutEvents"]
  publish_target_arn = local.publish_to_sns ? aws_sns_topic.this[0].arn : local.event_bus_arn

  publish_target_description = local.publish_to_sns ? "the ${local.sns_topic_name} SNS topic" : "the ${local.event_bus_name} event bus"

  # The message attributes the publisher sets on every SNS message
  # (dynamodb_outbox.sinks.SNS_MESSAGE_ATTRIBUTES; tests/unit/test_sns_message_attributes.py
  # holds the two lists together). A consumer's filter_policy may filter on these only.
  sns_message_attributes = ["event_type", "source"]

  # Per consumer, the keys of its filter policy that are not message attributes,
  # at every level of SNS's "$or" operator (an alternative may hold an "$or"
  # of its own). Terraform has no recursion: four levels are read, and a
  # policy nested deeper is refused with its own message.
  consumer_filter_policies = {
    for key, c in local.consumers : key => try(jsondecode(c.filter_policy), {}) if c.filter_policy != null
  }
  consumer_filter_policy_levels = {
    for key, policy in local.consumer_filter_policies : key => [
      [policy],
      [for a in try(policy["$or"], []) : a],
      flatten([for a in try(policy["$or"], []) : try(a["$or"], [])]),
      flatten([for a in try(policy["$or"], []) : [for b in try(a["$or"], []) : try(b["$or"], [])]]),
    ]
  }
  consumer_filter_policy_unknown_keys = {
    for key, levels in local.consumer_filter_policy_levels : key => sort(distinct(flatten([
      for level in levels : [
        for alternative in level : [
          for k in try(keys(alternative), []) : k if k != "$or" && !contains(local.sns_message_attributes, k)
        ]
      ]
    ])))
  }
  consumer_filter_policy_too_deep = {
    for key, levels in local.consumer_filter_policy_levels : key => anytrue([
      for alternative in levels[3] : contains(try(keys(alternative), []), "$or")
    ])
  }

  # What every consumer checks its messages against (dynamodb_outbox.sender_checks,
  # names in settings.py): the transport, and the bus (its account and region) or
  # the topic. Set on the reference consumers; the consumer_environment output
  # gives callers' functions the same.
  # Names of their own, not OUTBOX_PUBLISH_TO/OUTBOX_TOPIC_ARN (where a writer
  # publishes): a consumer may also write to this outbox or another one.
  consumer_sender_environment = local.publish_to_sns ? {
    OUTBOX_CONSUMER_TRANSPORT = var.publish_to
    OUTBOX_CONSUMER_TOPIC_ARN = aws_sns_topic.this[0].arn
    } : merge({
      OUTBOX_CONSUMER_TRANSPORT     = "eventbridge"
      OUTBOX_CONSUMER_EVENT_BUS_ARN = local.event_bus.create ? local.event_bus_built_arn : data.aws_cloudwatch_event_bus.existing[0].arn
    },
    # Multi-region: the regions forwarding to this bus (multi_region_forwarding.tf).
    local.consumer_forwarding_environment,
  )

  # The idempotency window a caller's own consumer function can take (the
  # consumer_environment output): the longest any consumer can need, whatever
  # its settings, read from nothing in local.consumers (which holds that
  # function's ARN: anything derived from it would make a cycle).
  consumer_window_environment = {
    OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS = tostring(module.windows.idempotency_bound_seconds)
  }

  # Built from its name, like the queues' ARNs (consumers.tf), so that the topic's
  # policy is known at plan; the topic's postcondition checks it.
  sns_topic_built_arn = "${local.arn_prefix}:sns:${local.arn_region_account}:${local.sns_topic_name}"

  # The roles allowed to publish on the bus or topic: the publisher and the sweeper.
  # aws:PrincipalArn of a role session is the role's ARN (path included).
  outbox_publisher_role_arns = compact([aws_iam_role.publisher.arn, try(aws_iam_role.sweeper[0].arn, "")])
}

################################################################################
# SNS topic
################################################################################

# Replaces the bus when publish_to = "sns". Encrypted with the module's key, or
# with the AWS managed SNS key (which SNS itself can use to deliver to the
# consumer queues; only publishers such as EventBridge or CloudWatch alarms
# cannot use it, and the publisher is a Lambda function in this account).
#
# publish_to = "sns_fifo": a FIFO topic. The publisher sets MessageGroupId to the
# envelope's subject and MessageDeduplicationId to the event id, so content-based
# deduplication stays off: two distinct events with the same body are not one.
resource "aws_sns_topic" "this" {
  count = local.publish_to_sns ? 1 : 0

  name              = local.sns_topic_name
  kms_master_key_id = var.kms_key_arn != null ? var.kms_key_arn : "alias/aws/sns"

  fifo_topic                  = local.ordered ? true : null
  content_based_deduplication = local.ordered ? false : null

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.sns_topic_built_arn
      error_message = "The SNS topic's ARN is ${self.arn}, not the ${local.sns_topic_built_arn} its policy was given."
    }
  }
}

################################################################################
# SNS topic policy
################################################################################

# Replaces SNS's default policy, which lets every principal of the account publish,
# subscribe any endpoint, change the topic's attributes or delete it. Here:
# - administration is the account's, so IAM policies decide who administers it;
# - only the publisher and the sweeper may publish, and var.operator_principal_arns
#   (`outbox-ops replay-failures` and `release --publish-now` publish with the
#   operator's credentials) by their IAM grants; the Deny holds against any other
#   IAM grant; AWS service principals are left to their own allow, of which there is none;
# - subscriptions are the module's own queues, over sqs only (sns:Protocol and
#   sns:Endpoint, the Subscribe condition keys of SNS's "API permissions" reference).
data "aws_iam_policy_document" "sns_topic" {
  count = local.publish_to_sns ? 1 : 0

  policy_id = "${local.sns_topic_name}-outbox"

  statement {
    sid = "AccountAdministers"
    actions = [
      "sns:AddPermission",
      "sns:DeleteTopic",
      "sns:GetTopicAttributes",
      "sns:ListSubscriptionsByTopic",
      "sns:RemovePermission",
      "sns:SetTopicAttributes",
    ]
    resources = [local.sns_topic_built_arn]

    principals {
      type        = "AWS"
      identifiers = ["${local.arn_prefix}:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }

  statement {
    sid       = "OutboxPublishes"
    actions   = ["sns:Publish"]
    resources = [local.sns_topic_built_arn]

    principals {
      type        = "AWS"
      identifiers = local.outbox_publisher_role_arns
    }
  }

  statement {
    sid       = "NoOtherPublisher"
    effect    = "Deny"
    actions   = ["sns:Publish"]
    resources = [local.sns_topic_built_arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotLike"
      variable = "aws:PrincipalArn"
      values   = concat(local.outbox_publisher_role_arns, var.operator_principal_arns)
    }

    condition {
      test     = "BoolIfExists"
      variable = "aws:PrincipalIsAWSService"
      values   = ["false"]
    }
  }

  statement {
    sid       = "SubscribeOnlyQueues"
    effect    = "Deny"
    actions   = ["sns:Subscribe"]
    resources = [local.sns_topic_built_arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "StringNotEquals"
      variable = "sns:Protocol"
      values   = ["sqs"]
    }
  }

  # Without consumers, no endpoint at all.
  statement {
    sid       = "SubscribeOnlyOutboxQueues"
    effect    = "Deny"
    actions   = ["sns:Subscribe"]
    resources = [local.sns_topic_built_arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    dynamic "condition" {
      for_each = length(local.consumer_subscriptions) > 0 ? ["endpoints"] : []

      content {
        test     = "StringNotEquals"
        variable = "sns:Endpoint"
        values   = [for key in keys(local.consumer_subscriptions) : local.consumer_queue_arns[key]]
      }
    }
  }
}

resource "aws_sns_topic_policy" "this" {
  count = local.publish_to_sns ? 1 : 0

  arn    = aws_sns_topic.this[0].arn
  policy = data.aws_iam_policy_document.sns_topic[0].json
}

################################################################################
# SNS subscriptions
################################################################################

# One per consumer: raw delivery, so the queue receives the envelope JSON
# itself, and a filter policy on the message attributes the publisher sets
# (event_type, source). Messages SNS cannot deliver to the queue (a queue
# policy or key problem) go to the consumer's DLQ, as undeliverable EventBridge
# events do.
resource "aws_sns_topic_subscription" "consumer" {
  for_each = local.consumer_subscriptions

  topic_arn            = aws_sns_topic.this[0].arn
  protocol             = "sqs"
  endpoint             = aws_sqs_queue.consumer[each.key].arn
  raw_message_delivery = true
  filter_policy        = each.value.filter_policy
  filter_policy_scope  = "MessageAttributes"

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.consumer_dlq[each.key].arn
  })

  # The topic policy's SubscribeOnlyOutboxQueues denies Subscribe to any endpoint
  # it does not list: a consumer added to a running stack must wait for the policy
  # that lists its queue (nothing else orders the two;
  # tests/unit/test_sns_subscription_ordering.py).
  depends_on = [aws_sns_topic_policy.this]

  # A policy on an attribute the publisher never sets matches no message: the
  # consumer would silently receive nothing.
  lifecycle {
    precondition {
      condition     = length(local.consumer_filter_policy_unknown_keys[each.key]) == 0
      error_message = "Consumer ${each.key}'s filter_policy filters on ${join(", ", formatlist("\"%s\"", local.consumer_filter_policy_unknown_keys[each.key]))}, which no message has: the filter policy applies to message attributes, and the publisher sets only ${join(" and ", local.sns_message_attributes)} (the envelope's type and source), e.g. jsonencode({ event_type = [\"OrderCreated\"] })."
    }
    precondition {
      condition     = !local.consumer_filter_policy_too_deep[each.key]
      error_message = "Consumer ${each.key}'s filter_policy nests \"$or\" more than four levels deep, which the module cannot check against the message attributes (${join(" and ", local.sns_message_attributes)}): flatten it."
    }
  }
}
