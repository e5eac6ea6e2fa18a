################################################################################
# Consumers: settings
################################################################################

locals {
  reference_consumer_handler = "dynamodb_outbox.reference_consumer.handler"

  # The functions the module deploys (the reference consumer) and the callers' own.
  # Decided by `function == null`, which is known at plan even when the caller's
  # function ARN is not (a function created in the same apply).
  module_consumers      = { for key, c in local.consumers : key => c if c.function == null }
  caller_consumers      = { for key, c in local.consumers : key => c if c.function != null }
  caller_role_consumers = { for key, c in local.caller_consumers : key => c if c.function.role_name != null }

  # Consumers that keep idempotency records (the reference consumer always does).
  toolkit_consumer_keys    = toset([for key, c in local.consumers : key if c.function == null ? true : c.function.uses_toolkit])
  create_idempotency_table = length(local.toolkit_consumer_keys) > 0

  consumer_visibility_timeout_seconds = {
    for key, c in local.consumers : key => c.visibility_timeout_seconds != null ? c.visibility_timeout_seconds : 6 * c.function_timeout_seconds
  }

  # How long an event id is remembered, and when the DLQ-age alarm fires: both
  # derived in modules/windows from every place a copy of an event can still
  # come from (docs/seams.md, "Windows").
  consumer_idempotency_expires_after_seconds = module.windows.idempotency_expires_after_seconds

  # The toolkit's settings (dynamodb_outbox.settings names them), for the
  # reference consumer and, through the `consumers` output, a caller's function.
  consumer_toolkit_environment = {
    for key in keys(local.consumers) : key => merge({
      OUTBOX_CONSUMER_NAME                     = key
      OUTBOX_IDEMPOTENCY_TABLE                 = local.idempotency_table_name
      OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS = tostring(local.consumer_idempotency_expires_after_seconds[key])
    }, local.consumer_sender_environment)
  }

  # ARNs built from names, so that policies can name a queue before it exists: the
  # DLQ's redrive-allow policy names its source queue, which names the DLQ in its
  # redrive policy, and each queue's own policy names the queue. Postconditions on
  # the queues and the table check them against what AWS returns.
  arn_prefix         = "arn:${data.aws_partition.current.partition}"
  arn_region_account = "${local.region_name}:${data.aws_caller_identity.current.account_id}"

  consumer_queue_arns   = { for key, name in local.consumer_queue_names : key => "${local.arn_prefix}:sqs:${local.arn_region_account}:${name}" }
  consumer_dlq_arns     = { for key, name in local.consumer_dlq_names : key => "${local.arn_prefix}:sqs:${local.arn_region_account}:${name}" }
  idempotency_table_arn = "${local.arn_prefix}:dynamodb:${local.arn_region_account}:table/${local.idempotency_table_name}"

  # Also the reference consumers' log groups: a policy that read the log group's
  # `arn` attribute would be read again at apply, for every consumer, whenever any
  # consumer is added (Terraform defers a data source whose resource has changes
  # pending), and every role policy would show as changing.
  consumer_log_group_arns = { for key, name in local.consumer_names : key => "${local.arn_prefix}:logs:${local.arn_region_account}:log-group:/aws/lambda/${name}" }

  # Where each consumer's events come from: its rule, or the topic (local.consumers
  # validates that each has the pattern or filter policy publish_to needs).
  # A retired consumer has neither: its queue only drains (variables.tf).
  consumer_rules         = local.publish_to_sns ? {} : { for key, c in local.consumers : key => c if c.event_pattern != null && !c.retired }
  consumer_subscriptions = local.publish_to_sns ? { for key, c in local.consumers : key => c if c.filter_policy != null && !c.retired } : {}

  consumer_source_service = local.publish_to_sns ? "sns.amazonaws.com" : "events.amazonaws.com"
  consumer_source_arns = merge(
    { for key in keys(local.consumer_rules) : key => aws_cloudwatch_event_rule.consumer[key].arn },
    { for key in keys(local.consumer_subscriptions) : key => aws_sns_topic.this[0].arn },
  )
}

################################################################################
# Consumers: idempotency table
################################################################################

