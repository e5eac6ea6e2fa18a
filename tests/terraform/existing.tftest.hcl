# An existing table and/or an existing bus, read with data sources.
#
# Not covered here: an existing table encrypted with a customer managed key
# (its key is added to the publisher's KMS statement). The key comes from the
# data source's server_side_encryption block, and mocks and overrides can only
# set attributes, not nested blocks.

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

# The bus DLQ's ARN is built from its name for its policy; its postcondition
# compares it with this one (event_bus_dlq.tftest.hcl tests the queue).
override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

variables {
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
}

run "existing_table_is_read_not_created" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  assert {
    condition     = length(aws_dynamodb_table.this) == 0 && length(data.aws_dynamodb_table.existing) == 1
    error_message = "With table.create = false the module must read the table, not create one."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.event_source_arn == data.aws_dynamodb_table.existing[0].stream_arn
    error_message = "The mapping must read the existing table's stream."
  }

  assert {
    condition = (
      [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "ReadOutboxStream"][0] == toset([data.aws_dynamodb_table.existing[0].stream_arn])
      && [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "DeletePublishedItems"][0] == toset([data.aws_dynamodb_table.existing[0].arn])
    )
    error_message = "The publisher's table permissions must be scoped to the existing table and its stream."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_TABLE_NAME"] == "orders"
    error_message = "The publisher must be told the existing table's name."
  }

  assert {
    condition     = output.table_arn == data.aws_dynamodb_table.existing[0].arn && output.table_stream_arn == data.aws_dynamodb_table.existing[0].stream_arn
    error_message = "The outputs must describe the existing table."
  }

  assert {
    condition     = length([for s in data.aws_iam_policy_document.publisher.statement : s if s.sid == "UseEncryptionKeys"]) == 0
    error_message = "No KMS statement for a table without a customer managed key."
  }
}

run "existing_table_with_new_and_old_images_is_accepted" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_AND_OLD_IMAGES"
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      server_side_encryption = []
      # The sweeper's pending index (see sweeper_alarms.tftest.hcl).
      global_secondary_index = [{ name = "outbox-pending", hash_key = "outbox_pending_shard", range_key = "SK", projection_type = "KEYS_ONLY", non_key_attributes = [], read_capacity = 0, write_capacity = 0 }]
    }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.event_source_arn == data.aws_dynamodb_table.existing[0].stream_arn
    error_message = "NEW_AND_OLD_IMAGES carries the new image and must be accepted."
  }
}

run "existing_table_without_stream_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = ""
      stream_enabled         = false
      stream_view_type       = ""
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_with_keys_only_stream_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "KEYS_ONLY"
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_with_old_image_stream_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "OLD_IMAGE"
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_with_other_keys_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_IMAGE"
      hash_key               = "id"
      range_key              = null
      attribute              = [{ name = "id", type = "S" }]
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_with_numeric_sort_key_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_IMAGE"
      hash_key               = "PK"
      range_key              = "SK"
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "N" }]
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_bus_is_read_not_created" {
  command = plan

  variables {
    event_bus = {
      create = false
      name   = "shared"
    }
  }

  assert {
    condition     = length(aws_cloudwatch_event_bus.this) == 0 && length(data.aws_cloudwatch_event_bus.existing) == 1
    error_message = "With event_bus.create = false the module must read the bus, not create one."
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "PublishEvents"][0] == toset([data.aws_cloudwatch_event_bus.existing[0].arn])
    error_message = "PutEvents must be scoped to the existing bus."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_EVENT_BUS_NAME"] == "shared"
    error_message = "The publisher must be told the existing bus's name."
  }

  assert {
    condition     = output.event_bus_arn == data.aws_cloudwatch_event_bus.existing[0].arn
    error_message = "The outputs must describe the existing bus."
  }
}

run "existing_table_and_default_bus" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
    event_bus = {
      create = false
      name   = "default"
    }
  }

  override_data {
    target = data.aws_cloudwatch_event_bus.existing
    values = {
      arn = "arn:aws:events:eu-west-1:111122223333:event-bus/default"
    }
  }

  assert {
    condition     = length(aws_dynamodb_table.this) == 0 && length(aws_cloudwatch_event_bus.this) == 0
    error_message = "Nothing but the publisher stack is created around an existing table and bus."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_EVENT_BUS_NAME"] == "default"
    error_message = "The account's default bus can be used."
  }
}

# A table keyed id/sort adopts the outbox by naming its keys; its pending index
# is sorted by its own sort key.
run "existing_table_keyed_id_sort_is_adopted" {
  command = plan

  variables {
    table = {
      create        = false
      name          = "orders"
      partition_key = "id"
      sort_key      = "sort"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_IMAGE"
      hash_key               = "id"
      range_key              = "sort"
      attribute              = [{ name = "id", type = "S" }, { name = "sort", type = "S" }, { name = "outbox_pending_shard", type = "S" }]
      server_side_encryption = []
      global_secondary_index = [{ name = "outbox-pending", hash_key = "outbox_pending_shard", range_key = "sort", projection_type = "KEYS_ONLY", non_key_attributes = [], read_capacity = 0, write_capacity = 0 }]
    }
  }

  assert {
    condition     = jsondecode(one(aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter).pattern).dynamodb.Keys == { sort = { S = [{ prefix = "OUTBOX#" }] } }
    error_message = "The stream filter must test the existing table's sort key, sort."
  }

  assert {
    condition = alltrue([
      for variables in [aws_lambda_function.publisher.environment[0].variables, aws_lambda_function.sweeper[0].environment[0].variables] :
      variables["OUTBOX_PARTITION_KEY"] == "id" && variables["OUTBOX_SORT_KEY"] == "sort"
    ])
    error_message = "The publisher and the sweeper must be told the existing table's key names."
  }
}

# The same table with the default key names left in place: plan must fail (the
# postcondition names both sets of keys) rather than deploy a publisher whose
# filter matches nothing.
run "existing_table_keyed_id_sort_without_key_names_fails_plan" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  override_data {
    target = data.aws_dynamodb_table.existing
    values = {
      arn                    = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn             = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled         = true
      stream_view_type       = "NEW_IMAGE"
      hash_key               = "id"
      range_key              = "sort"
      attribute              = [{ name = "id", type = "S" }, { name = "sort", type = "S" }]
      server_side_encryption = []
      global_secondary_index = [{ name = "outbox-pending", hash_key = "outbox_pending_shard", range_key = "sort", projection_type = "KEYS_ONLY", non_key_attributes = [], read_capacity = 0, write_capacity = 0 }]
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}
