################################################################################
# Publisher: log group
################################################################################

# Created before the function (see depends_on there) so Lambda never creates an
# unencrypted log group without retention on the first invocation.
resource "aws_cloudwatch_log_group" "publisher" {
  #checkov:skip=CKV_AWS_338: retention is the caller's (log_retention_days): these are operational function logs, not an audit trail, and the outbox items are the record
  name              = local.publisher_log_group_name
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn

  tags = local.tags
}

################################################################################
# Publisher: on-failure queue
################################################################################

# Where the stream mapping sends a record of each batch it gives up on (retries or
# record age exhausted). For SQS the record holds metadata only (shard, sequence
# numbers, stream ARN): the outbox item stays in the table and is the copy to
# recover from.
resource "aws_sqs_queue" "on_failure" {
  name                      = local.on_failure_queue_name
  message_retention_seconds = 1209600 # 14 days, the SQS maximum

  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 300

  tags = local.tags
}

################################################################################
# Publisher: IAM
################################################################################

resource "aws_iam_role" "publisher" {
  name                 = local.publisher_role_name
  path                 = var.iam_role_path
  description          = "Execution role of the ${local.publisher_name} outbox publisher."
  assume_role_policy   = data.aws_iam_policy_document.lambda_assume_role.json
  permissions_boundary = var.iam_permissions_boundary_arn

  tags = local.role_tags

  lifecycle {
    precondition {
      condition     = length(local.publisher_role_name) <= local.iam_role_name_max_length
      error_message = "The IAM role name \"${local.publisher_role_name}\" (the publisher's) is ${length(local.publisher_role_name)} characters; IAM allows ${local.iam_role_name_max_length}. Shorten iam_role_name_prefix (\"${var.iam_role_name_prefix}\", ${length(var.iam_role_name_prefix)} characters) or name."
    }
  }
}

data "aws_iam_policy_document" "publisher" {
  # The stream mapping polls the stream with the function's role. The three
  # actions are scoped to this table's stream, as in the DynamoDB developer guide
  # ("IAM policy to allow an AWS Lambda function to access DynamoDB stream
  # records"). No ListStreams: it has no resource type (Service Authorization
  # Reference, DynamoDB), so scoped to the stream it granted nothing, and the
  # mapping, given the stream ARN, never calls it. Should AWS ever require it,
  # grant it on "*" in a statement of its own.
  statement {
    sid = "ReadOutboxStream"
    actions = [
      "dynamodb:DescribeStream",
      "dynamodb:GetRecords",
      "dynamodb:GetShardIterator",
    ]
    resources = [local.table_stream_arn]
  }

  # Delete published outbox items (BatchWriteItem, also for a single item).
  # BatchWriteItem also authorises PutRequest: dynamodb:Attributes limits every
  # request to the key attributes, so no request may write any other attribute.
  # What no condition narrows: which item. The entity shares the outbox item's
  # partition key and no condition key sees the sort key, so the role can delete
  # any item of the table by its key (or put one made of its key alone).
  # No DeleteItem: the handler never calls it (tests/terraform/test_iam_least_privilege.py).
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

  # Mark poison items as quarantined: the key and the quarantine attributes only,
  # and no ReturnValues that would read the rest of the item back (AWS's "access
  # to specific attributes" example). Like the delete, it can name any item.
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

  # On the ordered path only: the pending sequences of a partition whose events
  # carry a sequence, to send the lower pending ones first
  # (lambda/dynamodb_outbox/subject_sequences.py): keys and
  # local.sequence_query_attributes, never the envelopes.
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

  # On the ordered path only: those lower pending events, read by key (a
  # consistent BatchGetItem of this table) to be sent before the later one.
  dynamic "statement" {
    for_each = var.publish_to == "sns_fifo" ? [1] : []
    content {
      sid       = "ReadLowerPendingSequences"
      actions   = ["dynamodb:BatchGetItem"]
      resources = [local.table_arn]
    }
  }

  # events:PutEvents on the bus, or sns:Publish on the topic (publish_to).
  statement {
    sid       = "PublishEvents"
    actions   = local.publish_actions
    resources = [local.publish_target_arn]
  }

  # The stream mapping sends failed-batch records to its on-failure destination
  # with the function's role.
  statement {
    sid       = "SendFailedBatchRecords"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.on_failure.arn]
  }

  statement {
    sid = "WriteOwnLogs"
    actions = [
      "logs:CreateLogStream",
      "logs:PutLogEvents",
    ]
    resources = ["${aws_cloudwatch_log_group.publisher.arn}:*"]
  }

  # Read an encrypted stream/table, send to an encrypted queue or topic; only
  # through those services (and Lambda, for the environment), never directly.
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
        values   = local.publishing_kms_via
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

resource "aws_iam_role_policy" "publisher" {
  name   = local.publisher_name
  role   = aws_iam_role.publisher.id
  policy = data.aws_iam_policy_document.publisher.json
}

################################################################################
# Publisher: function
################################################################################

