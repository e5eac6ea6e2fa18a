# Every validation rejects the values it must, with plan stopping at the input.
# Each run sets one bad value, so a run passes only if that rule fires.

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

run "name_with_uppercase_is_rejected" {
  command = plan

  variables {
    name = "Orders-outbox"
  }

  expect_failures = [var.name]
}

run "name_shorter_than_3_is_rejected" {
  command = plan

  variables {
    name = "ab"
  }

  expect_failures = [var.name]
}

run "name_longer_than_40_is_rejected" {
  command = plan

  variables {
    name = "a2345678901234567890123456789012345678901"
  }

  expect_failures = [var.name]
}

run "name_starting_with_a_digit_is_rejected" {
  command = plan

  variables {
    name = "1orders"
  }

  expect_failures = [var.name]
}

run "name_ending_with_a_hyphen_is_rejected" {
  command = plan

  variables {
    name = "orders-"
  }

  expect_failures = [var.name]
}

run "name_with_underscore_is_rejected" {
  command = plan

  variables {
    name = "orders_outbox"
  }

  expect_failures = [var.name]
}

run "batch_size_0_is_rejected" {
  command = plan

  variables {
    stream_mapping = { batch_size = 0 }
  }

  expect_failures = [var.stream_mapping]
}

run "batch_size_10001_is_rejected" {
  command = plan

  variables {
    stream_mapping = { batch_size = 10001 }
  }

  expect_failures = [var.stream_mapping]
}

run "fractional_batch_size_is_rejected" {
  command = plan

  variables {
    stream_mapping = { batch_size = 10.5 }
  }

  expect_failures = [var.stream_mapping]
}

run "infinite_retries_are_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_retry_attempts = -1 }
  }

  expect_failures = [var.stream_mapping]
}

run "retries_above_10000_are_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_retry_attempts = 10001 }
  }

  expect_failures = [var.stream_mapping]
}

run "record_age_59_is_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_record_age_in_seconds = 59 }
  }

  expect_failures = [var.stream_mapping]
}

run "infinite_record_age_is_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_record_age_in_seconds = -1 }
  }

  expect_failures = [var.stream_mapping]
}

run "record_age_above_a_week_is_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_record_age_in_seconds = 604801 }
  }

  expect_failures = [var.stream_mapping]
}

run "batching_window_301_is_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_batching_window_in_seconds = 301 }
  }

  expect_failures = [var.stream_mapping]
}

run "negative_batching_window_is_rejected" {
  command = plan

  variables {
    stream_mapping = { maximum_batching_window_in_seconds = -1 }
  }

  expect_failures = [var.stream_mapping]
}

run "parallelization_11_is_rejected" {
  command = plan

  variables {
    stream_mapping = { parallelization_factor = 11 }
  }

  expect_failures = [var.stream_mapping]
}

run "parallelization_0_is_rejected" {
  command = plan

  variables {
    stream_mapping = { parallelization_factor = 0 }
  }

  expect_failures = [var.stream_mapping]
}

run "unknown_architecture_is_rejected" {
  command = plan

  variables {
    lambda_architecture = "amd64"
  }

  expect_failures = [var.lambda_architecture]
}

run "old_python_runtime_is_rejected" {
  command = plan

  variables {
    lambda_runtime = "python3.10"
  }

  expect_failures = [var.lambda_runtime]
}

run "non_python_runtime_is_rejected" {
  command = plan

  variables {
    lambda_runtime = "nodejs22.x"
  }

  expect_failures = [var.lambda_runtime]
}

run "keys_only_stream_is_rejected" {
  command = plan

  variables {
    table = { stream_view_type = "KEYS_ONLY" }
  }

  expect_failures = [var.table]
}

run "old_image_stream_is_rejected" {
  command = plan

  variables {
    table = { stream_view_type = "OLD_IMAGE" }
  }

  expect_failures = [var.table]
}

run "unknown_billing_mode_is_rejected" {
  command = plan

  variables {
    table = { billing_mode = "ON_DEMAND" }
  }

  expect_failures = [var.table]
}

run "provisioned_without_capacity_is_rejected" {
  command = plan

  variables {
    table = { billing_mode = "PROVISIONED" }
  }

  expect_failures = [var.table]
}