# Shared by every consumer that uses the toolkit (dynamodb_outbox.consumer):
# Powertools idempotency records `idempotency#<key>#<hash>` and the reference
# consumer's ledger `ledger#<key>#<event id>`, and SequenceTracker's
# `sequence#<key>#<subject>`; each consumer's role can touch only
# its own prefixes. Expired records are removed by TTL on `expiration`.
resource "aws_dynamodb_table" "idempotency" {
  count = local.create_idempotency_table ? 1 : 0

  name         = local.idempotency_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "id"

  attribute {
    name = "id"
    type = "S"
  }

  ttl {
    enabled        = true
    attribute_name = "expiration"
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  deletion_protection_enabled = local.idempotency_table.deletion_protection_enabled

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.idempotency_table_arn
      error_message = "The idempotency table's ARN is ${self.arn}, not the ${local.idempotency_table_arn} the consumers' policies were given."
    }
  }
}

################################################################################
# Consumers: queue policies
################################################################################

# Only the consumer's rule (or the topic) may send, and only to this queue. An
# SQS target takes no role: EventBridge is authorised by this policy.
#
# The Deny makes that true against IAM grants too: no IAM principal of the
# account may send, whatever its policies say, except var.operator_principal_arns
# (`outbox-ops redrive`: StartMessageMoveTask sends with its caller's
# permissions). AWS service principals are left to the Allow, which admits only
# this rule or topic (aws:SourceArn). SQS's own move of a message to the DLQ after
# maxReceiveCount is not a SendMessage call and is governed by the DLQ's
# redrive-allow policy instead.
data "aws_iam_policy_document" "consumer_queue" {
  for_each = local.consumer_source_arns

  statement {
    sid       = "NoOtherSender"
    effect    = "Deny"
    actions   = ["sqs:SendMessage"]
    resources = [local.consumer_queue_arns[each.key]]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    # Without operators, every IAM principal.
    dynamic "condition" {
      for_each = length(var.operator_principal_arns) > 0 ? ["operators"] : []

      content {
        test     = "ArnNotLike"
        variable = "aws:PrincipalArn"
        values   = var.operator_principal_arns
      }
    }

    condition {
      test     = "BoolIfExists"
      variable = "aws:PrincipalIsAWSService"
      values   = ["false"]
    }
  }

  statement {
    sid       = local.publish_to_sns ? "TopicDeliversMessages" : "RuleDeliversEvents"
    actions   = ["sqs:SendMessage"]
    resources = [local.consumer_queue_arns[each.key]]

    principals {
      type        = "Service"
      identifiers = [local.consumer_source_service]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [each.value]
    }
  }
}

# The DLQ also receives what the rule's target (or the subscription) could not
# deliver after its retries, from the same source. No IAM principal sends to it,
# operators included (they move messages out of it, never in).
data "aws_iam_policy_document" "consumer_dlq" {
  for_each = local.consumer_source_arns

  statement {
    sid       = "NoOtherSender"
    effect    = "Deny"
    actions   = ["sqs:SendMessage"]
    resources = [local.consumer_dlq_arns[each.key]]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "BoolIfExists"
      variable = "aws:PrincipalIsAWSService"
      values   = ["false"]
    }
  }

  statement {
    sid       = local.publish_to_sns ? "TopicDeadLetters" : "RuleDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [local.consumer_dlq_arns[each.key]]

    principals {
      type        = "Service"
      identifiers = [local.consumer_source_service]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [each.value]
    }
  }
}

################################################################################
# Consumers: windows
################################################################################

module "windows" {
  source = "./modules/windows"

  publish_to = var.publish_to
  consumers = {
    for key, c in local.consumers : key => {
      message_retention_seconds         = c.message_retention_seconds
      maximum_event_age_in_seconds      = c.maximum_event_age_in_seconds
      idempotency_expires_after_seconds = c.idempotency_expires_after_seconds
    }
  }
  archive_retention_days = local.create_event_archive ? local.event_archive.retention_days : 0
  # The bus's DLQ receives events only when the bus has a customer key.
  bus_dlq_retention_seconds = local.create_event_bus_dlq && var.kms_key_arn != null ? local.event_bus_dlq_retention_seconds : 0
  # The sweeper re-publishes an item as long as it stays pending; the
  # oldest-pending alarm's threshold bounds that. A cron() schedule has no
  # interval to derive it from: the threshold is then required
  # (aws_scheduler_schedule.sweeper's precondition), alarm or not.
  sweeper_republish_seconds          = local.sweeper_enabled ? coalesce(local.oldest_pending_threshold_seconds, 0) : 0
  alarm_period_seconds               = local.alarms.period_seconds
  receives_forwarded_events          = length(local.forwarded_from) > 0
  consumer_dlq_age_threshold_seconds = local.alarms.consumer_dlq_age_threshold_seconds
}

