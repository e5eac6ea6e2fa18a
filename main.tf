################################################################################
# Shared data
################################################################################

data "aws_partition" "current" {}

data "aws_region" "current" {}

################################################################################
# Names and tags
################################################################################

locals {
  # Every name the module derives lives here, so later parts (sweeper, consumers,
  # alarms) extend one list. `var.name` has at most 40 characters: the longest name
  # below is 61 characters (SQS allows 80), the Lambda function and IAM role names
  # are 50 (limit 64).
  table_name               = coalesce(var.table.name, var.name)
  event_bus_name           = coalesce(var.event_bus.name, var.name)
  publisher_name           = "${var.name}-publisher"
  publisher_log_group_name = "/aws/lambda/${local.publisher_name}"
  on_failure_queue_name    = "${var.name}-publisher-on-failure"

  tags = var.tags
}

################################################################################
# Outbox contract
################################################################################

locals {
  # Outbox items share the entity's partition key and carry SK = "OUTBOX#<ulid>"
  # (see lambda/dynamodb_outbox). The stream mapping keeps only their INSERTs:
  # entity writes, quarantine updates and deletes of published items never reach
  # the publisher.
  outbox_sort_key_prefix = "OUTBOX#"

  stream_filter_pattern = jsonencode({
    eventName = ["INSERT"]
    dynamodb = {
      Keys = {
        SK = { S = [{ prefix = local.outbox_sort_key_prefix }] }
      }
    }
  })

  publisher_handler = "dynamodb_outbox.publisher.handler"

  # Reproducible deployment package, built by `make package` from lambda/ and
  # committed with the module.
  package_path = "${path.module}/package/dynamodb_outbox.zip"

  metrics_namespace = "DynamoDBOutbox"
}

################################################################################
# Powertools layer
################################################################################

locals {
  # Public Powertools for AWS Lambda (Python) v3 layers, published per runtime and
  # architecture: https://docs.powertools.aws.dev/lambda/python/latest/#lambda-layer
  # Version 27 as of the Powertools docs (aws-powertools/powertools-lambda-python#7757).
  powertools_layer_accounts = {
    aws = "017000801446"
  }
  powertools_layer_version = 27

  default_powertools_layer_arn = (
    contains(keys(local.powertools_layer_accounts), data.aws_partition.current.partition)
    ? format(
      "arn:%s:lambda:%s:%s:layer:AWSLambdaPowertoolsPythonV3-%s-%s:%d",
      data.aws_partition.current.partition,
      data.aws_region.current.name,
      local.powertools_layer_accounts[data.aws_partition.current.partition],
      replace(var.lambda_runtime, ".", ""),
      var.lambda_architecture,
      local.powertools_layer_version,
    )
    : null
  )

  powertools_layer_arn = var.powertools_layer_arn == null ? local.default_powertools_layer_arn : var.powertools_layer_arn
}

################################################################################
# Encryption
################################################################################

locals {
  # Keys the publisher must be able to use: the module's key (table, queue) and,
  # for an existing table, the customer managed key that table is encrypted with.
  publisher_kms_key_arns = distinct(compact([
    var.kms_key_arn,
    local.existing_table_kms_key_arn,
  ]))
}
