# Two regions, one global table: each region's instance publishes the events
# written in it, to its own bus and consumers (docs/multi-region.md).

provider "aws" {
  region = var.home_region
}

provider "aws" {
  alias  = "other"
  region = var.other_region
}

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

locals {
  name = "orders-outbox"

  # Each region's reference consumer of OrderPlaced events.
  consumers = {
    billing = { event_pattern = jsonencode({ "detail-type" = ["OrderPlaced"] }) }
  }
}

# The home region creates the table, with a replica in the other region, and
# publishes what was written there, plus items without a region (written before
# the table became global).
module "outbox_home" {
  source = "../.."

  name = local.name
  table = {
    stream_view_type = "NEW_AND_OLD_IMAGES"
  }
  multi_region = {
    replica_regions     = [var.other_region]
    publishes_unstamped = true
    # Failover, standing: the other region's items still pending after this
    # age are published here (while it is up, its own sweeper takes them first).
    adopted_regions     = [var.other_region]
    adopt_after_seconds = var.adopt_after_seconds
    # Consumers across regions: the other region forwards its events to this
    # region's bus, so the consumers here see both regions' events.
    receive_forwarded_from = { (var.other_region) = module.outbox_other.forwarder_role_arn }
  }
  consumers = local.consumers
}

# The other region takes its replica of the table as an existing table.
module "outbox_other" {
  source    = "../.."
  providers = { aws = aws.other }

  name = local.name
  # IAM role names are global: the other region's roles get a prefix of their own.
  iam_role_name_prefix = "${var.other_region}-"
  table = {
    create = false
    name   = module.outbox_home.table_name
  }
  multi_region = {
    adopted_regions     = [var.home_region]
    adopt_after_seconds = var.adopt_after_seconds
    # Every event written here also goes to the home region's bus (a rule on
    # this bus, a cross-Region event bus target, through the forwarder role).
    # Built, not module.outbox_home.event_bus_arn: the home instance reads this
    # instance's forwarder_role_arn, and Terraform would see a cycle.
    forward_to_event_bus_arns = ["arn:${data.aws_partition.current.partition}:events:${var.home_region}:${data.aws_caller_identity.current.account_id}:event-bus/${local.name}"]
  }
  consumers = local.consumers
}