resource "aws_lambda_function" "publisher" {
  #checkov:skip=CKV_AWS_116: stream-invoked function: failed batches go to the stream mapping's on-failure queue, a function DLQ (asynchronous invocations only) never receives them
  #checkov:skip=CKV_AWS_117: in a VPC only when the caller gives vpc_config (docs/vpc.md): it calls only AWS APIs (DynamoDB, EventBridge/SNS), and a VPC needs NAT or endpoints
  #checkov:skip=CKV_AWS_115: concurrency is bounded by the stream: one invocation per shard times parallelization_factor; reserving it would only take from the account pool
  #checkov:skip=CKV_AWS_272: the package is the committed reproducible zip checked by `make package-check`; code signing needs a signing profile the caller owns
  function_name = local.publisher_name
  description   = "Publishes outbox items from the stream of ${local.table_name} to ${local.publish_target_description}."
  role          = aws_iam_role.publisher.arn

  filename         = local.package_path
  source_code_hash = filebase64sha256(local.package_path)
  handler          = local.publisher_handler
  runtime          = var.lambda_runtime
  architectures    = [var.lambda_architecture]
  memory_size      = local.publisher.memory_size_mb
  timeout          = local.publisher.timeout_seconds
  layers           = local.function_layers

  # The environment (names and ARNs, no secrets) is encrypted with the module's
  # key when one is given, with Lambda's AWS managed key otherwise.
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
    variables = merge(local.publish_sink_environment, local.table_keys_environment, local.multi_region_environment, {
      OUTBOX_TABLE_NAME            = local.table_name
      OUTBOX_SWEEPER_ENABLED       = tostring(local.sweeper_enabled)
      POWERTOOLS_SERVICE_NAME      = var.name
      POWERTOOLS_METRICS_NAMESPACE = local.metrics_namespace
      LOG_LEVEL                    = local.publisher.log_level
    })
  }

  tags = local.tags

  depends_on = [
    aws_cloudwatch_log_group.publisher,
    aws_iam_role_policy.publisher,
  ]

  lifecycle {
    precondition {
      condition     = !local.lambda_runtime_needs_6x || local.provider_is_6x
      error_message = "lambda_runtime = \"${var.lambda_runtime}\" needs hashicorp/aws 6.20 or newer: the 5.x provider in use accepts Lambda runtimes up to python3.13 and refuses the functions and the layer (\"expected runtime to be one of ...\"). Upgrade the provider (terraform init -upgrade, with a constraint allowing >= 6.20) or set lambda_runtime = \"python3.13\"."
    }

    # A key of another region cannot encrypt this region's table, queues or logs;
    # AWS would refuse it resource by resource, at apply.
    precondition {
      condition     = var.kms_key_arn == null ? true : split(":", var.kms_key_arn)[3] == local.region_name
      error_message = "The kms_key_arn is a key of region ${try(split(":", var.kms_key_arn)[3], "")}, but the provider deploys to ${local.region_name}: DynamoDB, SQS, SNS, CloudWatch Logs and Lambda use keys of their own region only. Give a key (or a multi-Region replica key) of ${local.region_name}."
    }

    precondition {
      condition     = local.powertools_layer_arn != null
      error_message = "There is no default Powertools layer for the ${data.aws_partition.current.partition} partition: set powertools_layer_arn to the layer version ARN for your region, or to \"\" for no layer."
    }
  }
}

################################################################################
# Publisher: stream mapping
################################################################################

resource "aws_lambda_event_source_mapping" "publisher" {
  # A changed table.stream_view_type is a new stream, but hashicorp/aws 5.x plans
  # the old stream_arn (terraform-provider-aws#42560): the mapping moves at the
  # next apply. Not re-created on the change: a mapping re-created in the first apply
  # would be given the planned, old ARN. docs/live-changes.md says apply twice.
  event_source_arn = local.table_stream_arn
  function_name    = aws_lambda_function.publisher.function_name
  enabled          = local.stream_mapping.enabled

  # Not an input: with LATEST, records written while the mapping is being created
  # or re-created are never read, and for an outbox that is silent event loss.
  starting_position = "TRIM_HORIZON"

  batch_size                         = local.stream_mapping.batch_size
  maximum_batching_window_in_seconds = local.stream_mapping.maximum_batching_window_in_seconds
  parallelization_factor             = local.stream_mapping.parallelization_factor

  # The handler returns the first failed record's sequence number; bisecting
  # isolates a failing record; bounded retries and age keep one record from
  # blocking its shard, and what is given up on is recorded on the queue.
  function_response_types        = ["ReportBatchItemFailures"]
  bisect_batch_on_function_error = true
  maximum_retry_attempts         = local.stream_mapping.maximum_retry_attempts
  maximum_record_age_in_seconds  = local.stream_mapping.maximum_record_age_in_seconds

  filter_criteria {
    # One filter (single region), or one per kind of item this region publishes
    # (multi_region.tf): Lambda ORs them.
    dynamic "filter" {
      for_each = local.stream_filter_patterns

      content {
        pattern = filter.value
      }
    }
  }

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.on_failure.arn
    }
  }

  # Tags on event source mappings: hashicorp/aws 5.70, below versions.tf's floor.
  tags = local.tags

  # Lambda checks the role can read the stream when the mapping is created.
  depends_on = [aws_iam_role_policy.publisher]
}
