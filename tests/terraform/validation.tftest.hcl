# Every validation rejects the values it must, with plan stopping at the input.
# A run sets at most one bad value per input (each under a comment naming the
# run that used to test it alone) and lists those inputs in expect_failures:
# terraform test fails the run if any listed input is not refused ("Missing
# expected failure") or if anything else fails, so a run passes only if every
# one of its rules fires. Never give one input two bad values in a run: one
# rule firing would hide the other one not firing.
# Nor refuse an input that another listed input's validations read (consumers
# reads name and publish_to, stream_mapping reads publish_to): Terraform does
# not evaluate those validations then, and the run fails for the wrong reason.

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

run "bad_inputs_are_rejected_round_01" {
  command = plan

  variables {
    # was run "name_with_uppercase_is_rejected"
    name = "Orders-outbox"
    # was run "batch_size_0_is_rejected"
    stream_mapping = { batch_size = 0 }
    # was run "unknown_architecture_is_rejected"
    lambda_architecture = "amd64"
    # was run "old_python_runtime_is_rejected"
    lambda_runtime = "python3.10"
    # was run "keys_only_stream_is_rejected"
    table = { stream_view_type = "KEYS_ONLY" }
    # was run "existing_bus_without_name_is_rejected"
    event_bus = { create = false }
    # was run "log_retention_4_is_rejected"
    log_retention_days = 4
    # was run "memory_below_128_is_rejected"
    publisher = { memory_size_mb = 127 }
    # was run "kms_alias_is_rejected"
    kms_key_arn = "alias/orders"
    # was run "powertools_layer_that_is_not_an_arn_is_rejected"
    powertools_layer_arn = "AWSLambdaPowertoolsPythonV3"
    # was run "permissions_boundary_that_is_not_a_policy_arn_is_rejected"
    iam_permissions_boundary_arn = "arn:aws:iam::111122223333:role/boundary"
    # was run "tracing_mode_other_than_active_or_pass_through_is_rejected"
    tracing_mode = "active"
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.lambda_architecture,
    var.lambda_runtime,
    var.table,
    var.event_bus,
    var.log_retention_days,
    var.publisher,
    var.kms_key_arn,
    var.powertools_layer_arn,
    var.iam_permissions_boundary_arn,
    var.tracing_mode,
  ]
}

run "bad_inputs_are_rejected_round_02" {
  command = plan

  variables {
    # was run "name_shorter_than_3_is_rejected"
    name = "ab"
    # was run "batch_size_10001_is_rejected"
    stream_mapping = { batch_size = 10001 }
    # was run "non_python_runtime_is_rejected"
    lambda_runtime = "nodejs22.x"
    # was run "old_image_stream_is_rejected"
    table = { stream_view_type = "OLD_IMAGE" }
    # was run "creating_the_default_bus_is_rejected"
    event_bus = { name = "default" }
    # was run "log_retention_2_is_rejected"
    log_retention_days = 2
    # was run "memory_above_10240_is_rejected"
    publisher = { memory_size_mb = 10241 }
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.lambda_runtime,
    var.table,
    var.event_bus,
    var.log_retention_days,
    var.publisher,
  ]
}

run "bad_inputs_are_rejected_round_03" {
  command = plan

  variables {
    # was run "name_longer_than_40_is_rejected"
    name = "a2345678901234567890123456789012345678901"
    # was run "fractional_batch_size_is_rejected"
    stream_mapping = { batch_size = 10.5 }
    # was run "unknown_billing_mode_is_rejected"
    table = { billing_mode = "ON_DEMAND" }
    # was run "bus_name_starting_with_aws_is_rejected"
    event_bus = { name = "aws.orders" }
    # was run "negative_log_retention_is_rejected"
    log_retention_days = -1
    # was run "timeout_0_is_rejected"
    publisher = { timeout_seconds = 0 }
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.table,
    var.event_bus,
    var.log_retention_days,
    var.publisher,
  ]
}

