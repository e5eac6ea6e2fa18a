################################################################################
# Sweeper: settings
################################################################################

locals {
  sweeper_enabled = local.sweeper.enabled

  # The schedule's interval in seconds for rate() expressions, null for cron():
  # the oldest-pending alarm derives its threshold and period from it.
  sweeper_rate = try(regex("^rate\\(([0-9]+) (minute|hour|day)s?\\)$", local.sweeper.schedule_expression), null)
  sweeper_interval_seconds = (
    local.sweeper_rate == null
    ? null
    : tonumber(local.sweeper_rate[0]) * { minute = 60, hour = 3600, day = 86400 }[local.sweeper_rate[1]]
  )
}

################################################################################
# Sweeper: log group
################################################################################

# Created before the function, as the publisher's: never an unencrypted log
# group without retention.
resource "aws_cloudwatch_log_group" "sweeper" {
  #checkov:skip=CKV_AWS_338: retention is the caller's (log_retention_days): these are operational function logs, not an audit trail, and the outbox items are the record
  count = local.sweeper_enabled ? 1 : 0

  name              = local.sweeper_log_group_name
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn

  tags = local.tags
}

################################################################################
# Sweeper: IAM
################################################################################

resource "aws_iam_role" "sweeper" {
  count = local.sweeper_enabled ? 1 : 0

  name                 = local.sweeper_role_name
  path                 = var.iam_role_path
  description          = "Execution role of the ${local.sweeper_name} outbox sweeper."
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume_role.json
  permissions_boundary = var.iam_permissions_boundary_arn

  tags = local.role_tags

  lifecycle {
    precondition {
      condition     = length(local.sweeper_role_name) <= local.iam_role_name_max_length
      error_message = "The IAM role name \"${local.sweeper_role_name}\" (the sweeper's) is ${length(local.sweeper_role_name)} characters; IAM allows ${local.iam_role_name_max_length}. Shorten iam_role_name_prefix (\"${var.iam_role_name_prefix}\", ${length(var.iam_role_name_prefix)} characters) or name."
    }
  }
}

data "aws_iam_policy_document" "sweeper" {
  count = local.sweeper_enabled ? 1 : 0

  # Pending items are found on the sparse index only: Query on the index ARN,
  # and no Scan anywhere.
  statement {
    sid       = "QueryPendingIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${local.table_arn}/index/${local.pending_index_name}"]
  }

  # On the ordered path only: the pending sequences of a partition whose events
  # carry a sequence (lambda/dynamodb_outbox/subject_sequences.py), keys and the attributes
  # of local.sequence_query_attributes, never the envelopes.
  dynamic "statement" {
    for_each = var.publish_to == "sns_fifo" ? [1] : []
    content {
      sid       = "QueryPendingSequences"
      actions   = ["dynamodb:Query"]
      resources = [local.table_arn]

      condition {
        test     = "ForAllValues:StringEquals"
        variable = "dynamodb:Attributes"
        values   = concat(local.outbox_key_attributes, local.sequence_query_attributes)
      }

      condition {
        test     = "StringEqualsIfExists"
        variable = "dynamodb:Select"
        values   = ["SPECIFIC_ATTRIBUTES"]
      }
    }
  }

  # Re-read pending items by key (consistent BatchGetItem). Not narrowed: the
  # sweeper reads whole items (the envelope) and the keys come from the index.
  statement {
    sid       = "ReadPendingItems"
    actions   = ["dynamodb:BatchGetItem"]
    resources = [local.table_arn]
  }

  # Delete what was published and quarantine poison items: the publisher's
  # statements, with the same limits (publisher.tf).
  statement {
    sid       = "DeletePublishedItems"
    actions   = ["dynamodb:BatchWriteItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:Attributes"
      values   = local.outbox_key_attributes
    }
  }

  statement {
    sid       = "QuarantinePoisonItems"
    actions   = ["dynamodb:UpdateItem"]
    resources = [local.table_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:Attributes"
      values   = concat(local.outbox_key_attributes, local.quarantine_attributes)
    }

    condition {
      test     = "StringEqualsIfExists"
      variable = "dynamodb:ReturnValues"
      values   = ["NONE"]
    }
  }

  # The publisher's sink (sns.tf): PutEvents on the bus or Publish on the topic.
  statement {
    sid       = "PublishEvents"
    actions   = local.publish_actions
    resources = [local.publish_target_arn]
  }

  statement {
    sid = "WriteOwnLogs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    resources = ["${aws_cloudwatch_log_group.sweeper[0].arn}:*"]
  }

  # Read and write an encrypted table (and publish to an encrypted topic); the
  # same keys as the publisher, through the same services but SQS.
  dynamic "statement" {
    for_each = length(local.publishing_kms_key_arns) > 0 ? [local.publishing_kms_key_arns] : []

    content {
      sid = "UseEncryptionKeys"
      actions = [
        "kms:Decrypt",
        "kms:GenerateDataKey",
      ]
      resources = statement.value

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = local.sweeper_kms_via
      }
    }
  }

  # Active tracing: the function's runtime sends its segments with this role.
  # Only the two write actions of AWS's AWSXRayDaemonWriteAccess that Lambda
  # needs; X-Ray has no resource-level permissions, so "*" is its only resource.
  dynamic "statement" {
    for_each = local.tracing_active ? ["xray"] : []

    content {
      sid = "WriteTraces"
      actions = [
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
      ]
      resources = ["*"]
    }
  }

  # vpc_config: Lambda creates and deletes the functions' network interfaces with
  # the function's role. The actions of AWS's AWSLambdaVPCAccessExecutionRole
  # (without its logs actions, granted above), on "*" as there: the interfaces do
  # not exist before Lambda creates them and the Describe actions take no resource.
  dynamic "statement" {
    for_each = local.vpc_enabled ? ["vpc"] : []

    content {
      sid = "ManageVpcNetworkInterfaces"
      actions = [
        "ec2:AssignPrivateIpAddresses",
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:UnassignPrivateIpAddresses",
      ]
      resources = ["*"]
    }
  }

  # No cloudwatch:PutMetricData: Powertools metrics are written to the log as
  # CloudWatch embedded metric format.
}

