################################################################################
# Multi-region (DynamoDB global table)
################################################################################

# One module instance per region, each with its own provider (an alias), all
# sharing one global table: the instance in the table's home region creates it
# with replicas (table.create = true, multi_region.replica_regions), the others
# take the replica of their region as an existing table (table.create = false).
# Every replica's stream carries every write, local and replicated, so each
# region publishes only what was written in it: the writer stamps its region
# on the outbox item (lambda/dynamodb_outbox/regions.py), the stream filter and
# the publisher take only this region's stamp, and the sweeper reads only this
# region's pending shards. docs/multi-region.md.
variable "multi_region" {
  description = <<-EOT
    Deploy this instance as one region of an outbox on a DynamoDB global table (null: single region).
    - `replica_regions`: with table.create = true only, the other regions the table is replicated to
      (aws_dynamodb_table replica blocks, global tables version 2019.11.21). Each of them runs its own
      instance with table.create = false and the same table name.
    - `publishes_unstamped`: this region also publishes outbox items carrying no region (written before
      multi-region was turned on, or by a writer not configured for it). Exactly one region should: the
      one the table lived in before it became global.
    - `replica_kms_key_arns`: with kms_key_arn set, the customer managed key of each replica region.
    - `adopted_regions`, `adopt_after_seconds` (default 3600, at most 86400): failover, behind an explicit input: this
      region's sweeper also publishes the pending items written in these regions once they are
      adopt_after_seconds old (at least sweeper.min_age_seconds). While those regions are up their own
      publisher and sweeper take their items within minutes, so the rule stays idle; when one is lost,
      its stranded items go out here after that age. Consumers absorb the duplicates by event id.
      For a one-off, `outbox-ops adopt --from-region` does the same from an operator's machine.
    - `forward_to_event_bus_arns` (publish_to = "eventbridge"): consumers across regions. A rule on this
      region's bus forwards every event published here (its `region` is this region's) to these buses,
      the outbox buses of the other regions (cross-Region event bus targets), through a role of its own
      (the `forwarder_role_arn` output); events it cannot deliver go to the bus DLQ. Needs the
      module's own bus (event_bus.create = true): on another bus (`default` included) the module
      writes no policy deciding who may put the events it would forward, and has no DLQ for them.
    - `receive_forwarded_from`: the other side, region => that region's `forwarder_role_arn` (a role of
      this account: refused otherwise). The bus
      policy lets those roles put events here, and every consumer (`consumer_environment` too) accepts
      events from those regions (a forwarded event keeps its region); their idempotency windows grow by
      the forwarding hop (modules/windows: the adoption bound, two forward retries, the sending bus
      DLQ's retention). Idempotency stays per region:
      docs/multi-region.md, "Consumers across regions".
  EOT
  type = object({
    replica_regions     = optional(list(string), [])
    publishes_unstamped = optional(bool, false)
    adopted_regions     = optional(list(string), [])
    adopt_after_seconds = optional(number, 3600)
    # With kms_key_arn: the key of each replica's region (a key serves its own region only).
    replica_kms_key_arns = optional(map(string), {})
    # Consumers across regions (multi_region_forwarding.tf).
    forward_to_event_bus_arns = optional(list(string), [])
    receive_forwarded_from    = optional(map(string), {})
  })
  default = null

  validation {
    condition     = var.multi_region == null ? true : length(distinct(var.multi_region.replica_regions)) == length(var.multi_region.replica_regions)
    error_message = "multi_region.replica_regions lists a region twice: ${var.multi_region == null ? "" : join(", ", distinct([for r in var.multi_region.replica_regions : r if length([for o in var.multi_region.replica_regions : o if o == r]) > 1]))}. A global table has one replica per region."
  }

  validation {
    condition     = var.multi_region == null ? true : length(distinct(var.multi_region.adopted_regions)) == length(var.multi_region.adopted_regions)
    error_message = "multi_region.adopted_regions lists a region twice: ${var.multi_region == null ? "" : join(", ", distinct([for r in var.multi_region.adopted_regions : r if length([for o in var.multi_region.adopted_regions : o if o == r]) > 1]))}."
  }

  validation {
    condition     = var.multi_region == null ? true : var.multi_region.adopt_after_seconds >= 0 && floor(var.multi_region.adopt_after_seconds) == var.multi_region.adopt_after_seconds
    error_message = "multi_region.adopt_after_seconds must be a whole number of seconds, 0 or more."
  }

  validation {
    condition     = var.multi_region == null ? true : alltrue([for r in concat(var.multi_region.replica_regions, var.multi_region.adopted_regions) : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))])
    error_message = "multi_region.replica_regions and multi_region.adopted_regions take AWS region names (e.g. eu-west-1); not: ${var.multi_region == null ? "" : join(", ", [for r in concat(var.multi_region.replica_regions, var.multi_region.adopted_regions) : r if !can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r))])}."
  }

  validation {
    condition     = var.multi_region == null ? true : alltrue([for a in var.multi_region.forward_to_event_bus_arns : can(regex("^arn:[a-z-]+:events:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:event-bus/[A-Za-z0-9._/-]+$", a))])
    error_message = "multi_region.forward_to_event_bus_arns takes event bus ARNs (arn:aws:events:<region>:<account>:event-bus/<name>); not: ${var.multi_region == null ? "" : join(", ", [for a in var.multi_region.forward_to_event_bus_arns : a if !can(regex("^arn:[a-z-]+:events:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:event-bus/[A-Za-z0-9._/-]+$", a))])}."
  }

  validation {
    condition     = var.multi_region == null ? true : length(distinct([for a in var.multi_region.forward_to_event_bus_arns : split(":", a)[3]])) == length(var.multi_region.forward_to_event_bus_arns)
    error_message = "multi_region.forward_to_event_bus_arns names a region twice: one bus per region (each region's outbox bus)."
  }

  validation {
    condition     = var.multi_region == null ? true : alltrue([for r, role in var.multi_region.receive_forwarded_from : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r)) && can(regex("^arn:[a-z-]+:iam::[0-9]{12}:role/", role))])
    error_message = "multi_region.receive_forwarded_from maps AWS region names to IAM role ARNs (that region's forwarder_role_arn output); not: ${var.multi_region == null ? "" : join(", ", [for r, role in var.multi_region.receive_forwarded_from : "${r} = ${role}" if !(can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", r)) && can(regex("^arn:[a-z-]+:iam::[0-9]{12}:role/", role)))])}."
  }
}