################################################################################
# Consumers: queues
################################################################################

# One DLQ per consumer, for two kinds of failure: messages the function failed
# `max_receive_count` times (SQS redrive) and events the rule target or the
# subscription could not deliver (their DLQ). Both are the message the consumer
# queue would have held, so moving them back to the queue replays them. One
# queue instead of two also halves what a deployment waits for: the provider
# waits ~30 s after creating each queue until its attributes settle.
#
# On the ordered path both are FIFO queues (a FIFO queue's DLQ, and an SNS FIFO
# subscription's, must be FIFO too), deduplicating by the event id the publisher
# sets as MessageDeduplicationId rather than by content.
resource "aws_sqs_queue" "consumer_dlq" {
  for_each = local.consumers

  name                      = local.consumer_dlq_names[each.key]
  message_retention_seconds = module.windows.dlq_retention_seconds
  max_message_size          = local.queue_max_message_bytes

  fifo_queue                  = local.ordered ? true : null
  content_based_deduplication = local.ordered ? false : null

  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 300

  policy = try(data.aws_iam_policy_document.consumer_dlq[each.key].json, null)

  # Only the consumer's own queue may use this queue as its DLQ.
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [local.consumer_queue_arns[each.key]]
  })

  tags = local.tags

  lifecycle {
    precondition {
      condition     = module.windows.idempotency_expires_after_seconds[each.key] >= module.windows.minimum_idempotency_seconds[each.key]
      error_message = "consumers[\"${each.key}\"].idempotency_expires_after_seconds is ${module.windows.idempotency_expires_after_seconds[each.key]} s, shorter than a copy of an event can still reach its function: ${module.windows.minimum_idempotency_seconds[each.key]} s, from message_retention_seconds (${each.value.message_retention_seconds}, counted twice: a copy redriven from the DLQ is a new message), the DLQ's ${module.windows.dlq_retention_seconds} s, ${var.publish_to == "eventbridge" ? "maximum_event_age_in_seconds (${each.value.maximum_event_age_in_seconds})" : "SNS's 23 days of delivery retries"}, the stream's 24 h or the sweeper's republish, and event_archive.retention_days. A copy arriving after its record expired takes effect twice. Raise it, or leave it null to derive it (docs/seams.md, Windows)."
    }
    postcondition {
      condition     = self.arn == local.consumer_dlq_arns[each.key]
      error_message = "The DLQ's ARN is ${self.arn}, not the ${local.consumer_dlq_arns[each.key]} its policies were given."
    }
  }
}

resource "aws_sqs_queue" "consumer" {
  for_each = local.consumers

  name                       = local.consumer_queue_names[each.key]
  visibility_timeout_seconds = local.consumer_visibility_timeout_seconds[each.key]
  message_retention_seconds  = each.value.message_retention_seconds
  max_message_size           = local.queue_max_message_bytes

  fifo_queue                  = local.ordered ? true : null
  content_based_deduplication = local.ordered ? false : null

  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 300

  policy = try(data.aws_iam_policy_document.consumer_queue[each.key].json, null)

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.consumer_dlq[each.key].arn
    maxReceiveCount     = each.value.max_receive_count
  })

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.consumer_queue_arns[each.key]
      error_message = "The queue's ARN is ${self.arn}, not the ${local.consumer_queue_arns[each.key]} its policies were given."
    }
  }
}

################################################################################
# Consumers: EventBridge delivery
################################################################################

resource "aws_cloudwatch_event_rule" "consumer" {
  for_each = local.consumer_rules

  name           = local.consumer_names[each.key]
  description    = "Outbox events of ${var.name} for the ${each.key} consumer."
  event_bus_name = local.event_bus_ref_name
  event_pattern  = each.value.event_pattern

  tags = local.tags
}

