# The module with only `name` (and tags) set: the safe defaults it promises.
# Run from the repository root: terraform test -test-directory=tests/terraform

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
  tags = {
    Team = "orders"
  }
}

# The module with only name (and tags) set: one plan serves every block of
# asserts below; each block was a run of its own (named in its comment).
run "defaults_are_safe" {
  command = plan

  # was run "stream_mapping_reads_from_trim_horizon"
  assert {
    condition     = aws_lambda_event_source_mapping.publisher.starting_position == "TRIM_HORIZON"
    error_message = "The stream mapping must start at TRIM_HORIZON: with LATEST, items written while the mapping is created are never published."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.event_source_arn == aws_dynamodb_table.this[0].stream_arn
    error_message = "The stream mapping must read the created table's stream."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.function_name == aws_lambda_function.publisher.function_name
    error_message = "The stream mapping must invoke the publisher."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.enabled
    error_message = "The stream mapping must be enabled by default."
  }

  # was run "stream_mapping_keeps_only_outbox_inserts"
  assert {
    condition     = length(aws_lambda_event_source_mapping.publisher.filter_criteria) == 1 && length(aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter) == 1
    error_message = "The stream mapping must have exactly one filter."
  }

  assert {
    condition     = one(aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter).pattern == "{\"dynamodb\":{\"Keys\":{\"SK\":{\"S\":[{\"prefix\":\"OUTBOX#\"}]}}},\"eventName\":[\"INSERT\"]}"
    error_message = "The filter must be exactly: eventName INSERT and SK (string) starting with OUTBOX#."
  }

  assert {
    condition     = output.stream_filter_pattern == one(aws_lambda_event_source_mapping.publisher.filter_criteria[0].filter).pattern
    error_message = "The stream_filter_pattern output must be the mapping's filter."
  }

  # was run "stream_mapping_fails_safely"
  assert {
    condition     = toset(aws_lambda_event_source_mapping.publisher.function_response_types) == toset(["ReportBatchItemFailures"])
    error_message = "The stream mapping must use ReportBatchItemFailures, or Lambda ignores the handler's checkpoint."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.bisect_batch_on_function_error == true
    error_message = "Failing batches must be bisected."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.maximum_retry_attempts == 10
    error_message = "Retries must be bounded (default 10), never -1."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.maximum_record_age_in_seconds == 86400
    error_message = "Record age must be bounded (default 86400 s), never -1."
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.destination_config[0].on_failure[0].destination_arn == aws_sqs_queue.on_failure.arn
    error_message = "Abandoned batches must be recorded on the module's on-failure queue."
  }

  assert {
    condition = (
      aws_lambda_event_source_mapping.publisher.batch_size == 100
      && aws_lambda_event_source_mapping.publisher.maximum_batching_window_in_seconds == 0
      && aws_lambda_event_source_mapping.publisher.parallelization_factor == 1
    )
    error_message = "Default batch size 100, no batching window, one batch per shard."
  }

  # was run "on_failure_queue_is_encrypted_and_keeps_14_days"
  assert {
    condition     = aws_sqs_queue.on_failure.name == "orders-outbox-publisher-on-failure"
    error_message = "The on-failure queue is named <name>-publisher-on-failure."
  }

  assert {
    condition     = aws_sqs_queue.on_failure.sqs_managed_sse_enabled == true && aws_sqs_queue.on_failure.kms_master_key_id == null
    error_message = "Without a KMS key the queue must use SSE-SQS."
  }

  assert {
    condition     = aws_sqs_queue.on_failure.message_retention_seconds == 1209600
    error_message = "The on-failure queue must keep messages 14 days."
  }

  # was run "table_has_stream_pitr_and_sse"
  assert {
    condition     = aws_dynamodb_table.this[0].name == "orders-outbox"
    error_message = "The table is named after var.name by default."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].stream_enabled && aws_dynamodb_table.this[0].stream_view_type == "NEW_IMAGE"
    error_message = "The table must have a stream with NEW_IMAGE."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].point_in_time_recovery[0].enabled
    error_message = "Point-in-time recovery must be on."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].server_side_encryption[0].enabled
    error_message = "Server-side encryption must be on (with the AWS managed key when no kms_key_arn is given)."
  }

  assert {
    condition = (
      aws_dynamodb_table.this[0].hash_key == "PK" && aws_dynamodb_table.this[0].range_key == "SK"
      && aws_dynamodb_table.this[0].attribute == toset([{ name = "PK", type = "S" }, { name = "SK", type = "S" }, { name = "outbox_pending_shard", type = "S" }])
    )
    error_message = "The table's keys must be PK and SK, both strings (plus the pending index's string key outbox_pending_shard)."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].billing_mode == "PAY_PER_REQUEST"
    error_message = "Billing defaults to PAY_PER_REQUEST."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].ttl[0].enabled && aws_dynamodb_table.this[0].ttl[0].attribute_name == "expires_at"
    error_message = "TTL defaults to the expires_at attribute."
  }

  assert {
    condition     = aws_dynamodb_table.this[0].deletion_protection_enabled == true
    error_message = "Deletion protection defaults to on."
  }

  # was run "bus_is_created_with_the_outbox_name"
  assert {
    condition     = aws_cloudwatch_event_bus.this[0].name == "orders-outbox" && length(data.aws_cloudwatch_event_bus.existing) == 0
    error_message = "The bus is created and named after var.name by default."
  }

  # was run "publisher_function_is_configured"
  assert {
    condition     = aws_lambda_function.publisher.function_name == "orders-outbox-publisher"
    error_message = "The publisher is named <name>-publisher."
  }

  assert {
    condition     = aws_lambda_function.publisher.handler == "dynamodb_outbox.publisher.handler"
    error_message = "The handler must be dynamodb_outbox.publisher.handler."
  }

  assert {
    condition     = endswith(aws_lambda_function.publisher.filename, "package/dynamodb_outbox.zip") && aws_lambda_function.publisher.source_code_hash == filebase64sha256("package/dynamodb_outbox.zip")
    error_message = "The function deploys the committed package/dynamodb_outbox.zip and tracks its hash."
  }

  assert {
    condition     = aws_lambda_function.publisher.runtime == "python3.13" && aws_lambda_function.publisher.architectures == tolist(["arm64"])
    error_message = "Default runtime python3.13 on arm64."
  }

  assert {
    condition     = aws_lambda_function.publisher.memory_size == 256 && aws_lambda_function.publisher.timeout == 60
    error_message = "Default memory 256 MB and timeout 60 s."
  }

  assert {
    condition = aws_lambda_function.publisher.environment[0].variables == tomap({
      OUTBOX_TABLE_NAME            = "orders-outbox"
      OUTBOX_PARTITION_KEY         = "PK"
      OUTBOX_SORT_KEY              = "SK"
      OUTBOX_PUBLISH_TO            = "eventbridge"
      OUTBOX_EVENT_BUS_NAME        = "orders-outbox"
      OUTBOX_SWEEPER_ENABLED       = "true"
      POWERTOOLS_SERVICE_NAME      = "orders-outbox"
      POWERTOOLS_METRICS_NAMESPACE = "DynamoDBOutbox"
      LOG_LEVEL                    = "INFO"
    })
    error_message = "The publisher's environment must name the table and its keys, the transport (eventbridge) and the bus, whether a sweeper runs, and configure Powertools."
  }

  assert {
    condition     = aws_lambda_function.publisher.layers == tolist(["arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:40"])
    error_message = "By default the publisher gets the public Powertools v3 layer SSM names for its region, runtime and architecture (the mock's value)."
  }

  # was run "log_group_exists_before_the_function"
  assert {
    condition     = aws_cloudwatch_log_group.publisher.name == "/aws/lambda/${aws_lambda_function.publisher.function_name}"
    error_message = "The module owns the function's log group /aws/lambda/<function name>."
  }

  assert {
    condition     = aws_cloudwatch_log_group.publisher.retention_in_days == 30 && aws_cloudwatch_log_group.publisher.kms_key_id == null
    error_message = "Default retention 30 days, no customer key."
  }

  # was run "publisher_iam_is_scoped_to_exact_arns"
  assert {
    condition     = aws_iam_role.publisher.name == "orders-outbox-publisher" && aws_lambda_function.publisher.role == aws_iam_role.publisher.arn
    error_message = "The publisher has its own role."
  }

  assert {
    condition     = alltrue([for s in data.aws_iam_policy_document.publisher.statement : !contains(s.resources, "*")])
    error_message = "No statement of the publisher policy may use the \"*\" resource."
  }

  assert {
    condition     = alltrue(flatten([for s in data.aws_iam_policy_document.publisher.statement : [for a in s.actions : !strcontains(a, "*")]]))
    error_message = "No statement of the publisher policy may use a wildcard action."
  }

  assert {
    condition = { for s in data.aws_iam_policy_document.publisher.statement : s.sid => s.resources } == {
      ReadOutboxStream       = toset([aws_dynamodb_table.this[0].stream_arn])
      DeletePublishedItems   = toset([aws_dynamodb_table.this[0].arn])
      QuarantinePoisonItems  = toset([aws_dynamodb_table.this[0].arn])
      PublishEvents          = toset([aws_cloudwatch_event_bus.this[0].arn])
      SendFailedBatchRecords = toset([aws_sqs_queue.on_failure.arn])
      WriteOwnLogs           = toset(["${aws_cloudwatch_log_group.publisher.arn}:*"])
    }
    error_message = "Each statement must be scoped to the stream, the table, the bus, the queue and the log group it needs (and no KMS statement without a key)."
  }

  assert {
    condition = { for s in data.aws_iam_policy_document.publisher.statement : s.sid => s.actions } == {
      ReadOutboxStream       = toset(["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"])
      DeletePublishedItems   = toset(["dynamodb:BatchWriteItem"])
      QuarantinePoisonItems  = toset(["dynamodb:UpdateItem"])
      PublishEvents          = toset(["events:PutEvents"])
      SendFailedBatchRecords = toset(["sqs:SendMessage"])
      WriteOwnLogs           = toset(["logs:CreateLogStream", "logs:PutLogEvents"])
    }
    error_message = "The publisher policy must grant exactly the actions the stream mapping and the handler need (no cloudwatch:PutMetricData)."
  }

  # BatchWriteItem also authorises PutRequest and UpdateItem any attribute:
  # the conditions keep them to what the handler writes (AWS's "access to
  # specific attributes" example). tests/functional/test_settle_requests_match_policy.py
  # holds the handler's requests to these lists.
  assert {
    condition = {
      for s in data.aws_iam_policy_document.publisher.statement : s.sid => {
        for c in s.condition : "${c.test} ${c.variable}" => toset(c.values)
      } if length(s.condition) > 0
      } == {
      DeletePublishedItems = {
        "ForAllValues:StringEquals dynamodb:Attributes" = toset(["PK", "SK"])
      }
      QuarantinePoisonItems = {
        "ForAllValues:StringEquals dynamodb:Attributes" = toset(["PK", "SK", "outbox_status", "quarantine_reason", "quarantined_at", "outbox_pending_shard"])
        "StringEqualsIfExists dynamodb:ReturnValues"    = toset(["NONE"])
      }
    }
    error_message = "The publisher's deletes may carry the key attributes only; its updates the key and the quarantine attributes, with no ReturnValues that reads the item back."
  }

  assert {
    condition     = aws_iam_role_policy.publisher.role == aws_iam_role.publisher.id && aws_iam_role.publisher.permissions_boundary == null
    error_message = "The policy is attached to the publisher role; no permissions boundary by default."
  }

  # was run "tags_reach_every_taggable_resource"
  assert {
    condition = alltrue([
      aws_dynamodb_table.this[0].tags == var.tags,
      aws_cloudwatch_event_bus.this[0].tags == var.tags,
      aws_sqs_queue.on_failure.tags == var.tags,
      aws_cloudwatch_log_group.publisher.tags == var.tags,
      aws_iam_role.publisher.tags == var.tags,
      aws_lambda_function.publisher.tags == var.tags,
      aws_lambda_event_source_mapping.publisher.tags == var.tags,
    ])
    error_message = "var.tags must be set on every taggable resource."
  }

  # was run "outputs_describe_the_stack"
  assert {
    condition = alltrue([
      output.table_name == "orders-outbox",
      output.table_arn == aws_dynamodb_table.this[0].arn,
      output.table_stream_arn == aws_dynamodb_table.this[0].stream_arn,
      output.event_bus_name == "orders-outbox",
      output.event_bus_arn == aws_cloudwatch_event_bus.this[0].arn,
      output.publisher_function_name == "orders-outbox-publisher",
      output.publisher_function_arn == aws_lambda_function.publisher.arn,
      output.publisher_role_arn == aws_iam_role.publisher.arn,
      output.stream_mapping_uuid == aws_lambda_event_source_mapping.publisher.uuid,
      output.on_failure_queue_url == aws_sqs_queue.on_failure.url,
      output.on_failure_queue_arn == aws_sqs_queue.on_failure.arn,
      output.log_group_name == "/aws/lambda/orders-outbox-publisher",
    ])
    error_message = "The outputs must describe the created stack."
  }

  # was run "outputs_name_the_publisher_log_group_and_the_powertools_layer"
  assert {
    condition     = output.publisher_log_group_name == "/aws/lambda/orders-outbox-publisher" && output.log_group_name == output.publisher_log_group_name
    error_message = "publisher_log_group_name is the publisher's log group; log_group_name, deprecated, the same value."
  }

  assert {
    condition     = output.powertools_layer_arn == one([for arn in aws_lambda_function.publisher.layers : arn if strcontains(arn, "Powertools")])
    error_message = "powertools_layer_arn must be the Powertools layer the functions run with."
  }
}