locals {
  # The one file the package reads its multi-region names from too
  # (lambda/dynamodb_outbox/regions.py): the attribute holding the writing region.
  shared_with_package = jsondecode(file("${path.module}/lambda/dynamodb_outbox/shared_with_terraform.json"))
  region_attribute    = local.shared_with_package.region_attribute

  multi_region         = var.multi_region != null
  replica_regions      = local.multi_region ? var.multi_region.replica_regions : []
  publishes_unstamped  = local.multi_region ? var.multi_region.publishes_unstamped : true
  adopted_regions      = local.multi_region ? var.multi_region.adopted_regions : []
  replica_kms_key_arns = local.multi_region ? var.multi_region.replica_kms_key_arns : {}
  forward_to_buses     = local.multi_region ? var.multi_region.forward_to_event_bus_arns : []
  forwarded_from       = local.multi_region ? var.multi_region.receive_forwarded_from : {}

  # The publisher's and the sweeper's (dynamodb_outbox.settings,
  # region_scope_from_environment; the region is Lambda's AWS_REGION).
  multi_region_environment = local.multi_region ? {
    OUTBOX_MULTI_REGION        = "true"
    OUTBOX_PUBLISHES_UNSTAMPED = tostring(local.publishes_unstamped)
  } : {}
  # The sweeper only: the stream publisher never adopts.
  adoption_environment = length(local.adopted_regions) > 0 ? {
    OUTBOX_ADOPTED_REGIONS     = join(",", local.adopted_regions)
    OUTBOX_ADOPT_AFTER_SECONDS = tostring(var.multi_region.adopt_after_seconds)
  } : {}
  # The writer's (writer_environment output; OutboxWriter.from_environment stamps AWS_REGION).
  writer_multi_region_environment = local.multi_region ? { OUTBOX_MULTI_REGION = "true" } : {}

  # The stream filters (OR-ed by Lambda, at most 5 per mapping): single region,
  # every outbox INSERT; multi-region, the INSERTs stamped with this region, and
  # the unstamped ones where this region publishes them. A replicated INSERT
  # carries its writer's stamp and is dropped here, and deletes are REMOVEs,
  # which no filter admits.
  stream_filter_patterns = local.multi_region ? concat(
    [jsonencode({
      eventName = ["INSERT"]
      dynamodb = {
        Keys     = { (local.sort_key) = { S = [{ prefix = local.outbox_sort_key_prefix }] } }
        NewImage = { (local.region_attribute) = { S = [local.region_name] } }
      }
    })],
    local.publishes_unstamped ? [jsonencode({
      eventName = ["INSERT"]
      dynamodb = {
        Keys     = { (local.sort_key) = { S = [{ prefix = local.outbox_sort_key_prefix }] } }
        NewImage = { (local.region_attribute) = { S = [{ exists = false }] } }
      }
    })] : [],
  ) : [local.stream_filter_pattern]
}

