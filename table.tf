################################################################################
# Table
################################################################################

resource "aws_dynamodb_table" "this" {
  count = var.table.create ? 1 : 0

  name           = local.table_name
  billing_mode   = var.table.billing_mode
  read_capacity  = var.table.read_capacity
  write_capacity = var.table.write_capacity
  hash_key       = "PK"
  range_key      = "SK"

  attribute {
    name = "PK"
    type = "S"
  }

  attribute {
    name = "SK"
    type = "S"
  }

  stream_enabled   = true
  stream_view_type = var.table.stream_view_type

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  # Always present, so that setting ttl_attribute_name to "" turns TTL off.
  ttl {
    enabled        = var.table.ttl_attribute_name != ""
    attribute_name = var.table.ttl_attribute_name != "" ? var.table.ttl_attribute_name : null
  }

  deletion_protection_enabled = var.table.deletion_protection_enabled

  tags = local.tags
}

################################################################################
# Existing table
################################################################################

data "aws_dynamodb_table" "existing" {
  count = var.table.create ? 0 : 1

  name = var.table.name

  lifecycle {
    postcondition {
      condition     = self.stream_enabled && contains(["NEW_IMAGE", "NEW_AND_OLD_IMAGES"], self.stream_view_type)
      error_message = "The DynamoDB stream of table \"${var.table.name}\" is not enabled or does not carry the new image. Enable a stream with NEW_IMAGE or NEW_AND_OLD_IMAGES, e.g. aws dynamodb update-table --table-name ${var.table.name} --stream-specification StreamEnabled=true,StreamViewType=NEW_IMAGE"
    }

    postcondition {
      condition = (
        self.hash_key == "PK" && self.range_key == "SK"
        && length([for a in self.attribute : a if contains(["PK", "SK"], a.name) && a.type == "S"]) == 2
      )
      error_message = "Table \"${var.table.name}\" must have a string partition key named PK and a string sort key named SK: outbox items are stored as PK = <entity key>, SK = OUTBOX#<ulid>."
    }
  }
}

locals {
  table_arn        = var.table.create ? aws_dynamodb_table.this[0].arn : data.aws_dynamodb_table.existing[0].arn
  table_stream_arn = var.table.create ? aws_dynamodb_table.this[0].stream_arn : data.aws_dynamodb_table.existing[0].stream_arn

  existing_table_kms_key_arn = var.table.create ? null : try(data.aws_dynamodb_table.existing[0].server_side_encryption[0].kms_key_arn, null)
}