# No role_arn: EventBridge sends to SQS as the queue policy allows. Events still
# undelivered after the retry policy go to the consumer's DLQ, with the error in
# their message attributes (ERROR_CODE, ERROR_MESSAGE, RULE_ARN, TARGET_ARN).
resource "aws_cloudwatch_event_target" "consumer" {
  for_each = local.consumer_rules

  rule           = aws_cloudwatch_event_rule.consumer[each.key].name
  event_bus_name = local.event_bus_ref_name
  target_id      = "consumer-queue"
  arn            = aws_sqs_queue.consumer[each.key].arn

  retry_policy {
    maximum_event_age_in_seconds = each.value.maximum_event_age_in_seconds
    maximum_retry_attempts       = each.value.maximum_retry_attempts
  }

  dead_letter_config {
    arn = aws_sqs_queue.consumer_dlq[each.key].arn
  }
}

################################################################################
# Consumers: IAM
################################################################################

# What a consumer function needs: read and delete its queue's messages (the event
# source mapping polls with the function's role), decrypt them when the queue
# has a customer key, and keep idempotency records under its own key prefixes.
# Built from ARNs known at plan, so `required_policy_json` is too.
data "aws_iam_policy_document" "consumer" {
  for_each = local.consumers

  statement {
    sid = "ConsumeQueue"
    actions = [
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]
    resources = [local.consumer_queue_arns[each.key]]
  }

  dynamic "statement" {
    for_each = contains(local.toolkit_consumer_keys, each.key) ? [each.key] : []

    content {
      sid = "KeepIdempotencyRecords"
      actions = [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
      ]
      resources = [local.idempotency_table_arn]

      # Every action names the item's key; the consumer can only touch its own
      # idempotency records, ledger entries and sequence records (SequenceTracker)
      # (OUTBOX_CONSUMER_NAME = the key).
      condition {
        test     = "ForAllValues:StringLike"
        variable = "dynamodb:LeadingKeys"
        values   = ["idempotency#${statement.value}#*", "ledger#${statement.value}#*", "sequence#${statement.value}#*"]
      }
    }
  }

  dynamic "statement" {
    for_each = var.kms_key_arn != null ? [var.kms_key_arn] : []

    content {
      sid       = "DecryptQueueMessages"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      # Through SQS (the queue's messages) and Lambda (the environment) only.
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = local.consumer_kms_via
      }
    }
  }

  # No cloudwatch:PutMetricData: Powertools metrics are written to the log as
  # CloudWatch embedded metric format.
}

