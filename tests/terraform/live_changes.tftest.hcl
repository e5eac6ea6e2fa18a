# Changes to a running stack (modules/live-changes): the records and what they
# report unacknowledged, applied for real (terraform_data needs no provider), so
# every run below plans against the state the previous apply left, as an owner's
# next plan would. The root module's refusal is in live_changes_root.tftest.hcl.
# Run from the repository root: terraform test -test-directory=tests/terraform

variables {
  acknowledged = { serial = 0, changes = [] }
  shape = {
    name                         = "orders-outbox"
    publish_to                   = "eventbridge"
    table                        = "orders-outbox (PK, SK)"
    stream_view_type             = "NEW_IMAGE"
    sweeper                      = true
    event_bus                    = "orders-outbox"
    event_archive                = true
    event_archive_retention_days = 7
    consumers = {
      billing = { retired = false, message_retention_seconds = 345600 }
      audit   = { retired = false, message_retention_seconds = 345600 }
    }
  }
}

run "first_apply_records_the_stack" {
  module {
    source = "./modules/live-changes"
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.recorded_serial == 0
    error_message = "A first apply has nothing to compare with."
  }
}

run "harmless_changes_pass" {
  module {
    source = "./modules/live-changes"
  }

  # A consumer added, retention raised, archive kept longer.
  variables {
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0
    error_message = "Adding a consumer or keeping things longer destroys nothing."
  }
}

run "transport_switch_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["publish_to=sns_fifo"])
    error_message = "Refused, naming exactly: ['publish_to=sns_fifo']."
  }
}

run "consumer_removal_and_shorter_retention_are_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 60 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["consumers.audit=removed", "consumers.billing.message_retention_seconds=60"])
    error_message = "Refused, naming exactly: ['consumers.audit=removed', 'consumers.billing.message_retention_seconds=60']."
  }
}

# The acknowledgement must name the change: naming another one does not do.
run "a_wrong_acknowledgement_is_refused" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    acknowledged = { serial = 1, changes = ["publish_to=sns"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
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
    acknowledged = { serial = 1, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 1209600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
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
    acknowledged = { serial = 1, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = false, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.recorded_serial == 1 && length(output.stale) == 0
    error_message = "The named change passes and is recorded under serial 1."
  }
}

# The next plans compare with the new record; the old acknowledgement may stay.
run "the_switch_is_recorded" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    acknowledged = { serial = 1, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = true, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && length(output.stale) == 0
    error_message = "Retiring a consumer is harmless and the applied acknowledgement is not reported as a typo."
  }
}

# A stale acknowledgement does not let the same switch back through.
run "switching_back_needs_its_own_acknowledgement" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    acknowledged = { serial = 1, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      event_archive_retention_days = 30
      consumers = {
        billing  = { retired = true, message_retention_seconds = 1209600 }
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["publish_to=eventbridge"])
    error_message = "Refused, naming exactly: ['publish_to=eventbridge']."
  }
}

# Retiring only stops delivery (the root module keeps the queue draining):
# removing the consumer still needs its acknowledgement.
run "removing_a_retired_consumer_still_needs_its_acknowledgement" {
  command = plan

  module {
    source = "./modules/live-changes"
  }

  variables {
    acknowledged = { serial = 1, changes = ["publish_to=sns_fifo"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        audit    = { retired = false, message_retention_seconds = 345600 }
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = output.unacknowledged == tolist(["consumers.billing=removed"])
    error_message = "Refused, naming exactly: ['consumers.billing=removed']."
  }
}

run "an_acknowledged_removal_applies_and_a_typo_is_reported" {
  module {
    source = "./modules/live-changes"
  }

  variables {
    acknowledged = { serial = 2, changes = ["consumers.billing=removed", "consumers.audit=removed", "consumers.audti=removed"] }
    shape = merge(var.shape, {
      publish_to                   = "sns_fifo"
      event_bus                    = "none"
      event_archive                = false
      event_archive_retention_days = 30
      consumers = {
        shipping = { retired = false, message_retention_seconds = 345600 }
      }
    })
  }

  assert {
    condition     = length(output.unacknowledged) == 0 && output.stale == tolist(["consumers.audti=removed"])
    error_message = "The named removal passes; the misspelt one is reported."
  }
}
