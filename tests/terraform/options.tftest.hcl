# Options beyond the defaults: a customer managed key, the Powertools layer
# choices, runtime/architecture, tuned stream mapping, provisioned billing.

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

run "customer_key_encrypts_table_queue_and_logs" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
  }

  assert {
    condition     = aws_dynamodb_table.this[0].server_side_encryption[0].enabled && aws_dynamodb_table.this[0].server_side_encryption[0].kms_key_arn == var.kms_key_arn
    error_message = "The table must be encrypted with the given key."
  }

  assert {
    condition     = aws_sqs_queue.on_failure.kms_master_key_id == var.kms_key_arn && aws_sqs_queue.on_failure.kms_data_key_reuse_period_seconds == 300
    error_message = "The on-failure queue must be encrypted with the given key."
  }

  assert {
    condition     = aws_cloudwatch_log_group.publisher.kms_key_id == var.kms_key_arn
    error_message = "The log group must be encrypted with the given key."
  }

  assert {
    condition = (
      [for s in data.aws_iam_policy_document.publisher.statement : s.actions if s.sid == "UseEncryptionKeys"][0] == toset(["kms:Decrypt", "kms:GenerateDataKey"])
      && [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "UseEncryptionKeys"][0] == toset([var.kms_key_arn])
    )
    error_message = "The publisher must be allowed to use exactly the given key (Decrypt, GenerateDataKey)."
  }
}

run "null_layer_arn_follows_runtime_and_architecture" {
  command = plan

  variables {
    lambda_runtime      = "python3.12"
    lambda_architecture = "x86_64"
  }

  override_data {
    target = data.aws_ssm_parameter.powertools_layer[0]
    values = {
      insecure_value = "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-x86_64:40"
    }
  }

  assert {
    condition     = data.aws_ssm_parameter.powertools_layer[0].name == "/aws/service/powertools/python/x86_64/python3.12/${var.powertools_version}"
    error_message = "The default Powertools layer must be looked up for the runtime and the architecture."
  }

  assert {
    condition     = aws_lambda_function.publisher.layers == tolist(["arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-x86_64:40"])
    error_message = "The default Powertools layer must be the one SSM names for the runtime and the architecture."
  }

  assert {
    condition     = aws_lambda_function.publisher.runtime == "python3.12" && aws_lambda_function.publisher.architectures == tolist(["x86_64"])
    error_message = "Runtime and architecture inputs must reach the function."
  }
}

run "empty_layer_arn_means_no_layer" {
  command = plan

  variables {
    powertools_layer_arn = ""
  }

  assert {
    condition     = length(aws_lambda_function.publisher.layers) == 0
    error_message = "powertools_layer_arn = \"\" must deploy the publisher without layers."
  }
}

run "explicit_layer_arn_and_extra_layers" {
  command = plan

  variables {
    powertools_layer_arn = "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:layer:PowertoolsCopy:3"
    publisher = {
      extra_layer_arns = ["arn:aws:lambda:eu-west-1:111122223333:layer:log-shipper:7"]
    }
  }

  assert {
    condition = aws_lambda_function.publisher.layers == tolist([
      "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:layer:PowertoolsCopy:3",
      "arn:aws:lambda:eu-west-1:111122223333:layer:log-shipper:7",
    ])
    error_message = "An explicit Powertools layer comes first, then the extra layers in order."
  }
}

run "no_default_layer_outside_the_commercial_partition" {
  command = plan

  override_data {
    target = data.aws_partition.current
    values = {
      partition = "aws-cn"
    }
  }

  # The bus's and its DLQ's ARNs in that partition (their policy is built from them).
  override_resource {
    target          = aws_cloudwatch_event_bus.this[0]
    override_during = plan
    values = {
      arn = "arn:aws-cn:events:eu-west-1:111122223333:event-bus/orders-outbox"
    }
  }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws-cn:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
    }
  }

  expect_failures = [aws_lambda_function.publisher]
}

