################################################################################
# Table
################################################################################

resource "aws_dynamodb_table" "this" {
  #checkov:skip=CKV2_AWS_16: capacity is the caller's: PAY_PER_REQUEST by default; with PROVISIONED, Application Auto Scaling targets belong with the caller's capacity planning
  count = local.table.create ? 1 : 0

  name           = local.table_name
  billing_mode   = local.table.billing_mode
  read_capacity  = local.table.read_capacity
  write_capacity = local.table.write_capacity
  hash_key       = local.partition_key
  range_key      = local.sort_key

  attribute {
    name = local.partition_key
    type = "S"
  }

  attribute {
    name = local.sort_key
    type = "S"
  }

  attribute {
    name = local.pending_index_hash_key
    type = "S"
  }

  # Sparse: only pending outbox items carry the shard attribute (published items
  # are deleted, quarantined ones lose it), so the sweeper reads pending items
  # only. Keys only: the sweeper re-reads each item with a consistent BatchGetItem.
  global_secondary_index {
    name            = local.pending_index_name
    hash_key        = local.pending_index_hash_key
    range_key       = local.pending_index_range_key
    projection_type = "KEYS_ONLY"
    read_capacity   = local.table.read_capacity
    write_capacity  = local.table.write_capacity
  }

  stream_enabled   = true
  stream_view_type = local.table.stream_view_type

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  # Always present, so that setting ttl_attribute_name to "" turns TTL off.
  ttl {
    enabled        = local.table.ttl_attribute_name != ""
    attribute_name = local.table.ttl_attribute_name != "" ? local.table.ttl_attribute_name : null
  }

  deletion_protection_enabled = local.table.deletion_protection_enabled

  # multi_region.replica_regions: a global table (version 2019.11.21), one
  # replica per other region, each with its own stream (multi_region.tf).
  dynamic "replica" {
    for_each = local.replica_regions

    content {
      region_name            = replica.value
      kms_key_arn            = lookup(local.replica_kms_key_arns, replica.value, null)
      point_in_time_recovery = true
      propagate_tags         = true
    }
  }

  tags = local.tags
}

################################################################################
# Existing table
################################################################################

data "aws_dynamodb_table" "existing" {
  count = local.table.create ? 0 : 1

  name = local.table.name

  lifecycle {
    postcondition {
      condition     = self.stream_enabled && contains(["NEW_IMAGE", "NEW_AND_OLD_IMAGES"], self.stream_view_type)
      error_message = "The DynamoDB stream of table \"${local.table.name}\" is not enabled or does not carry the new image. Enable a stream with NEW_IMAGE or NEW_AND_OLD_IMAGES, e.g. aws dynamodb update-table --table-name ${local.table.name} --stream-specification StreamEnabled=true,StreamViewType=NEW_IMAGE"
    }

    postcondition {
      condition = (
        self.hash_key == local.partition_key && self.range_key == local.sort_key
        && length([for a in self.attribute : a if contains(local.outbox_key_attributes, a.name) && a.type == "S"]) == 2
      )
      error_message = "Table \"${local.table.name}\" must have a string partition key named ${local.partition_key} and a string sort key named ${local.sort_key} (it has ${coalesce(self.hash_key, "none")}/${coalesce(self.range_key, "none")}): outbox items are stored as ${local.partition_key} = <entity key>, ${local.sort_key} = OUTBOX#<ulid>. Set table.partition_key and table.sort_key to the table's key names."
    }

    # The module cannot add an index to a table it does not manage, and the
    # sweeper needs one. Callers without it either add it (the message gives the
    # command) or set sweeper.enabled = false.
    postcondition {
      condition = !local.sweeper.enabled || anytrue([
        for i in self.global_secondary_index :
        i.name == local.pending_index_name && i.hash_key == local.pending_index_hash_key && i.range_key == local.pending_index_range_key
      ])
      error_message = format(
        "The sweeper needs the sparse pending index on table \"%s\": a global secondary index named %s with partition key %s (string) and sort key %s. Add it (the table stays online while it builds), e.g. aws dynamodb update-table --table-name %s --attribute-definitions AttributeName=%s,AttributeType=S AttributeName=%s,AttributeType=S --global-secondary-index-updates '%s' ; or set sweeper = { enabled = false } to run without a sweeper.",
        local.table.name,
        local.pending_index_name,
        local.pending_index_hash_key,
        local.pending_index_range_key,
        local.table.name,
        local.pending_index_hash_key,
        local.pending_index_range_key,
        jsonencode([{
          Create = merge(
            {
              IndexName = local.pending_index_name
              KeySchema = [
                { AttributeName = local.pending_index_hash_key, KeyType = "HASH" },
                { AttributeName = local.pending_index_range_key, KeyType = "RANGE" },
              ]
              Projection = { ProjectionType = "KEYS_ONLY" }
            },
            self.billing_mode == "PROVISIONED" ? { ProvisionedThroughput = { ReadCapacityUnits = self.read_capacity, WriteCapacityUnits = self.write_capacity } } : {},
          )
        }]),
      )
    }
  }
}

locals {
  table_arn        = local.table.create ? aws_dynamodb_table.this[0].arn : data.aws_dynamodb_table.existing[0].arn
  table_stream_arn = local.table.create ? aws_dynamodb_table.this[0].stream_arn : data.aws_dynamodb_table.existing[0].stream_arn

  existing_table_kms_key_arn = local.table.create ? null : try(data.aws_dynamodb_table.existing[0].server_side_encryption[0].kms_key_arn, null)
}