resource "aws_iam_role_policy" "sweeper" {
  count = local.sweeper_enabled ? 1 : 0

  name   = local.sweeper_name
  role   = aws_iam_role.sweeper[0].id
  policy = data.aws_iam_policy_document.sweeper[0].json
}

################################################################################
# Sweeper: function
################################################################################

resource "aws_lambda_function" "sweeper" {
  #checkov:skip=CKV_AWS_116: a failed run loses nothing (pending items stay in the table and the next scheduled run sweeps them); a DLQ would hold only the empty scheduler payload
  #checkov:skip=CKV_AWS_117: in a VPC only when the caller gives vpc_config (docs/vpc.md): it calls only AWS APIs (DynamoDB, EventBridge/SNS), and a VPC needs NAT or endpoints
  #checkov:skip=CKV_AWS_115: one schedule invokes it once per interval; reserving concurrency would only take from the account pool
  #checkov:skip=CKV_AWS_272: the package is the committed reproducible zip checked by `make package-check`; code signing needs a signing profile the caller owns
  count = local.sweeper_enabled ? 1 : 0

  function_name = local.sweeper_name
  description   = "Re-publishes outbox items of ${local.table_name} still pending after ${local.sweeper.min_age_seconds} s."
  role          = aws_iam_role.sweeper[0].arn

  # The publisher's package, runtime, architecture and layers.
  filename         = local.package_path
  source_code_hash = filebase64sha256(local.package_path)
  handler          = local.sweeper_handler
  runtime          = var.lambda_runtime
  architectures    = [var.lambda_architecture]
  memory_size      = local.sweeper.memory_size_mb
  timeout          = local.sweeper.timeout_seconds
  layers           = local.function_layers

  # As the publisher's: the module's key when given.
  kms_key_arn = var.kms_key_arn

  # vpc_config: in the caller's subnets, or no VPC.
  dynamic "vpc_config" {
    for_each = local.vpc_enabled ? [var.vpc_config] : []

    content {
      subnet_ids         = vpc_config.value.subnet_ids
      security_group_ids = vpc_config.value.security_group_ids
    }
  }

  tracing_config {
    mode = var.tracing_mode
  }

  environment {
    # The sink (OUTBOX_PUBLISH_TO and its bus or topic) exactly as the publisher's.
    variables = merge(local.publish_sink_environment, local.table_keys_environment, local.multi_region_environment, local.adoption_environment, {
      OUTBOX_TABLE_NAME              = local.table_name
      OUTBOX_PENDING_INDEX           = local.pending_index_name
      OUTBOX_SWEEPER_MIN_AGE_SECONDS = tostring(local.sweeper.min_age_seconds)
      OUTBOX_SWEEPER_MAX_ITEMS       = tostring(local.sweeper.max_items)
      # Its own service name, so its metrics (QuarantinedEvents, ...) are told
      # apart from the publisher's.
      POWERTOOLS_SERVICE_NAME      = local.sweeper_name
      POWERTOOLS_METRICS_NAMESPACE = local.metrics_namespace
      LOG_LEVEL                    = local.sweeper.log_level
    })
  }

  tags = local.tags

  # No layer precondition of its own: the publisher's (same layers) stops the
  # plan with one message.
  depends_on = [
    aws_cloudwatch_log_group.sweeper,
    aws_iam_role_policy.sweeper,
  ]
}

