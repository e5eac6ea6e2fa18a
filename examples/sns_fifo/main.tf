provider "aws" {
  region = var.region
}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

locals {
  name = "orders-fifo"

  shipping_function_name = "${local.name}-shipping"
  # The module names the idempotency table "<name>-idempotency". Built from the
  # name rather than read from module.outbox.idempotency_table_name: that output
  # depends on `consumers`, which holds this function's ARN (a cycle).
  idempotency_table_name = "${local.name}-idempotency"

  shipping_log_group_arn = "arn:${data.aws_partition.current.partition}:logs:${var.region}:${data.aws_caller_identity.current.account_id}:log-group:/aws/lambda/${local.shipping_function_name}"
}

################################################################################
# The caller's own consumer function (consumer.py) and its role
################################################################################

data "aws_iam_policy_document" "shipping_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "shipping" {
  name               = local.shipping_function_name
  assume_role_policy = data.aws_iam_policy_document.shipping_assume.json
}

# What AWSLambdaBasicExecutionRole grants, for this function's log group only.
data "aws_iam_policy_document" "shipping_logs" {
  statement {
    actions   = ["logs:CreateLogGroup"]
    resources = [local.shipping_log_group_arn]
  }

  statement {
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${local.shipping_log_group_arn}:*"]
  }
}

resource "aws_iam_role_policy" "shipping_logs" {
  name   = "logs"
  role   = aws_iam_role.shipping.name
  policy = data.aws_iam_policy_document.shipping_logs.json
}

resource "aws_lambda_function" "shipping" {
  #checkov:skip=CKV_AWS_116: SQS-invoked function: failed messages go to the queue's redrive DLQ, a function DLQ (asynchronous invocations only) never receives them
  #checkov:skip=CKV_AWS_117: calls only AWS APIs (SQS, DynamoDB); a VPC would add NAT or endpoints and no isolation to protect
  #checkov:skip=CKV_AWS_115: concurrency is bounded by the SQS mapping (consumers[*].maximum_concurrency), which unlike reserved concurrency does not throttle messages back to the queue
  #checkov:skip=CKV_AWS_272: an example; code signing needs a signing profile the caller owns
  #checkov:skip=CKV_AWS_173: the environment holds only a table name, a consumer name and the topic's ARN, nothing secret
  function_name    = local.shipping_function_name
  role             = aws_iam_role.shipping.arn
  runtime          = "python3.13"
  architectures    = ["arm64"]
  handler          = "consumer.handler"
  filename         = var.shipping_zip_path
  source_code_hash = filebase64sha256(var.shipping_zip_path)
  timeout          = 30

  # dynamodb_outbox from the module's layer; Powertools from its public layer,
  # the one the module's functions run, for the same runtime and architecture
  # (the consumer toolkit needs it; none with powertools_layer_arn = "").
  layers = compact([module.outbox.layer_arn, module.outbox.powertools_layer_arn])

  # Lambda's default, said explicitly: no sampling of its own. "Active" records
  # its invocations and needs xray:PutTraceSegments and xray:PutTelemetryRecords
  # in its role. Either way the consumer toolkit logs each event's producer trace.
  tracing_config {
    mode = "PassThrough"
  }

  # consumer_environment: the transport (sns_fifo) and the FIFO topic the
  # toolkit checks every message against, and the idempotency window that
  # covers any consumer of this topic. Not
  # module.outbox.consumers["shipping"].environment: that output depends on
  # `consumers`, which holds this function's ARN (a cycle).
  environment {
    variables = merge({
      OUTBOX_IDEMPOTENCY_TABLE = local.idempotency_table_name
      OUTBOX_CONSUMER_NAME     = "shipping"
    }, module.outbox.consumer_environment)
  }
}

################################################################################
# Outbox publishing to an SNS FIFO topic: the ordered path
################################################################################

module "outbox" {
  source = "../.."

  name = local.name
  # A FIFO topic `orders-fifo.fifo` and FIFO consumer queues: each event's
  # message group is its subject (the order), so a consumer gets one order's
  # events in order, and a failing one holds only its own order's later events.
  publish_to = "sns_fifo"

  # parallelization_factor must stay 1 on the ordered path (the default; the
  # plan refuses more): Lambda keeps a shard's order only at 1.

  consumers = {
    # Your function. FIFO queues: a batch_size of at most 10 and no batching
    # window (Lambda's rules for FIFO queue mappings, checked at plan).
    shipping = {
      filter_policy = jsonencode({ event_type = ["OrderCreated", "OrderPaid", "OrderCancelled"] })
      function = {
        arn       = aws_lambda_function.shipping.arn
        role_name = aws_iam_role.shipping.name
      }
      function_timeout_seconds = 30
      batch_size               = 10
    }

    # The bundled reference consumer: records every event of the source in its ledger.
    audit = {
      filter_policy = jsonencode({ source = [var.event_source] })
    }
  }
}
