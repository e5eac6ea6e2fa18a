provider "aws" {
  region = var.region
}

locals {
  name = "orders-outbox"
}

################################################################################
# What the application already has: its table and its bus
################################################################################

# The application's single table, keyed `pk`/`sk` (not the module's default
# PK/SK). What the module requires of an existing table: string partition and sort
# keys, named to the module with table.partition_key/sort_key; a stream carrying
# the new image; and (for the sweeper) the sparse `outbox-pending` index: partition
# key outbox_pending_shard, sort key the table's own (`sk`), both strings, keys only.
resource "aws_dynamodb_table" "orders" {
  #checkov:skip=CKV_AWS_119: stands for the application's existing table, whose encryption is the application's; examples/complete shows a customer managed key
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"
  range_key    = "sk"

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "S"
  }

  attribute {
    name = "outbox_pending_shard"
    type = "S"
  }

  global_secondary_index {
    name            = "outbox-pending"
    hash_key        = "outbox_pending_shard"
    range_key       = "sk"
    projection_type = "KEYS_ONLY"
  }

  stream_enabled   = true
  stream_view_type = "NEW_IMAGE"

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled = true
  }
}

# The application's bus, shared with other producers.
resource "aws_cloudwatch_event_bus" "commerce" {
  name = var.event_bus_name
}

################################################################################
# Outbox on them
################################################################################

module "outbox" {
  source = "../.."

  name = local.name

  # The module reads the table and the bus with data sources at plan. Passing
  # `id` (known only once the resource exists) rather than the literal name makes
  # Terraform read them after they are created in the same apply. A
  # `depends_on` on the module would work too, but it defers every data source
  # of the module whenever the table or bus has any pending change, and the
  # stream mapping would then be planned for replacement.
  table = {
    create        = false
    name          = aws_dynamodb_table.orders.id
    partition_key = "pk" # the table's own key names (default PK/SK); plan fails
    sort_key      = "sk" # when they are not the table's
  }
  event_bus = { create = false, name = aws_cloudwatch_event_bus.commerce.id }

  consumers = {
    audit = { event_pattern = jsonencode({ source = [var.event_source] }) } # the reference consumer
  }
}