################################################################################
# Sweeper: schedule
################################################################################

# EventBridge Scheduler rather than an EventBridge rule: it invokes the function
# with a role of its own (no resource policy on the function, no rule on the
# account's default bus), retries on its own terms, and moto implements it, so the
# local apply covers it.
data "aws_iam_policy_document" "sweeper_schedule_assume_role" {
  count = local.sweeper_enabled ? 1 : 0

  statement {
    sid     = "SchedulerAssumeRole"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    # Confused-deputy guard: only schedules of this account's group the sweeper's
    # schedule is in. Scheduler sets aws:SourceArn to the schedule group's ARN
    # (EventBridge Scheduler User Guide, "Confused deputy prevention").
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = ["${local.arn_prefix}:scheduler:${local.arn_region_account}:schedule-group/${local.sweeper_schedule_group}"]
    }
  }
}

resource "aws_iam_role" "sweeper_schedule" {
  count = local.sweeper_enabled ? 1 : 0

  name                 = local.sweeper_schedule_role_name
  path                 = var.iam_role_path
  description          = "Lets the ${local.sweeper_schedule_name} schedule invoke the outbox sweeper."
  assume_role_policy   = data.aws_iam_policy_document.sweeper_schedule_assume_role[0].json
  permissions_boundary = var.iam_permissions_boundary_arn

  tags = local.role_tags

  lifecycle {
    precondition {
      condition     = length(local.sweeper_schedule_role_name) <= local.iam_role_name_max_length
      error_message = "The IAM role name \"${local.sweeper_schedule_role_name}\" (the sweeper schedule's) is ${length(local.sweeper_schedule_role_name)} characters; IAM allows ${local.iam_role_name_max_length}. Shorten iam_role_name_prefix (\"${var.iam_role_name_prefix}\", ${length(var.iam_role_name_prefix)} characters) or name."
    }
  }
}

# The function's ARN built from its name (consumers.tf builds the queues' the
# same way): a document that read aws_lambda_function.sweeper's `arn` would be
# read again at apply whenever the function has changes pending (Terraform defers
# a data source whose resource has changes), and every such plan would show this
# role policy losing its statement (the apply then changed nothing).
locals {
  sweeper_function_arn = "${local.arn_prefix}:lambda:${local.arn_region_account}:function:${local.sweeper_name}"
}

data "aws_iam_policy_document" "sweeper_schedule" {
  count = local.sweeper_enabled ? 1 : 0

  statement {
    sid       = "InvokeSweeper"
    actions   = ["lambda:InvokeFunction"]
    resources = [local.sweeper_function_arn]
  }
}

resource "aws_iam_role_policy" "sweeper_schedule" {
  count = local.sweeper_enabled ? 1 : 0

  name   = local.sweeper_scheduler_role
  role   = aws_iam_role.sweeper_schedule[0].id
  policy = data.aws_iam_policy_document.sweeper_schedule[0].json
}

resource "aws_scheduler_schedule" "sweeper" {
  #checkov:skip=CKV_AWS_297: the schedule has no payload (no target input) for a customer key to protect, only its name and expression, which Scheduler always encrypts with its own key
  count = local.sweeper_enabled ? 1 : 0

  name        = local.sweeper_schedule_name
  description = "Runs the ${local.sweeper_name} outbox sweeper."
  group_name  = local.sweeper_schedule_group
  state       = "ENABLED"

  schedule_expression          = local.sweeper.schedule_expression
  schedule_expression_timezone = "UTC"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.sweeper[0].arn
    role_arn = aws_iam_role.sweeper_schedule[0].arn

    # A missed run is caught up by the next one; a few retries cover a
    # transient invoke failure without piling up runs.
    retry_policy {
      maximum_event_age_in_seconds = 300
      maximum_retry_attempts       = 2
    }
  }

  # No tags: schedules are not taggable (schedule groups are).

  lifecycle {
    # The idempotency window counts the sweeper's re-publishes up to this
    # threshold (modules/windows): a cron() schedule has no interval to derive
    # it from, with or without the oldest_pending_item alarm.
    precondition {
      condition     = local.oldest_pending_threshold_seconds != null
      error_message = "With a cron() sweeper schedule (${local.sweeper.schedule_expression}), set alarms.oldest_pending_age_threshold_seconds: sweeper.min_age_seconds plus the longest gap between runs. The sweeper re-publishes an item as long as it stays pending, and the consumers' idempotency window is derived from that bound (docs/seams.md, Windows), even with oldest_pending_item in alarms.disabled."
    }
  }

  depends_on = [aws_iam_role_policy.sweeper_schedule]
}
