################################################################################
# Live changes: which input changes since the last acknowledging apply destroy
# or empty something holding events or messages, and are not acknowledged. The
# root module refuses the plan when there are any (main.tf, terraform_data
# "live_changes"; docs/live-changes.md).
#
# Terraform shows no expression the prior value of an input. What it does keep
# is the state of a resource whose `input` is in `ignore_changes`: its planned
# value is the one recorded at its last creation. Two such records take turns
# (docs/decisions.md, "Changes to a running stack"):
# - `record["0"]` is re-created when `serial` becomes even, `record["1"]` when it
#   becomes odd; each holds the stack's shape, the serial, the acknowledged
#   changes and the `now` of the plan that created it.
# - Every applied shape is recorded: a plan that changes the shape without
#   raising `serial` is refused (`unrecorded`), so the "latest" record, the one
#   of the current `serial`, is the shape the stack has.
# - In a plan that does not raise `serial`, destructive differences from the
#   latest record must be acknowledged now. In the plan that raises it by one the
#   latest record is being re-created (it holds the new shape), so the other one,
#   the shape applied so far, is checked: what differs from it must be
#   acknowledged now. Outside that plan the other record is older still; what
#   differs from it was acknowledged now or by the apply that wrote the latest.
# - `serial` must be the recorded one or one above: lowering it or raising it by
#   two or more re-creates the other record, which then holds this plan's `now`
#   (`serial_out_of_step`; `first_apply` tells the first apply apart).
################################################################################

terraform {
  required_version = ">= 1.9"
}

variable "shape" {
  description = "What of the stack holds data, as the root module derives it (main.tf, local.live_shape); recorded by every apply that raises acknowledged.serial."
  type = object({
    name                         = string
    publish_to                   = string
    table                        = string
    stream_view_type             = string
    event_bus                    = string
    event_archive                = bool
    event_archive_retention_days = number
    idempotency_table            = bool
    consumers = map(object({
      message_retention_seconds = number
    }))
  })
}

variable "sweeper" {
  description = "Whether the sweeper runs in this plan (not recorded: it only decides whether a new stream loses records)."
  type        = bool
}

variable "acknowledged" {
  description = "The root module's acknowledged_changes."
  type = object({
    serial  = number
    changes = set(string)
  })
}

variable "now" {
  description = "A value unique to this plan: plantimestamp() in the root module; the tests pass their own. A record holding it is being created by this plan."
  type        = string
}

locals {
  serial = var.acknowledged.serial
  latest = tostring(local.serial % 2)
  other  = tostring((local.serial + 1) % 2)
}

# Written once, by the first apply: tells that apply (nothing to compare with)
# from a plan that re-creates both records because serial jumped.
resource "terraform_data" "first_apply" {
  input = { at = var.now }

  lifecycle {
    ignore_changes = [input]
  }
}

resource "terraform_data" "record" {
  for_each = toset(["0", "1"])

  input = {
    serial  = each.key == local.latest ? local.serial : local.serial - 1
    changes = sort(var.acknowledged.changes)
    shape   = var.shape
    at      = var.now
  }

  # record["0"] is re-created when floor(serial / 2) changes, i.e. when serial
  # becomes even; record["1"] when floor((serial + 1) / 2) changes: odd.
  triggers_replace = floor((local.serial + tonumber(each.key)) / 2)

  lifecycle {
    ignore_changes = [input]
  }
}

