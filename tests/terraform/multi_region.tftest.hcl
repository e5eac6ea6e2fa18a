# Multi-region on a DynamoDB global table (multi_region.tf): one instance per
# region, through provider aliases, sharing the table. The default provider
# deploys to eu-west-1 (mocks/aws.tfmock.hcl); aws.us_east_1 to us-east-1.

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

mock_provider "aws" {
  alias           = "us_east_1"
  override_during = plan
  source          = "./tests/terraform/mocks"

  mock_data "aws_region" {
    defaults = {
      id   = "us-east-1"
      name = "us-east-1"
    }
  }

  mock_data "aws_dynamodb_table" {
    defaults = {
      arn              = "arn:aws:dynamodb:us-east-1:111122223333:table/orders-outbox"
      stream_arn       = "arn:aws:dynamodb:us-east-1:111122223333:table/orders-outbox/stream/2024-05-01T00:00:00.000"
      stream_enabled   = true
      stream_view_type = "NEW_AND_OLD_IMAGES"
      hash_key         = "PK"
      range_key        = "SK"
      attribute = [
        { name = "PK", type = "S" },
        { name = "SK", type = "S" },
        { name = "outbox_pending_shard", type = "S" },
      ]
      global_secondary_index = [
        {
          name               = "outbox-pending"
          hash_key           = "outbox_pending_shard"
          range_key          = "SK"
          projection_type    = "KEYS_ONLY"
          non_key_attributes = []
          read_capacity      = 0
          write_capacity     = 0
        },
      ]
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  mock_resource "aws_cloudwatch_event_bus" {
    defaults = {
      arn = "arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"
    }
  }
}

override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

variables {
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
}

run "single_region_stack_is_unchanged" {
  command = plan

  assert {
    condition     = length(output.stream_filter_patterns) == 1 && output.stream_filter_patterns[0] == output.stream_filter_pattern && !contains(keys(aws_lambda_function.publisher.environment[0].variables), "OUTBOX_MULTI_REGION")
    error_message = "Without multi_region the mapping keeps its one filter and the functions get no multi-region variable."
  }

  assert {
    condition     = !contains(keys(output.writer_environment), "OUTBOX_MULTI_REGION") && length(aws_dynamodb_table.this[0].replica) == 0 && length(terraform_data.multi_region) == 0
    error_message = "Without multi_region the writer stamps nothing and the table has no replica."
  }
}

run "home_region_creates_the_global_table" {
  command = plan

  variables {
    table        = { stream_view_type = "NEW_AND_OLD_IMAGES" }
    multi_region = { replica_regions = ["us-east-1"], publishes_unstamped = true }
  }

  assert {
    condition     = [for r in aws_dynamodb_table.this[0].replica : r.region_name] == ["us-east-1"]
    error_message = "The home region's instance must create the table with a replica in each other region."
  }

  assert {
    condition = [for f in aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter : jsondecode(f.pattern)] == [
      { eventName = ["INSERT"], dynamodb = { Keys = { SK = { S = [{ prefix = "OUTBOX#" }] } }, NewImage = { outbox_region = { S = ["eu-west-1"] } } } },
      { eventName = ["INSERT"], dynamodb = { Keys = { SK = { S = [{ prefix = "OUTBOX#" }] } }, NewImage = { outbox_region = { S = [{ exists = false }] } } } },
    ]
    error_message = "The home region's mapping must admit outbox INSERTs stamped eu-west-1 and, publishing unstamped items, those without a stamp."
  }

  assert {
    condition = (
      aws_lambda_function.publisher.environment[0].variables["OUTBOX_MULTI_REGION"] == "true"
      && aws_lambda_function.publisher.environment[0].variables["OUTBOX_PUBLISHES_UNSTAMPED"] == "true"
      && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_MULTI_REGION"] == "true"
      && output.writer_environment["OUTBOX_MULTI_REGION"] == "true"
    )
    error_message = "Publisher, sweeper and writer must be told the outbox is multi-region."
  }
}

run "other_region_takes_its_replica_through_an_alias" {
  command   = plan
  providers = { aws = aws.us_east_1 }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  variables {
    table        = { create = false, name = "orders-outbox" }
    multi_region = {}
  }

  assert {
    condition     = [for f in aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter : jsondecode(f.pattern).dynamodb.NewImage.outbox_region.S] == [["us-east-1"]]
    error_message = "The us-east-1 instance must admit only INSERTs stamped us-east-1 (no unstamped ones)."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_PUBLISHES_UNSTAMPED"] == "false" && !contains(keys(aws_lambda_function.sweeper[0].environment[0].variables), "OUTBOX_ADOPTED_REGIONS")
    error_message = "A region other than the home region publishes no unstamped item and adopts nothing by default."
  }

  assert {
    condition     = length(aws_iam_role.forwarder) == 0 && length(aws_cloudwatch_event_rule.forward) == 0 && !contains(keys(output.consumer_environment), "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS") && output.forwarder_role_arn == null
    error_message = "No forwarding unless asked for: no forwarder, and consumers accept their own region only."
  }
}

run "adoption_is_the_sweepers_behind_an_explicit_input" {
  command   = plan
  providers = { aws = aws.us_east_1 }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  variables {
    table        = { create = false, name = "orders-outbox" }
    multi_region = { adopted_regions = ["eu-west-1"] }
  }

  assert {
    condition     = aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_ADOPTED_REGIONS"] == "eu-west-1" && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_ADOPT_AFTER_SECONDS"] == "3600" && !contains(keys(aws_lambda_function.publisher.environment[0].variables), "OUTBOX_ADOPTED_REGIONS")
    error_message = "adopted_regions must reach the sweeper, never the stream publisher."
  }
}

run "a_replica_region_listed_twice_is_refused" {
  command = plan

  variables {
    table        = { stream_view_type = "NEW_AND_OLD_IMAGES" }
    multi_region = { replica_regions = ["us-east-1", "us-east-1"] }
  }

  expect_failures = [var.multi_region]
}

run "the_own_region_as_a_replica_is_refused" {
  command = plan

  variables {
    table        = { stream_view_type = "NEW_AND_OLD_IMAGES" }
    multi_region = { replica_regions = ["eu-west-1"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "replicas_without_a_stream_of_both_images_are_refused" {
  command = plan

  variables {
    multi_region = { replica_regions = ["us-east-1"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "replicas_on_an_existing_table_are_refused" {
  command   = plan
  providers = { aws = aws.us_east_1 }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  variables {
    table        = { create = false, name = "orders-outbox" }
    multi_region = { replica_regions = ["eu-west-1"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "a_fifo_topic_per_region_is_refused" {
  command = plan

  variables {
    publish_to   = "sns_fifo"
    multi_region = {}
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo"
    }
  }

  expect_failures = [terraform_data.multi_region]
}

run "a_replica_without_its_regions_key_is_refused" {
  command = plan

  variables {
    kms_key_arn  = "arn:aws:kms:eu-west-1:111122223333:key/11111111-2222-3333-4444-555555555555"
    table        = { stream_view_type = "NEW_AND_OLD_IMAGES" }
    multi_region = { replica_regions = ["us-east-1"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "a_key_named_like_the_region_stamp_is_refused" {
  command = plan

  variables {
    table        = { sort_key = "outbox_region" }
    multi_region = {}
  }

  expect_failures = [terraform_data.multi_region]
}

# A replica an instance takes as an existing table (table.create = false) is
# checked like any existing table, in its own region: its stream and the
# sweeper's pending index (table.tf postconditions on data.aws_dynamodb_table).
run "a_replica_without_a_stream_is_refused" {
  command   = plan
  providers = { aws = aws.us_east_1 }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  variables {
    table        = { create = false, name = "orders-outbox" }
    multi_region = {}
  }

  override_data {
    target = data.aws_dynamodb_table.existing[0]
    values = {
      arn                    = "arn:aws:dynamodb:us-east-1:111122223333:table/orders-outbox"
      stream_arn             = ""
      stream_enabled         = false
      stream_view_type       = ""
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }, { name = "outbox_pending_shard", type = "S" }]
      global_secondary_index = [{ name = "outbox-pending", hash_key = "outbox_pending_shard", range_key = "SK", projection_type = "KEYS_ONLY", non_key_attributes = [], read_capacity = 0, write_capacity = 0 }]
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "a_replica_without_the_pending_index_is_refused" {
  command   = plan
  providers = { aws = aws.us_east_1 }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  variables {
    table        = { create = false, name = "orders-outbox" }
    multi_region = { adopted_regions = ["eu-west-1"] }
  }

  override_data {
    target = data.aws_dynamodb_table.existing[0]
    values = {
      arn                    = "arn:aws:dynamodb:us-east-1:111122223333:table/orders-outbox"
      stream_arn             = "arn:aws:dynamodb:us-east-1:111122223333:table/orders-outbox/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_AND_OLD_IMAGES"
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      global_secondary_index = []
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

# Consumers across regions: eu-west-1 forwards its events to us-east-1's outbox
# bus and receives us-east-1's (multi_region_forwarding.tf).
run "events_cross_regions_bus_to_bus_behind_an_explicit_input" {
  command = plan

  variables {
    multi_region = {
      forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"]
      receive_forwarded_from    = { "us-east-1" = "arn:aws:iam::111122223333:role/us-east-1-orders-outbox-forwarder" }
    }
  }

  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.forward[0].event_pattern) == { account = ["111122223333"], region = ["eu-west-1"] } && aws_cloudwatch_event_rule.forward[0].event_bus_name == "orders-outbox"
    error_message = "The forwarding rule takes only events put in this region (never one forwarded here, so no loop)."
  }

  assert {
    condition     = aws_cloudwatch_event_target.forward["us-east-1"].arn == "arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox" && aws_cloudwatch_event_target.forward["us-east-1"].dead_letter_config[0].arn == "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
    error_message = "The other region's bus is the target; undeliverable events go to the bus DLQ."
  }

  assert {
    condition     = anytrue([for c in data.aws_iam_policy_document.forwarder_assume_role[0].statement[0].condition : c.variable == "aws:SourceArn" && c.values == tolist(["arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-forward"])])
    error_message = "Only the forwarding rule may assume the forwarder role."
  }

  assert {
    condition     = data.aws_iam_policy_document.forwarder[0].statement[0].resources == toset(["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"]) && data.aws_iam_policy_document.forwarder[0].statement[0].actions == toset(["events:PutEvents"])
    error_message = "The forwarder may put events on the other regions' buses only."
  }

  assert {
    condition     = anytrue([for c in data.aws_iam_policy_document.event_bus_dlq[0].statement[0].condition : contains(c.values, "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-forward")])
    error_message = "The bus DLQ admits the forwarding rule's undeliverable events."
  }

  assert {
    condition = anytrue([
      for s in data.aws_iam_policy_document.event_bus[0].statement :
      s.sid == "OtherRegionsForwardEvents" && anytrue([for p in s.principals : contains(p.identifiers, "arn:aws:iam::111122223333:role/us-east-1-orders-outbox-forwarder")])
      ]) && anytrue([
      for s in data.aws_iam_policy_document.event_bus[0].statement :
      s.sid == "NoOtherSender" && anytrue([for c in s.condition : c.variable == "aws:PrincipalArn" && contains(c.values, "arn:aws:iam::111122223333:role/us-east-1-orders-outbox-forwarder")])
    ])
    error_message = "The bus policy lets the other region's forwarder put events here, and denies it to no one else."
  }

  assert {
    condition     = output.consumer_environment["OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS"] == "us-east-1"
    error_message = "Consumers (the module's, consumers.tf, and callers') accept the regions forwarding to this bus."
  }
}

run "forwarding_to_the_own_regions_bus_is_refused" {
  command = plan

  variables {
    multi_region = { forward_to_event_bus_arns = ["arn:aws:events:eu-west-1:111122223333:event-bus/orders-outbox"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "receiving_from_the_own_region_is_refused" {
  command = plan

  variables {
    multi_region = { receive_forwarded_from = { "eu-west-1" = "arn:aws:iam::111122223333:role/orders-outbox-forwarder" } }
  }

  expect_failures = [terraform_data.multi_region]
}

run "forwarding_needs_eventbridge" {
  command = plan

  variables {
    publish_to   = "sns"
    multi_region = { forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"] }
  }

  expect_failures = [terraform_data.multi_region]
}

run "forwarding_takes_event_bus_arns_and_role_arns" {
  command = plan

  variables {
    multi_region = {
      forward_to_event_bus_arns = ["arn:aws:sqs:us-east-1:111122223333:orders"]
      receive_forwarded_from    = { "us-east-1" = "orders-outbox-forwarder" }
    }
  }

  expect_failures = [var.multi_region]
}

# Review of issue 29 (live change): the forward targets were keyed by bus ARN
# with target_id "to-<region>", so changing a region's bus deleted and created
# the same target id in parallel, and the delete could remove the new target.
# Keyed by region, a new bus for a region is an in-place update of its target
# (the target's arn is updatable; rule, event_bus_name and target_id are not).
run "a_regions_forward_target_is_keyed_by_region" {
  command = plan

  variables {
    multi_region = {
      forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox-2"]
    }
  }

  assert {
    condition     = keys(aws_cloudwatch_event_target.forward) == ["us-east-1"] && aws_cloudwatch_event_target.forward["us-east-1"].target_id == "to-us-east-1" && aws_cloudwatch_event_target.forward["us-east-1"].arn == "arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox-2"
    error_message = "One forward target per region, keyed by the region: a changed bus ARN updates it in place."
  }
}

# Review of issue 29 (trust, loss): on a bus the module does not create (the
# `default` bus, a shared one) the module writes no bus policy, so anyone with
# events:PutEvents there would get events forwarded through the trusted role
# and accepted by the other region's consumers; and no bus DLQ exists to catch
# what the forward target cannot deliver. Forwarding needs the module's bus.
run "forwarding_from_the_default_bus_is_refused" {
  command = plan

  variables {
    event_bus = { create = false, name = "default" }
    multi_region = {
      forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"]
    }
  }

  expect_failures = [terraform_data.multi_region]
}

run "forwarding_from_an_existing_bus_is_refused" {
  command = plan

  variables {
    event_bus = { create = false, name = "shared" }
    multi_region = {
      forward_to_event_bus_arns = ["arn:aws:events:us-east-1:111122223333:event-bus/orders-outbox"]
    }
  }

  expect_failures = [terraform_data.multi_region]
}

# Review of issue 29 (windows): a forwarded copy reaches this region's
# consumers later than a local one: the forward target retries 24 hours, lands
# in the sending region's bus DLQ (kept 14 days, whatever the key) and, put
# back, is forwarded again (24 hours more); and the sending region may have
# adopted the item, publishing it again up to adopt_after_seconds (at most
# multi_region's bound, one day) after its first publish. The receiving
# consumers' windows count all of it (modules/windows).
run "window_without_forwarding" {
  command = plan

  variables {
    multi_region = {}
  }
}

run "receiving_forwarded_events_widens_the_window_by_the_forwarding_hop" {
  command = plan

  variables {
    multi_region = {
      receive_forwarded_from = { "us-east-1" = "arn:aws:iam::111122223333:role/us-east-1-orders-outbox-forwarder" }
    }
  }

  assert {
    condition     = tonumber(output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]) == tonumber(run.window_without_forwarding.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]) + 86400 + 2 * 86400 + 1209600
    error_message = "The window grows by the adoption bound (1 d), two forward retries (2 x 24 h) and the sending bus DLQ's retention (14 d): ${output.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]} vs ${run.window_without_forwarding.consumer_environment["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"]}."
  }
}

run "adopt_after_seconds_beyond_a_day_is_refused" {
  command = plan

  variables {
    sweeper      = { enabled = true }
    multi_region = { adopted_regions = ["us-east-1"], adopt_after_seconds = 86401 }
  }

  expect_failures = [terraform_data.multi_region]
}

# Review of issue 29 (trust): receive_forwarded_from took roles of any account,
# while the consumers accept forwarded events in the bus's own account only.
run "a_forwarder_of_another_account_is_refused" {
  command = plan

  variables {
    multi_region = {
      receive_forwarded_from = { "us-east-1" = "arn:aws:iam::999999999999:role/anything" }
    }
  }

  expect_failures = [terraform_data.multi_region]
}