run "capacity_with_pay_per_request_is_rejected" {
  command = plan

  variables {
    table = { read_capacity = 5, write_capacity = 5 }
  }

  expect_failures = [var.table]
}

run "existing_table_without_name_is_rejected" {
  command = plan

  variables {
    table = { create = false }
  }

  expect_failures = [var.table]
}

run "invalid_table_name_is_rejected" {
  command = plan

  variables {
    table = { name = "my table" }
  }

  expect_failures = [var.table]
}

run "invalid_ttl_attribute_is_rejected" {
  command = plan

  variables {
    table = { ttl_attribute_name = "expires at" }
  }

  expect_failures = [var.table]
}

run "existing_bus_without_name_is_rejected" {
  command = plan

  variables {
    event_bus = { create = false }
  }

  expect_failures = [var.event_bus]
}

run "creating_the_default_bus_is_rejected" {
  command = plan

  variables {
    event_bus = { name = "default" }
  }

  expect_failures = [var.event_bus]
}

run "bus_name_starting_with_aws_is_rejected" {
  command = plan

  variables {
    event_bus = { name = "aws.orders" }
  }

  expect_failures = [var.event_bus]
}

run "log_retention_4_is_rejected" {
  command = plan

  variables {
    log_retention_days = 4
  }

  expect_failures = [var.log_retention_days]
}

run "log_retention_2_is_rejected" {
  command = plan

  variables {
    log_retention_days = 2
  }

  expect_failures = [var.log_retention_days]
}

run "negative_log_retention_is_rejected" {
  command = plan

  variables {
    log_retention_days = -1
  }

  expect_failures = [var.log_retention_days]
}

run "memory_below_128_is_rejected" {
  command = plan

  variables {
    publisher = { memory_size_mb = 127 }
  }

  expect_failures = [var.publisher]
}

run "memory_above_10240_is_rejected" {
  command = plan

  variables {
    publisher = { memory_size_mb = 10241 }
  }

  expect_failures = [var.publisher]
}

run "timeout_0_is_rejected" {
  command = plan

  variables {
    publisher = { timeout_seconds = 0 }
  }

  expect_failures = [var.publisher]
}

run "timeout_above_900_is_rejected" {
  command = plan

  variables {
    publisher = { timeout_seconds = 901 }
  }

  expect_failures = [var.publisher]
}

run "unknown_log_level_is_rejected" {
  command = plan

  variables {
    publisher = { log_level = "TRACE" }
  }

  expect_failures = [var.publisher]
}

run "more_than_4_extra_layers_are_rejected" {
  command = plan

  variables {
    publisher = { extra_layer_arns = [for v in range(1, 6) : "arn:aws:lambda:eu-west-1:111122223333:layer:extra:${v}"] }
  }

  expect_failures = [var.publisher]
}

run "extra_layer_that_is_not_an_arn_is_rejected" {
  command = plan

  variables {
    publisher = { extra_layer_arns = ["my-layer"] }
  }

  expect_failures = [var.publisher]
}

run "kms_alias_is_rejected" {
  command = plan

  variables {
    kms_key_arn = "alias/orders"
  }

  expect_failures = [var.kms_key_arn]
}

run "powertools_layer_that_is_not_an_arn_is_rejected" {
  command = plan

  variables {
    powertools_layer_arn = "AWSLambdaPowertoolsPythonV3"
  }

  expect_failures = [var.powertools_layer_arn]
}

run "permissions_boundary_that_is_not_a_policy_arn_is_rejected" {
  command = plan

  variables {
    iam_permissions_boundary_arn = "arn:aws:iam::111122223333:role/boundary"
  }

  expect_failures = [var.iam_permissions_boundary_arn]
}

run "empty_partition_key_is_rejected" {
  command = plan

  variables {
    table = { partition_key = "" }
  }

  expect_failures = [var.table]
}

run "same_partition_and_sort_key_is_rejected" {
  command = plan

  variables {
    table = { partition_key = "id", sort_key = "id" }
  }

  expect_failures = [var.table]
}

run "sort_key_named_like_an_outbox_attribute_is_rejected" {
  command = plan

  variables {
    table = { sort_key = "envelope" }
  }

  expect_failures = [var.table]
}

run "tracing_mode_other_than_active_or_pass_through_is_rejected" {
  command = plan

  variables {
    tracing_mode = "active"
  }

  expect_failures = [var.tracing_mode]
}