run "bad_inputs_are_rejected_round_04" {
  command = plan

  variables {
    # was run "name_starting_with_a_digit_is_rejected"
    name = "1orders"
    # was run "infinite_retries_are_rejected"
    stream_mapping = { maximum_retry_attempts = -1 }
    # was run "provisioned_without_capacity_is_rejected"
    table = { billing_mode = "PROVISIONED" }
    # was run "timeout_above_900_is_rejected"
    publisher = { timeout_seconds = 901 }
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.table,
    var.publisher,
  ]
}

run "bad_inputs_are_rejected_round_05" {
  command = plan

  variables {
    # was run "name_ending_with_a_hyphen_is_rejected"
    name = "orders-"
    # was run "retries_above_10000_are_rejected"
    stream_mapping = { maximum_retry_attempts = 10001 }
    # was run "capacity_with_pay_per_request_is_rejected"
    table = { read_capacity = 5, write_capacity = 5 }
    # was run "unknown_log_level_is_rejected"
    publisher = { log_level = "TRACE" }
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.table,
    var.publisher,
  ]
}

run "bad_inputs_are_rejected_round_06" {
  command = plan

  variables {
    # was run "name_with_underscore_is_rejected"
    name = "orders_outbox"
    # was run "record_age_59_is_rejected"
    stream_mapping = { maximum_record_age_in_seconds = 59 }
    # was run "existing_table_without_name_is_rejected"
    table = { create = false }
    # was run "more_than_4_extra_layers_are_rejected"
    publisher = { extra_layer_arns = [for v in range(1, 6) : "arn:aws:lambda:eu-west-1:111122223333:layer:extra:${v}"] }
  }

  expect_failures = [
    var.name,
    var.stream_mapping,
    var.table,
    var.publisher,
  ]
}

run "bad_inputs_are_rejected_round_07" {
  command = plan

  variables {
    # was run "infinite_record_age_is_rejected"
    stream_mapping = { maximum_record_age_in_seconds = -1 }
    # was run "invalid_table_name_is_rejected"
    table = { name = "my table" }
    # was run "extra_layer_that_is_not_an_arn_is_rejected"
    publisher = { extra_layer_arns = ["my-layer"] }
  }

  expect_failures = [var.stream_mapping, var.table, var.publisher]
}

run "bad_inputs_are_rejected_round_08" {
  command = plan

  variables {
    # was run "record_age_above_a_week_is_rejected"
    stream_mapping = { maximum_record_age_in_seconds = 604801 }
    # was run "invalid_ttl_attribute_is_rejected"
    table = { ttl_attribute_name = "expires at" }
  }

  expect_failures = [var.stream_mapping, var.table]
}

run "bad_inputs_are_rejected_round_09" {
  command = plan

  variables {
    # was run "batching_window_301_is_rejected"
    stream_mapping = { maximum_batching_window_in_seconds = 301 }
    # was run "empty_partition_key_is_rejected"
    table = { partition_key = "" }
  }

  expect_failures = [var.stream_mapping, var.table]
}

run "bad_inputs_are_rejected_round_10" {
  command = plan

  variables {
    # was run "negative_batching_window_is_rejected"
    stream_mapping = { maximum_batching_window_in_seconds = -1 }
    # was run "same_partition_and_sort_key_is_rejected"
    table = { partition_key = "id", sort_key = "id" }
  }

  expect_failures = [var.stream_mapping, var.table]
}

run "bad_inputs_are_rejected_round_11" {
  command = plan

  variables {
    # was run "parallelization_11_is_rejected"
    stream_mapping = { parallelization_factor = 11 }
    # was run "sort_key_named_like_an_outbox_attribute_is_rejected"
    table = { sort_key = "envelope" }
  }

  expect_failures = [var.stream_mapping, var.table]
}

run "bad_inputs_are_rejected_round_12" {
  command = plan

  variables {
    # was run "parallelization_0_is_rejected"
    stream_mapping = { parallelization_factor = 0 }
  }

  expect_failures = [var.stream_mapping]
}