# What cannot work is refused at plan, naming the input.
resource "terraform_data" "multi_region" {
  count = local.multi_region ? 1 : 0

  input = local.region_name

  lifecycle {
    precondition {
      condition     = !contains([local.partition_key, local.sort_key], local.region_attribute)
      error_message = "table.partition_key and table.sort_key must not be named ${local.region_attribute}: with multi_region the writer stamps its region in that attribute of every outbox item."
    }

    precondition {
      condition     = !contains(local.replica_regions, local.region_name)
      error_message = "multi_region.replica_regions lists ${local.region_name}, the region this instance deploys to (its provider's): the table itself lives there, a replica cannot. List only the other regions."
    }

    precondition {
      condition     = local.table.create || length(local.replica_regions) == 0
      error_message = "multi_region.replica_regions is set but table.create = false: only the instance that creates the table manages its replicas. Set replica_regions on that instance, and leave it empty here."
    }

    # The receiving consumers' windows count adoption at this bound (modules/windows).
    precondition {
      condition     = var.multi_region.adopt_after_seconds <= module.windows.max_adopt_after_seconds
      error_message = "multi_region.adopt_after_seconds is ${var.multi_region.adopt_after_seconds}; at most ${module.windows.max_adopt_after_seconds} (a day): the idempotency windows of consumers receiving forwarded events count an adopted item's second publish up to that long after its first."
    }

    precondition {
      condition     = !contains(local.adopted_regions, local.region_name)
      error_message = "multi_region.adopted_regions lists ${local.region_name}, this instance's own region: a region publishes its own items already; list only lost regions."
    }

    precondition {
      condition     = var.kms_key_arn == null || alltrue([for r in local.replica_regions : contains(keys(local.replica_kms_key_arns), r)])
      error_message = "multi_region.replica_kms_key_arns has no key for replica region(s) ${join(", ", [for r in local.replica_regions : r if !contains(keys(local.replica_kms_key_arns), r)])}: with kms_key_arn set, each replica is encrypted with a customer managed key of its own region."
    }

    precondition {
      condition     = alltrue([for r in keys(local.replica_kms_key_arns) : contains(local.replica_regions, r)])
      error_message = "multi_region.replica_kms_key_arns names region(s) that are not in multi_region.replica_regions: ${join(", ", [for r in keys(local.replica_kms_key_arns) : r if !contains(local.replica_regions, r)])}."
    }

    # The standing adoption runs in the sweeper only (OUTBOX_ADOPTED_REGIONS):
    # without one, adopted_regions would be accepted and never act.
    precondition {
      condition     = length(local.adopted_regions) == 0 || local.sweeper_enabled
      error_message = "multi_region.adopted_regions needs the sweeper (sweeper.enabled = true): the standing adoption of ${join(", ", local.adopted_regions)} runs in the sweeper only, so without one those regions' items would never be adopted here. Enable the sweeper, or use `outbox-ops adopt` when a region is lost."
    }

    # A FIFO topic per region cannot keep one subject's order when its events
    # are written in two regions and published by two publishers.
    precondition {
      condition     = var.publish_to != "sns_fifo"
      error_message = "multi_region is not available with publish_to = \"sns_fifo\": each region publishes to its own FIFO topic, so one subject's events written in two regions would have no order between them. Use publish_to = \"eventbridge\" or \"sns\"."
    }

    precondition {
      condition     = length(local.forward_to_buses) + length(local.forwarded_from) == 0 || var.publish_to == "eventbridge"
      error_message = "multi_region.forward_to_event_bus_arns and multi_region.receive_forwarded_from need publish_to = \"eventbridge\": events cross regions from bus to bus (cross-Region event bus targets). With SNS, subscribe each region's consumers in every region."
    }

    # Trust and loss: on a bus the module does not create (the `default` bus, a
    # shared one) it writes no bus policy, so anyone allowed events:PutEvents
    # there would have events forwarded through the forwarder role and accepted
    # by the other regions' consumers as this region's; and it creates no bus
    # DLQ, so what the forward target cannot deliver in 24 hours would be lost.
    precondition {
      condition     = length(local.forward_to_buses) == 0 || local.create_event_bus
      error_message = "multi_region.forward_to_event_bus_arns needs the module's own bus (event_bus.create = true); \"${local.event_bus_name}\" is not created here: the module writes no policy on it (anyone allowed events:PutEvents there would have events forwarded as this region's and accepted by the other regions' consumers) and gives it no DLQ (undeliverable forwards would be lost). docs/threat-model.md, \"Consumers across regions\"."
    }

    precondition {
      condition     = !contains([for a in local.forward_to_buses : split(":", a)[3]], local.region_name)
      error_message = "multi_region.forward_to_event_bus_arns names a bus in ${local.region_name}, this instance's own region: forward only to the other regions' outbox buses."
    }

    # The consumers accept forwarded events in the bus's own account only
    # (dynamodb_outbox.sender_checks), and docs/multi-region.md says so.
    precondition {
      condition     = alltrue([for r, role in local.forwarded_from : try(split(":", role)[4], "") == data.aws_caller_identity.current.account_id])
      error_message = "multi_region.receive_forwarded_from names roles of another account than this one (${data.aws_caller_identity.current.account_id}): ${join(", ", [for r, role in local.forwarded_from : "${r} = ${role}" if try(split(":", role)[4], "") != data.aws_caller_identity.current.account_id])}. Forwarding is within one account: the other regions' instances run in this account too."
    }

    precondition {
      condition     = !contains(keys(local.forwarded_from), local.region_name)
      error_message = "multi_region.receive_forwarded_from lists ${local.region_name}, this instance's own region: its events are this bus's already; list only the other regions."
    }

    # Global tables version 2019.11.21 need the stream to carry both images
    # (DynamoDB developer guide, "Global tables: requirements"; the provider
    # refuses replicas otherwise at apply).
    precondition {
      condition     = length(local.replica_regions) == 0 || local.table.stream_view_type == "NEW_AND_OLD_IMAGES"
      error_message = "multi_region.replica_regions needs table.stream_view_type = \"NEW_AND_OLD_IMAGES\": a replica without a stream of both images cannot be created (global tables replicate through the stream). It is \"${local.table.stream_view_type}\"."
    }
  }
}
