# Changes to a running stack (modules/live-changes): the records and what they
# report, applied for real (terraform_data needs no provider), so every run
# below plans against the state the previous apply left, as an owner's next plan
# would. `now` stands for plantimestamp(): one value per run, as one per plan.
# The root module's refusal is in live_changes_root.tftest.hcl.
# Run from the repository root: terraform test -test-directory=tests/terraform

variables {
  sweeper      = true
  acknowledged = { serial = 0, changes = [] }
  shape = {
    name                         = "orders-outbox"
    publish_to                   = "eventbridge"
    table                        = "orders-outbox (PK, SK)"
    stream_view_type             = "NEW_IMAGE"
    event_bus                    = "orders-outbox"
    event_archive                = true
    event_archive_retention_days = 7
    idempotency_table            = true
    consumers = {
      billing = { message_retention_seconds = 345600 }
      audit   = { message_retention_seconds = 345600 }
    }
  }
}

run "first_apply_records_the_stack" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    now = "plan-01"
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && length(output.unrecorded) == 0 && !output.serial_out_of_step && output.recorded_serial == 0
    error_message = "A first apply has nothing to compare with."
  }
}

# Review of issue 23 section 4: a harmless change applied without raising serial
# was never recorded, so undoing it later (removing the added consumer, lowering
# the retention back) destroyed data unrefused. Now it needs serial raised.
run "a_harmless_change_without_raising_serial_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now = "plan-02"
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unrecorded == tolist(["consumers.billing.message_retention_seconds", "consumers.shipping added", "event_archive_retention_days"]) && length(output.unacknowledged) == 0
    error_message = "Refused as unrecorded, nothing to name: ${jsonencode(output.unrecorded)} / ${jsonencode(output.unacknowledged)}."
  }
}

run "a_harmless_change_raising_serial_is_recorded" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-03"
    acknowledged = { serial = 1, changes = [] }
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && length(output.unrecorded) == 0 && !output.serial_out_of_step && output.recorded_serial == 1
    error_message = "Raising serial records the harmless change."
  }
}

# The reviewer's repro: add a consumer, then remove it.
run "removing_the_added_consumer_and_lowering_back_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-04"
    acknowledged = { serial = 2, changes = [] }
  }

  assert {
    condition     = output.unacknowledged == tolist(["consumers.billing.message_retention_seconds=345600", "consumers.shipping=removed", "event_archive.retention_days=7"])
    error_message = "Refused, naming: ${jsonencode(output.unacknowledged)}."
  }
}

run "a_lowered_serial_is_out_of_step" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now = "plan-05"
  }

  assert {
    condition     = output.serial_out_of_step
    error_message = "Serial 0 below the recorded 1 re-creates the record of serial 1: refused."
  }
}

run "a_serial_raised_by_two_is_out_of_step" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-06"
    acknowledged = { serial = 3, changes = [] }
  }

  assert {
    condition     = output.serial_out_of_step
    error_message = "Serial 3 over the recorded 1 re-creates both records: refused."
  }
}

run "the_recorded_serial_and_one_above_are_in_step" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-07"
    acknowledged = { serial = 1, changes = [] }
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = !output.serial_out_of_step && length(output.unrecorded) == 0 && length(output.unacknowledged) == 0
    error_message = "The recorded serial with the recorded shape passes."
  }
}

run "transport_switch_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-08"
    acknowledged = { serial = 2, changes = [] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["publish_to=sns_fifo"]) && !output.serial_out_of_step
    error_message = "Refused, naming exactly: ['publish_to=sns_fifo']."
  }
}

# The acknowledgement must name the change: naming another one does not do.
run "a_wrong_acknowledgement_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-09"
    acknowledged = { serial = 2, changes = ["publish_to=sns"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["publish_to=sns_fifo"])
    error_message = "Refused, naming exactly: ['publish_to=sns_fifo']."
  }
}

# The apply that raises serial re-creates the latest record: the other one, the
# shape before, is what an unacknowledged change is caught against.
run "raising_serial_does_not_let_an_unnamed_change_through" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-10"
    acknowledged = { serial = 2, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["consumers.audit=removed"])
    error_message = "Refused, naming exactly: ['consumers.audit=removed']."
  }
}

run "an_acknowledged_transport_switch_applies" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-11"
    acknowledged = { serial = 2, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.recorded_serial == 2 && length(output.stale) == 0
    error_message = "The named change passes and is recorded under serial 2."
  }
}

# A stale acknowledgement does not let the same switch back through.
run "switching_back_needs_its_own_acknowledgement" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-12"
    acknowledged = { serial = 3, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["publish_to=eventbridge"])
    error_message = "Refused, naming exactly: ['publish_to=eventbridge']."
  }
}

# The consumers' idempotency table goes when no consumer uses the toolkit.
run "deleting_the_idempotency_table_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-13"
    acknowledged = { serial = 3, changes = [] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      idempotency_table            = false
      consumers = {
        billing  = { message_retention_seconds = 1209600 }
        audit    = { message_retention_seconds = 345600 }
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["idempotency_table=removed"])
    error_message = "Refused, naming: ${jsonencode(output.unacknowledged)}."
  }
}

run "an_acknowledged_removal_applies_and_a_typo_is_reported" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-14"
    acknowledged = { serial = 3, changes = ["consumers.billing=removed", "consumers.audit=removed", "consumers.audti=removed"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 0
      consumers = {
        shipping = { message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.stale == tolist(["consumers.audti=removed"])
    error_message = "The named removal passes; the misspelt one is reported."
  }
}

# An existing table or bus is recorded by its name: moving to another strands
# the old table's pending items, or deletes the rules on the old bus.
run "a_stack_on_an_existing_table_and_bus" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-15"
    acknowledged = { serial = 4, changes = ["publish_to=eventbridge", "table=shared-a (existing)"] }
    shape = merge(var.shape, {
      table     = "shared-a (existing)"
      event_bus = "shared-a (existing)"
      consumers = { shipping = { message_retention_seconds = 345600 } }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.recorded_serial == 4
    error_message = "Named, so applied: ${jsonencode(output.unacknowledged)}."
  }
}

run "switching_the_existing_table_or_bus_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    now          = "plan-16"
    acknowledged = { serial = 5, changes = [] }
    shape = merge(var.shape, {
      table     = "shared-b (existing)"
      event_bus = "shared-b (existing)"
      consumers = { shipping = { message_retention_seconds = 345600 } }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["event_bus=shared-b (existing)", "table=shared-b (existing)"])
    error_message = "Refused, naming: ${jsonencode(output.unacknowledged)}."
  }
}