# The module's function: the same, plus its own log group.
data "aws_iam_policy_document" "consumer_function" {
  for_each = local.module_consumers

  source_policy_documents = [data.aws_iam_policy_document.consumer[each.key].json]

  statement {
    sid = "WriteOwnLogs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    resources = ["${local.consumer_log_group_arns[each.key]}:*"]
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
}

resource "aws_iam_role" "consumer" {
  for_each = local.module_consumers

  name                 = local.consumer_role_names[each.key]
  path                 = var.iam_role_path
  description          = "Execution role of the ${each.key} outbox consumer of ${var.name}."
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume_role.json
  permissions_boundary = var.iam_permissions_boundary_arn

  tags = local.role_tags

  lifecycle {
    precondition {
      condition     = length(local.consumer_role_names[each.key]) <= local.iam_role_name_max_length
      error_message = "The IAM role name \"${local.consumer_role_names[each.key]}\" (consumer ${each.key}'s) is ${length(local.consumer_role_names[each.key])} characters; IAM allows ${local.iam_role_name_max_length}. Shorten iam_role_name_prefix (\"${var.iam_role_name_prefix}\", ${length(var.iam_role_name_prefix)} characters) or the consumer key or name."
    }
  }
}

resource "aws_iam_role_policy" "consumer" {
  for_each = local.module_consumers

  name   = local.consumer_names[each.key]
  role   = aws_iam_role.consumer[each.key].id
  policy = data.aws_iam_policy_document.consumer_function[each.key].json
}

# A caller's function: the module can attach a policy only to a role it is given
# by name. Without one, the caller grants `required_policy_json` itself.
resource "aws_iam_role_policy" "consumer_caller_role" {
  for_each = local.caller_role_consumers

  name   = local.consumer_names[each.key]
  role   = each.value.function.role_name
  policy = data.aws_iam_policy_document.consumer[each.key].json
}

################################################################################
# Consumers: reference function
################################################################################

resource "aws_cloudwatch_log_group" "consumer" {
  #checkov:skip=CKV_AWS_338: retention is the caller's (log_retention_days): these are operational function logs, not an audit trail, and the ledger is the record
  for_each = local.module_consumers

  name              = "/aws/lambda/${local.consumer_names[each.key]}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn

  tags = local.tags

  lifecycle {
    postcondition {
      condition     = self.arn == local.consumer_log_group_arns[each.key]
      error_message = "The log group's ARN is ${self.arn}, not the ${local.consumer_log_group_arns[each.key]} its function's policy was given."
    }
  }
}

resource "aws_lambda_function" "consumer" {
  #checkov:skip=CKV_AWS_116: SQS-invoked function: failed messages go to the queue's redrive DLQ, a function DLQ (asynchronous invocations only) never receives them
  #checkov:skip=CKV_AWS_117: in a VPC only when the caller gives vpc_config (docs/vpc.md): it calls only AWS APIs (DynamoDB), and a VPC needs NAT or endpoints
  #checkov:skip=CKV_AWS_115: concurrency is bounded by the SQS mapping's maximum_concurrency input, which unlike reserved concurrency does not throttle messages back to the queue
  #checkov:skip=CKV_AWS_272: the package is the committed reproducible zip checked by `make package-check`; code signing needs a signing profile the caller owns
  for_each = local.module_consumers

  function_name = local.consumer_names[each.key]
  description   = "Reference outbox consumer ${each.key}: records each event from its queue once, in the ledger of ${local.idempotency_table_name}."
  role          = aws_iam_role.consumer[each.key].arn

  filename         = local.package_path
  source_code_hash = filebase64sha256(local.package_path)
  handler          = local.reference_consumer_handler
  runtime          = var.lambda_runtime
  architectures    = [var.lambda_architecture]
  memory_size      = each.value.function_memory_size_mb
  timeout          = each.value.function_timeout_seconds
  layers           = compact([local.powertools_layer_arn])

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
    # What the `consumers` output gives a caller's own toolkit function, the
    # table named through the resource so the function waits for it.
    variables = merge(local.consumer_toolkit_environment[each.key], {
      OUTBOX_IDEMPOTENCY_TABLE     = aws_dynamodb_table.idempotency[0].name
      POWERTOOLS_SERVICE_NAME      = "${var.name}-${each.key}"
      POWERTOOLS_METRICS_NAMESPACE = local.metrics_namespace
    })
  }

  tags = local.tags

  depends_on = [
    aws_cloudwatch_log_group.consumer,
    aws_iam_role_policy.consumer,
  ]

  lifecycle {
    precondition {
      condition     = local.powertools_layer_arn != null
      error_message = "There is no default Powertools layer for the ${data.aws_partition.current.partition} partition: set powertools_layer_arn to the layer version ARN for your region, or to \"\" for no layer."
    }
  }
}

################################################################################
# Consumers: event source mappings
################################################################################

resource "aws_lambda_event_source_mapping" "consumer" {
  for_each = local.consumers

  event_source_arn = aws_sqs_queue.consumer[each.key].arn
  function_name    = each.value.function == null ? aws_lambda_function.consumer[each.key].arn : each.value.function.arn

  # On a FIFO queue at most 10 and no window (local.consumers validates both).
  batch_size                         = each.value.batch_size
  maximum_batching_window_in_seconds = each.value.maximum_batching_window_in_seconds

  # Not an input: without it Lambda ignores the handler's batchItemFailures and
  # one failing message sends the whole batch back to the queue.
  function_response_types = ["ReportBatchItemFailures"]

  dynamic "scaling_config" {
    for_each = each.value.maximum_concurrency != null ? [each.value.maximum_concurrency] : []

    content {
      maximum_concurrency = scaling_config.value
    }
  }

  tags = local.tags

  # Lambda checks that the function's role can read the queue when it creates the
  # mapping.
  depends_on = [
    aws_iam_role_policy.consumer,
    aws_iam_role_policy.consumer_caller_role,
  ]

  # An SQS event source invokes a function of the queue's region only.
  lifecycle {
    precondition {
      condition     = each.value.function == null ? true : split(":", each.value.function.arn)[3] == local.region_name
      error_message = "Consumer ${each.key}'s function.arn is a function of region ${try(split(":", each.value.function.arn)[3], "")}, but its queue is in ${local.region_name}, the provider's region: Lambda reads an SQS queue of the function's own region only. Deploy the function in ${local.region_name}, or use this module with a provider of the function's region."
    }
  }
}