locals {
  latest_record = terraform_data.record[local.latest].input
  other_record  = terraform_data.record[local.other].input

  # With serial at the recorded value or one above, the other record is never
  # re-created (it is the one the raise keeps). It is re-created, so holds this
  # plan's `now`, only when serial is lowered or jumps by two or more, or by the
  # first apply.
  serial_out_of_step = local.other_record.at == var.now && terraform_data.first_apply.input.at != var.now

  # Differences from the latest record at all: in a plan that raises serial the
  # latest record is re-created with this shape, so there are none; in any other
  # plan they would be applied and not recorded, and a later plan undoing them
  # (removing an added consumer, lowering a raised retention) would be compared
  # with a shape that never had them. So they need serial raised.
  unrecorded = sort(compact(flatten([
    [for field, value in var.shape : field if field != "consumers" && value != local.latest_record.shape[field]],
    [for key, c in var.shape.consumers : "consumers.${key} added" if !contains(keys(local.latest_record.shape.consumers), key)],
    [for key, c in local.latest_record.shape.consumers : "consumers.${key} removed" if !contains(keys(var.shape.consumers), key)],
    [for key, c in var.shape.consumers : "consumers.${key}.message_retention_seconds" if contains(keys(local.latest_record.shape.consumers), key) && try(c.message_retention_seconds != local.latest_record.shape.consumers[key].message_retention_seconds, false)],
  ])))

  # The destructive differences between a recorded shape and the current one,
  # each as the string an owner acknowledges. `from` is a recorded shape.
  changes_from = {
    for which, from in { latest = local.latest_record.shape, other = local.other_record.shape } : which => sort(compact(flatten([
      from.name != var.shape.name ? "name=${var.shape.name}" : "",
      from.publish_to != var.shape.publish_to ? "publish_to=${var.shape.publish_to}" : "",
      # A created table replaced or deleted; an existing one left for another,
      # stranding its pending items.
      from.table != var.shape.table ? "table=${var.shape.table}" : "",
      # A new stream: the records the old one still holds are published only by
      # the sweeper. An existing table's stream is its owner's.
      !endswith(from.table, local.existing) && !var.sweeper && from.stream_view_type != var.shape.stream_view_type ? "table.stream_view_type=${var.shape.stream_view_type}" : "",
      # The bus and the archive go with a transport switch, acknowledged above.
      # A created bus replaced or deleted; rules moved off an existing bus.
      from.publish_to == var.shape.publish_to && from.event_bus != var.shape.event_bus ? "event_bus=${var.shape.event_bus}" : "",
      from.publish_to == var.shape.publish_to && from.event_archive && !var.shape.event_archive ? "event_archive=disabled" : "",
      from.publish_to == var.shape.publish_to && from.event_archive && var.shape.event_archive && var.shape.event_archive_retention_days < from.event_archive_retention_days ? "event_archive.retention_days=${var.shape.event_archive_retention_days}" : "",
      # The consumers' memory of which events they applied.
      from.idempotency_table && !var.shape.idempotency_table ? "idempotency_table=removed" : "",
      [
        for key, c in from.consumers : "consumers.${key}=removed"
        if !contains(keys(var.shape.consumers), key)
      ],
      [
        for key, c in from.consumers : "consumers.${key}.message_retention_seconds=${var.shape.consumers[key].message_retention_seconds}"
        if contains(keys(var.shape.consumers), key) && try(var.shape.consumers[key].message_retention_seconds < c.message_retention_seconds, false)
      ],
    ])))
  }

  # The suffix the root module gives an existing table's or bus's name in the shape.
  existing = " (existing)"

  # Differences from the latest record must be acknowledged now; from the other
  # record, now or by the apply that wrote the latest record (already applied).
  unacknowledged = sort(distinct(concat(
    [for change in local.changes_from.latest : change if !contains(var.acknowledged.changes, change)],
    [for change in local.changes_from.other : change if !contains(var.acknowledged.changes, change) && !contains(local.latest_record.changes, change)],
  )))

  # Acknowledgements that name no change against either record: a typo, or a
  # change the stack does not make.
  stale = sort([for change in var.acknowledged.changes : change if !contains(concat(local.changes_from.latest, local.changes_from.other), change)])
}

output "unacknowledged" {
  description = "Destructive changes not acknowledged: the plan may proceed only when empty."
  value       = local.unacknowledged
}

output "stale" {
  description = "Acknowledged changes that name no difference from either record."
  value       = local.stale
}

output "recorded_serial" {
  description = "The serial of the latest record."
  value       = local.latest_record.serial
}

output "unrecorded" {
  description = "Differences from the latest record in a plan that does not raise serial: refused, so that every applied shape is recorded."
  value       = local.unrecorded
}

output "serial_out_of_step" {
  description = "True when acknowledged.serial is lower than the recorded serial or more than one above it."
  value       = local.serial_out_of_step
}

output "serial" {
  description = "acknowledged_changes.serial."
  value       = local.serial
}