run "longest_name_keeps_derived_names_within_aws_limits" {
  command = plan

  variables {
    name = "a234567890123456789012345678901234567890"
  }

  # The bus's and its DLQ's ARNs for this name (their policy is built from names).
  override_resource {
    target          = aws_cloudwatch_event_bus.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:events:eu-west-1:111122223333:event-bus/a234567890123456789012345678901234567890"
    }
  }

  override_resource {
    target          = aws_sqs_queue.event_bus_dlq[0]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-event-bus-dlq"
    }
  }

  assert {
    condition = alltrue([
      length(aws_lambda_function.publisher.function_name) <= 64,
      length(aws_iam_role.publisher.name) <= 64,
      length(aws_iam_role_policy.publisher.name) <= 128,
      length(aws_sqs_queue.on_failure.name) <= 80,
      length(aws_cloudwatch_log_group.publisher.name) <= 512,
      length(aws_dynamodb_table.this[0].name) <= 255,
      length(aws_cloudwatch_event_bus.this[0].name) <= 256,
    ])
    error_message = "A 40-character name must keep every derived name within its AWS limit."
  }
}

run "no_powertools_layer_output_without_a_layer" {
  command = plan

  variables {
    powertools_layer_arn = ""
  }

  assert {
    condition     = output.powertools_layer_arn == null && length(aws_lambda_function.publisher.layers) == 0
    error_message = "Without a Powertools layer the output is null, not \"\"."
  }
}