run "tuned_stream_mapping_and_publisher" {
  command = plan

  variables {
    stream_mapping = {
      batch_size                         = 500
      maximum_batching_window_in_seconds = 5
      parallelization_factor             = 4
      maximum_retry_attempts             = 50
      maximum_record_age_in_seconds      = 3600
      enabled                            = false
    }
    publisher = {
      memory_size_mb  = 1024
      timeout_seconds = 300
      log_level       = "DEBUG"
    }
    log_retention_days = 5
  }

  assert {
    condition = (
      aws_lambda_event_source_mapping.publisher.batch_size == 500
      && aws_lambda_event_source_mapping.publisher.maximum_batching_window_in_seconds == 5
      && aws_lambda_event_source_mapping.publisher.parallelization_factor == 4
      && aws_lambda_event_source_mapping.publisher.maximum_retry_attempts == 50
      && aws_lambda_event_source_mapping.publisher.maximum_record_age_in_seconds == 3600
      && aws_lambda_event_source_mapping.publisher.enabled == false
    )
    error_message = "The stream_mapping knobs must reach the mapping."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.starting_position == "TRIM_HORIZON" && aws_lambda_event_source_mapping.publisher.bisect_batch_on_function_error
    error_message = "Tuning must never change the starting position or bisecting."
  }

  assert {
    condition = (
      aws_lambda_function.publisher.memory_size == 1024
      && aws_lambda_function.publisher.timeout == 300
      && aws_lambda_function.publisher.environment[0].variables["LOG_LEVEL"] == "DEBUG"
    )
    error_message = "The publisher knobs must reach the function."
  }

  assert {
    condition     = aws_cloudwatch_log_group.publisher.retention_in_days == 5
    error_message = "5 days is a retention CloudWatch Logs accepts."
  }
}

run "provisioned_table_with_options" {
  command = plan

  variables {
    table = {
      name                        = "orders"
      stream_view_type            = "NEW_AND_OLD_IMAGES"
      billing_mode                = "PROVISIONED"
      read_capacity               = 5
      write_capacity              = 10
      deletion_protection_enabled = false
      ttl_attribute_name          = ""
    }
    iam_permissions_boundary_arn = "arn:aws:iam::111122223333:policy/boundary"
  }

  assert {
    condition = (
      aws_dynamodb_table.this[0].name == "orders"
      && aws_dynamodb_table.this[0].stream_view_type == "NEW_AND_OLD_IMAGES"
      && aws_dynamodb_table.this[0].billing_mode == "PROVISIONED"
      && aws_dynamodb_table.this[0].read_capacity == 5
      && aws_dynamodb_table.this[0].write_capacity == 10
      && aws_dynamodb_table.this[0].deletion_protection_enabled == false
    )
    error_message = "The table inputs must reach the table."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].ttl[0].enabled == false
    error_message = "ttl_attribute_name = \"\" must turn TTL off."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_TABLE_NAME"] == "orders" && output.table_name == "orders"
    error_message = "A table name override must reach the publisher and the outputs."
  }

  assert {
    condition     = aws_iam_role.publisher.permissions_boundary == "arn:aws:iam::111122223333:policy/boundary"
    error_message = "The permissions boundary must be set on the publisher role."
  }
}

# An application table keyed pk/sk: the names reach the table, its pending
# index, the stream filter, the IAM conditions and both functions.
run "other_key_names_reach_every_part" {
  command = plan

  variables {
    table = { partition_key = "pk", sort_key = "sk" }
  }

  assert {
    condition = (
      aws_dynamodb_table.this[0].hash_key == "pk" && aws_dynamodb_table.this[0].range_key == "sk"
      && aws_dynamodb_table.this[0].attribute == toset([{ name = "pk", type = "S" }, { name = "sk", type = "S" }, { name = "outbox_pending_shard", type = "S" }])
      && one(aws_dynamodb_table.this[0].global_secondary_index).range_key == "sk"
    )
    error_message = "table.partition_key/sort_key must name the table's keys and the pending index's sort key."
  }

  assert {
    condition     = one(aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter).pattern == "{\"dynamodb\":{\"Keys\":{\"sk\":{\"S\":[{\"prefix\":\"OUTBOX#\"}]}}},\"eventName\":[\"INSERT\"]}"
    error_message = "The stream filter must test the table's sort key, sk."
  }

  assert {
    condition = alltrue([
      for variables in [aws_lambda_function.publisher.environment[0].variables, aws_lambda_function.sweeper[0].environment[0].variables] :
      variables["OUTBOX_PARTITION_KEY"] == "pk" && variables["OUTBOX_SORT_KEY"] == "sk"
    ])
    error_message = "The publisher and the sweeper must be told the key names."
  }

  assert {
    condition = [
      for document in [data.aws_iam_policy_document.publisher, data.aws_iam_policy_document.sweeper[0]] : {
        for s in document.statement : s.sid => toset(flatten([for c in s.condition : c.values if c.variable == "dynamodb:Attributes"]))
        if contains(["DeletePublishedItems", "QuarantinePoisonItems"], s.sid)
      }
      ] == [for _ in range(2) : {
        DeletePublishedItems  = toset(["pk", "sk"])
        QuarantinePoisonItems = toset(["pk", "sk", "outbox_status", "quarantine_reason", "quarantined_at", "outbox_pending_shard"])
    }]
    error_message = "The deletes and quarantine updates of both functions may carry the table's key attributes, pk and sk."
  }
}
