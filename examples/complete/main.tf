provider "aws" {
  region = var.region
}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

locals {
  name           = "orders-outbox"
  event_bus_name = "orders"
  partition      = data.aws_partition.current.partition
  account_id     = data.aws_caller_identity.current.account_id
  # Built from names: the key policy is needed before the bus exists.
  event_bus_arn = "arn:${local.partition}:events:${var.region}:${local.account_id}:event-bus/${local.event_bus_name}"

  tags = {
    Project     = "orders"
    Environment = "production"
    Owner       = "team-orders"
  }
}

################################################################################
# Customer managed key for everything the module creates (see docs/kms.md)
################################################################################

data "aws_iam_policy_document" "kms" {
  #checkov:skip=CKV_AWS_109: a key policy: "kms:*" for the account root delegates the key to the account's IAM policies, the default key policy AWS documents
  #checkov:skip=CKV_AWS_111: a key policy: "*" as the resource means this key only; each service statement that uses the key is held to this stack by aws:SourceAccount and aws:SourceArn or the bus's or log groups' encryption context (DescribeKey, metadata only, as AWS's EventBridge guide)
  #checkov:skip=CKV_AWS_356: a key policy: "*" as the resource means this key only, and a key policy cannot name the key it is attached to
  # Key administration and use stay with the account's IAM policies.
  statement {
    sid       = "AccountAdministersKey"
    actions   = ["kms:*"]
    resources = ["*"]

    principals {
      type        = "AWS"
      identifiers = ["arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }

  # CloudWatch Logs encrypts the publisher's log group with the key.
  statement {
    sid = "CloudWatchLogsUsesKey"
    actions = [
      "kms:Encrypt*",
      "kms:Decrypt*",
      "kms:ReEncrypt*",
      "kms:GenerateDataKey*",
      "kms:Describe*",
    ]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }

    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${data.aws_partition.current.partition}:logs:${var.region}:${data.aws_caller_identity.current.account_id}:log-group:/aws/lambda/${local.name}-*"]
    }
  }

  # EventBridge checks the key when the bus is created (DescribeKey: metadata,
  # no use of the key; AWS's EventBridge guide gives it no condition).
  statement {
    sid       = "EventBridgeDescribesKey"
    actions   = ["kms:DescribeKey"]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
  }

  # EventBridge encrypts the events on this outbox's bus, and only that bus's:
  # the encryption context EventBridge binds to every bus operation names it
  # ("Encrypting EventBridge event buses with AWS KMS keys"). The bus's own DLQ
  # is on SSE-SQS and needs nothing from the key.
  statement {
    sid = "EventBridgeEncryptsBusEvents"
    actions = [
      "kms:GenerateDataKey",
      "kms:Decrypt",
    ]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "StringEquals"
      variable = "kms:EncryptionContext:aws:events:event-bus:arn"
      values   = [local.event_bus_arn]
    }
  }

  # EventBridge sends to the consumer queues and DLQs, which the key encrypts,
  # for this outbox's rules only (aws:SourceArn is the sending rule): without
  # this statement every delivery fails, and the module cannot add it (it does
  # not own the key).
  statement {
    sid = "EventBridgeSendsToConsumerQueues"
    actions = [
      "kms:GenerateDataKey",
      "kms:Decrypt",
    ]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:events:${var.region}:${local.account_id}:rule/${local.event_bus_name}/${local.name}-*-consumer"]
    }
  }

  # With publish_to = "sns" or "sns_fifo": SNS delivers the topic's messages to
  # the encrypted consumer queues, for this outbox's topic only (the topic's own
  # encryption runs as the publisher's role, which the module grants the key).
  # A FIFO topic's name ends in .fifo: both names, so switching publish_to keeps
  # the key usable.
  statement {
    sid = "SNSSendsToConsumerQueues"
    actions = [
      "kms:GenerateDataKey",
      "kms:Decrypt",
    ]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["sns.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values = [
        "arn:${local.partition}:sns:${var.region}:${local.account_id}:${local.name}",
        "arn:${local.partition}:sns:${var.region}:${local.account_id}:${local.name}.fifo",
      ]
    }
  }

  # DynamoDB (both tables), SQS (the queues), Lambda (environment variables)
  # use the key on behalf of the callers through the account statement above:
  # the deploying role and the function roles (which the module grants the
  # key) need no statement here.
}

resource "aws_kms_key" "outbox" {
  description         = "Encrypts the ${local.name} tables, queues, bus, topic, logs and function environments."
  enable_key_rotation = true
  policy              = data.aws_iam_policy_document.kms.json

  tags = local.tags
}

resource "aws_kms_alias" "outbox" {
  name          = "alias/${local.name}"
  target_key_id = aws_kms_key.outbox.key_id
}

################################################################################
# Outbox
################################################################################

module "outbox" {
  source = "../.."

  name = local.name
  tags = local.tags

  kms_key_arn                  = aws_kms_key.outbox.arn
  iam_permissions_boundary_arn = var.iam_permissions_boundary_arn

  table = {
    create                      = true
    name                        = "orders"
    stream_view_type            = "NEW_IMAGE"
    billing_mode                = "PROVISIONED"
    read_capacity               = 20
    write_capacity              = 40
    deletion_protection_enabled = true
    ttl_attribute_name          = "expires_at"
  }

  event_bus = {
    create = true
    name   = local.event_bus_name
  }

  lambda_runtime      = "python3.13"
  lambda_architecture = "arm64"

  # null: the public Powertools for AWS Lambda (Python) v3 layer of the region,
  # of the release powertools_version (its ARN read from AWS's public SSM parameter).
  powertools_layer_arn = null
  powertools_version   = "3.37.0"

  log_retention_days = 90

  alarms = {
    actions = var.alarm_actions
  }

  publisher = {
    memory_size_mb   = 512
    timeout_seconds  = 120
    log_level        = "INFO"
    extra_layer_arns = var.extra_layer_arns
  }

  stream_mapping = {
    batch_size                         = 200
    maximum_batching_window_in_seconds = 1
    parallelization_factor             = 2
    maximum_retry_attempts             = 20
    maximum_record_age_in_seconds      = 21600
    enabled                            = true
  }

  publish_to = "eventbridge"

  # audit: the bundled reference consumer. billing: your own function, when its
  # ARN is given (the module attaches the consumer policy to its role).
  consumers = merge(
    {
      audit = {
        event_pattern                      = jsonencode({ source = ["orders"] })
        function_timeout_seconds           = 30
        function_memory_size_mb            = 256
        message_retention_seconds          = 1209600
        max_receive_count                  = 5
        batch_size                         = 50
        maximum_batching_window_in_seconds = 2
        maximum_concurrency                = 10
        maximum_event_age_in_seconds       = 86400
        maximum_retry_attempts             = 185
      }
    },
    var.billing_function == null ? {} : {
      billing = {
        event_pattern = jsonencode({ "detail-type" = ["OrderCreated", "OrderCancelled"] })
        function = {
          arn          = var.billing_function.arn
          role_name    = var.billing_function.role_name
          uses_toolkit = true
        }
        function_timeout_seconds = var.billing_function.timeout_seconds
      }
    },
  )

  # The dynamodb_outbox package as a layer, for the order service's own functions.
  create_layer = true
}
