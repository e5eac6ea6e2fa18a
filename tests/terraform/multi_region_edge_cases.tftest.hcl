# Breaking multi_region.tf at plan (issue 29): a refusal that should fire, a name
# that must differ per region. Each run failed on the merge of the multi-region branch (ea038ce).
# The default provider deploys to eu-west-1 (mocks/aws.tfmock.hcl).

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

# CloudWatch dashboards are global to the account ("All dashboards in your account
# are global, not region-specific": PutDashboard, AWS::CloudWatch::Dashboard). Two
# instances of one outbox (docs/multi-region.md and examples/multi-region give both
# the same name) manage ONE dashboard `<name>-outbox`: each apply overwrites the
# other region's widgets, every plan of the other shows drift, and destroying one
# instance deletes the dashboard the other still claims. IAM role names got a
# prefix for this reason; the dashboard did not.
run "home_instance" {
  command = plan

  variables {
    table        = { stream_view_type = "NEW_AND_OLD_IMAGES" }
    multi_region = { replica_regions = ["us-east-1"], publishes_unstamped = true }
  }

  assert {
    condition     = !strcontains(aws_cloudwatch_dashboard.this[0].dashboard_body, "AdoptionWaitsForRelease")
    error_message = "The dashboard of an instance without adopted regions shows AdoptionWaitsForRelease (an empty series)."
  }
}

run "each_regions_instance_has_a_dashboard_of_its_own" {
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
    table                = { create = false, name = "orders-outbox" }
    multi_region         = {}
    iam_role_name_prefix = "us-east-1-"
  }

  assert {
    condition     = output.dashboard_name != run.home_instance.dashboard_name
    error_message = "Both regions' instances manage the one account-global dashboard ${output.dashboard_name}."
  }
}

# The standing adoption is the sweeper's (OUTBOX_ADOPTED_REGIONS reaches the
# sweeper only). Without a sweeper the input is accepted and does nothing: the
# lost region's items stay stranded while the operator believes failover is on.
run "standing_adoption_without_a_sweeper_is_refused" {
  command = plan

  variables {
    sweeper      = { enabled = false }
    multi_region = { adopted_regions = ["us-east-1"] }
  }

  expect_failures = [terraform_data.multi_region]
}

# The dashboard shows what the standing adoption leaves waiting (AdoptionWaitsForRelease),
# and only where there is one: the line would read an empty series elsewhere.
run "the_dashboard_shows_the_standing_adoption_only_where_there_is_one" {
  command = plan

  variables {
    multi_region = { adopted_regions = ["us-east-1"] }
  }

  assert {
    condition     = strcontains(aws_cloudwatch_dashboard.this[0].dashboard_body, "AdoptionWaitsForRelease")
    error_message = "The dashboard of an instance with multi_region.adopted_regions does not show AdoptionWaitsForRelease."
  }
}
