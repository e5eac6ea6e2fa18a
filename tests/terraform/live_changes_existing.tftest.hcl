# Changes to a running stack on an existing bus and table (mock provider): the
# module records them by name, so moving to another is refused unless named.
# The records' mechanics are in live_changes.tftest.hcl.
# Run from the repository root: terraform test -test-directory=tests/terraform

mock_provider "aws" {
  source = "./tests/terraform/mocks"
}

# ARNs the module builds from names and checks in postconditions.
override_resource {
  target = aws_sqs_queue.event_bus_dlq[0]
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

override_resource {
  target = aws_cloudwatch_event_bus.this[0]
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:event-bus/orders-outbox"
  }
}

override_resource {
  target = aws_sqs_queue.consumer["billing"]
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"
  }
}

override_resource {
  target = aws_sqs_queue.consumer_dlq["billing"]
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
  }
}

override_resource {
  target = aws_dynamodb_table.idempotency[0]
  values = {
    arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
  }
}

override_resource {
  target = aws_cloudwatch_log_group.consumer["billing"]
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-billing-consumer"
  }
}

override_resource {
  target = aws_sns_topic.this[0]
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
  }
}

variables {
  alarms    = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name      = "orders-outbox"
  event_bus = { create = false, name = "shared-a" }
  consumers = {
    billing = { event_pattern = "{\"detail-type\":[\"OrderCreated\"]}" }
  }
}

override_data {
  target = data.aws_cloudwatch_event_bus.existing
  values = { arn = "arn:aws:events:eu-west-1:111122223333:event-bus/shared-a" }
}

run "stack_on_an_existing_bus_is_applied" {
  assert {
    condition     = module.live_changes.recorded_serial == 0 && length(module.live_changes.unacknowledged) == 0
    error_message = "A first apply records the stack."
  }
}

# Review of issue 23 section 4: an existing bus was recorded as "none", so moving
# to another bus (the rules on the old one deleted: a rule's event_bus_name forces
# a new rule) was not refused.
run "moving_to_another_existing_bus_is_refused" {
  command = plan

  variables {
    acknowledged_changes = { serial = 1 }
    event_bus            = { create = false, name = "shared-b" }
  }

  override_data {
    target = data.aws_cloudwatch_event_bus.existing
    values = { arn = "arn:aws:events:eu-west-1:111122223333:event-bus/shared-b" }
  }

  assert {
    condition     = module.live_changes.unacknowledged == tolist(["event_bus=shared-b (existing)"])
    error_message = "Refused, naming: ${jsonencode(module.live_changes.unacknowledged)}."
  }

  expect_failures = [terraform_data.live_changes]
}
