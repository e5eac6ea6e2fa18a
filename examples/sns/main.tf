provider "aws" {
  region = var.region
}

data "aws_partition" "current" {}

locals {
  name = "orders-outbox"

  billing_function_name = "${local.name}-billing"
  # The module names the idempotency table "<name>-idempotency". Built from the
  # name rather than read from module.outbox.idempotency_table_name: that output
  # depends on `consumers`, which holds this function's ARN (a cycle).
  idempotency_table_name = "${local.name}-idempotency"
}

################################################################################
# The caller's own consumer function (consumer.py) and its role
################################################################################

data "aws_iam_policy_document" "billing_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "billing" {
  name               = local.billing_function_name
  assume_role_policy = data.aws_iam_policy_document.billing_assume.json
}

resource "aws_iam_role_policy_attachment" "billing_logs" {
  role       = aws_iam_role.billing.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

resource "aws_lambda_function" "billing" {
  #checkov:skip=CKV_AWS_116: SQS-invoked function: failed messages go to the queue's redrive DLQ, a function DLQ (asynchronous invocations only) never receives them
  #checkov:skip=CKV_AWS_117: calls only AWS APIs (SQS, DynamoDB); a VPC would add NAT or endpoints and no isolation to protect
  #checkov:skip=CKV_AWS_115: concurrency is bounded by the SQS mapping (consumers[*].maximum_concurrency), which unlike reserved concurrency does not throttle messages back to the queue
  #checkov:skip=CKV_AWS_272: an example; code signing needs a signing profile the caller owns
  #checkov:skip=CKV_AWS_173: the environment holds only a table name, a consumer name and the topic's ARN, nothing secret
  function_name    = local.billing_function_name
  role             = aws_iam_role.billing.arn
  runtime          = "python3.13"
  architectures    = ["arm64"]
  handler          = "consumer.handler"
  filename         = var.billing_zip_path
  source_code_hash = filebase64sha256(var.billing_zip_path)
  timeout          = 30

  # dynamodb_outbox from the module's layer; Powertools from its public layer,
  # the one the module's functions run, for the same runtime and architecture
  # (the consumer toolkit needs it).
  layers = [module.outbox.layer_arn, module.outbox.powertools_layer_arn]

  # Lambda's default, said explicitly: no sampling of its own. "Active" records
  # its invocations and needs xray:PutTraceSegments and xray:PutTelemetryRecords
  # in its role. Either way the consumer toolkit logs each event's producer trace.
  tracing_config {
    mode = "PassThrough"
  }

  # consumer_environment: the transport and topic the toolkit checks every
  # message against, so a message the topic did not deliver is refused, and
  # OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS, the idempotency window that covers
  # any consumer of this topic (52 days on sns). Not
  # module.outbox.consumers["billing"].environment: that output depends on
  # `consumers`, which holds this function's ARN (a cycle).
  environment {
    variables = merge({
      OUTBOX_IDEMPOTENCY_TABLE = local.idempotency_table_name
      OUTBOX_CONSUMER_NAME     = "billing"
    }, module.outbox.consumer_environment)
  }
}

################################################################################
# Outbox publishing to SNS
################################################################################

module "outbox" {
  source = "../.."

  name       = local.name
  publish_to = "sns"

  consumers = {
    # Your function: the module attaches the consumer policy to its role (role_name
    # is known at plan) before it creates the queue's event source mapping.
    billing = {
      filter_policy = jsonencode({ event_type = ["OrderCreated", "OrderCancelled"] })
      function = {
        arn       = aws_lambda_function.billing.arn
        role_name = aws_iam_role.billing.name
      }
      function_timeout_seconds = 30
    }

    # The bundled reference consumer: records every event of the source in its ledger.
    audit = {
      filter_policy = jsonencode({ source = [var.event_source] })
    }
  }
}
