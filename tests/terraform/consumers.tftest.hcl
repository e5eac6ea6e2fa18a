# Consumers: queue + DLQ + delivery (rule or subscription) + mapping + function,
# the idempotency table, the SNS variant, the layer, and every consumer validation.
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

# Exact, distinct ARNs for what the consumers refer to, so assertions can tell
# the queues apart and the module's ARN postconditions (queue and table ARNs are
# built from names, see consumers.tf) hold.
override_resource {
  target          = aws_sqs_queue.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-billing-consumer-dlq"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-audit-consumer-dlq"
  }
}

override_resource {
  target          = aws_dynamodb_table.idempotency[0]
  override_during = plan
  values = {
    arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
  }
}

override_resource {
  target          = aws_cloudwatch_event_rule.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_cloudwatch_event_rule.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sns_topic.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
  }
}

override_resource {
  target          = aws_sns_topic_subscription.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
  }
}

override_resource {
  target          = aws_lambda_function.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:lambda:eu-west-1:111122223333:function:orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_iam_role.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:iam::111122223333:role/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_lambda_layer_version.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:lambda:eu-west-1:111122223333:layer:orders-outbox-dynamodb-outbox:1"
  }
}

override_resource {
  target          = aws_lambda_event_source_mapping.consumer["billing"]
  override_during = plan
  values = {
    uuid = "b1111111-2222-3333-4444-555555555555"
  }
}

# billing: the caller's own function (with its role's name); audit: the module's
# reference consumer.
variables {
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
  tags = {
    Team = "orders"
  }
  consumers = {
    billing = {
      event_pattern = "{\"detail-type\":[\"OrderCreated\"]}"
      function = {
        arn       = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
        role_name = "billing-role"
      }
      function_timeout_seconds = 20
    }
    audit = {
      event_pattern = "{\"source\":[\"orders\"]}"
    }
  }
}

################################################################################
# The file's consumers: queues, delivery, mappings, functions, IAM, outputs
################################################################################

# The file's two consumers on EventBridge: one plan serves every block of
# asserts below, whatever section it covers; each block was a run of its own
# (named in its comment).
run "billing_and_audit_consumers_on_eventbridge" {
  command = plan

  # was run "each_consumer_gets_a_queue_and_a_dlq_with_redrive_after_5_receives"
  assert {
    condition = (
      aws_sqs_queue.consumer["billing"].name == "orders-outbox-billing-consumer"
      && aws_sqs_queue.consumer_dlq["billing"].name == "orders-outbox-billing-consumer-dlq"
      && aws_sqs_queue.consumer["audit"].name == "orders-outbox-audit-consumer"
      && aws_sqs_queue.consumer_dlq["audit"].name == "orders-outbox-audit-consumer-dlq"
    )
    error_message = "Each consumer gets a queue <name>-<key>-consumer and a DLQ <name>-<key>-consumer-dlq."
  }

  assert {
    condition = alltrue([
      for queue in concat(values(aws_sqs_queue.consumer), values(aws_sqs_queue.consumer_dlq), aws_sqs_queue.event_bus_dlq) :
      queue.max_message_size == 262144
    ])
    error_message = "Every queue an event can end in takes 262,144-byte messages, the size the writer's budget is derived from (dynamodb_outbox.sizes, docs/seams.md)."
  }

  assert {
    condition = jsondecode(aws_sqs_queue.consumer["billing"].redrive_policy) == {
      deadLetterTargetArn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
      maxReceiveCount     = 5
    }
    error_message = "The queue must redrive to its own DLQ after 5 receives by default."
  }

  assert {
    condition = jsondecode(aws_sqs_queue.consumer_dlq["billing"].redrive_allow_policy) == {
      redrivePermission = "byQueue"
      sourceQueueArns   = ["arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"]
    }
    error_message = "Only the consumer's own queue may use the DLQ (redrive-allow byQueue)."
  }

  assert {
    condition = alltrue(flatten([
      for q in [aws_sqs_queue.consumer, aws_sqs_queue.consumer_dlq] : [
        for k in ["billing", "audit"] : q[k].sqs_managed_sse_enabled == true && q[k].kms_master_key_id == null
      ]
    ]))
    error_message = "Without a KMS key every consumer queue and DLQ must use SSE-SQS (the aws/sqs managed key cannot be used by EventBridge)."
  }

  assert {
    condition     = aws_sqs_queue.consumer_dlq["billing"].message_retention_seconds == 1209600 && aws_sqs_queue.consumer["billing"].message_retention_seconds == 345600
    error_message = "DLQs keep messages 14 days; queues 4 days by default."
  }

  # was run "visibility_timeout_is_six_times_the_function_timeout"
  assert {
    condition     = aws_sqs_queue.consumer["billing"].visibility_timeout_seconds == 120
    error_message = "A caller's function with a 20 s timeout needs a 120 s visibility timeout (6 x)."
  }

  assert {
    condition     = aws_sqs_queue.consumer["audit"].visibility_timeout_seconds == 6 * aws_lambda_function.consumer["audit"].timeout && aws_lambda_function.consumer["audit"].timeout == 30
    error_message = "The module's function (30 s by default) gets a visibility timeout of 6 x its timeout."
  }

  # was run "rule_carries_the_consumer_pattern_on_the_module_bus"
  assert {
    condition = (
      aws_cloudwatch_event_rule.consumer["billing"].name == "orders-outbox-billing-consumer"
      && aws_cloudwatch_event_rule.consumer["billing"].event_bus_name == aws_cloudwatch_event_bus.this[0].name
      && aws_cloudwatch_event_rule.consumer["billing"].event_pattern == "{\"detail-type\":[\"OrderCreated\"]}"
      && aws_cloudwatch_event_rule.consumer["audit"].event_pattern == "{\"source\":[\"orders\"]}"
    )
    error_message = "Each consumer's rule must be on the module's bus with the consumer's event pattern."
  }

  assert {
    condition     = length(aws_sns_topic.this) == 0 && length(aws_sns_topic_subscription.consumer) == 0
    error_message = "No SNS topic or subscription with publish_to = eventbridge."
  }

  # was run "target_sends_to_the_queue_with_retry_policy_and_dlq_and_no_role"
  assert {
    condition = (
      aws_cloudwatch_event_target.consumer["billing"].rule == aws_cloudwatch_event_rule.consumer["billing"].name
      && aws_cloudwatch_event_target.consumer["billing"].event_bus_name == aws_cloudwatch_event_bus.this[0].name
      && aws_cloudwatch_event_target.consumer["billing"].arn == aws_sqs_queue.consumer["billing"].arn
    )
    error_message = "The rule's target must be the consumer's queue."
  }

  assert {
    condition     = aws_cloudwatch_event_target.consumer["billing"].dead_letter_config[0].arn == aws_sqs_queue.consumer_dlq["billing"].arn
    error_message = "Undeliverable events must go to the consumer's DLQ (the target's dead-letter queue)."
  }

  assert {
    condition = (
      aws_cloudwatch_event_target.consumer["billing"].retry_policy[0].maximum_event_age_in_seconds == 86400
      && aws_cloudwatch_event_target.consumer["billing"].retry_policy[0].maximum_retry_attempts == 185
    )
    error_message = "Default retry policy: 24 h, 185 attempts."
  }

  assert {
    condition     = aws_cloudwatch_event_target.consumer["billing"].role_arn == null
    error_message = "SQS targets take no role: the queue policy authorises EventBridge."
  }

  # was run "queue_policies_allow_only_the_rule_to_send"
  assert {
    condition = alltrue(flatten([
      for k in ["billing", "audit"] : [
        for doc in [data.aws_iam_policy_document.consumer_queue[k], data.aws_iam_policy_document.consumer_dlq[k]] : [
          for s in doc.statement : (
            s.actions == toset(["sqs:SendMessage"])
            && one(s.principals).type == "Service"
            && toset(one(s.principals).identifiers) == toset(["events.amazonaws.com"])
            && one(s.condition).test == "ArnEquals"
            && one(s.condition).variable == "aws:SourceArn"
            && toset(one(s.condition).values) == toset([aws_cloudwatch_event_rule.consumer[k].arn])
          ) if s.sid != "NoOtherSender"
        ]
      ]
    ]))
    error_message = "The queue and DLQ policies must allow only events.amazonaws.com to SendMessage, with aws:SourceArn = the consumer's rule (their Deny: trust_boundaries.tftest.hcl)."
  }

  assert {
    condition = (
      alltrue([for s in data.aws_iam_policy_document.consumer_queue["billing"].statement : s.resources == toset([aws_sqs_queue.consumer["billing"].arn])])
      && alltrue([for s in data.aws_iam_policy_document.consumer_dlq["billing"].statement : s.resources == toset([aws_sqs_queue.consumer_dlq["billing"].arn])])
    )
    error_message = "Each policy must name its own queue."
  }

  assert {
    condition = (
      aws_sqs_queue.consumer["billing"].policy == data.aws_iam_policy_document.consumer_queue["billing"].json
      && aws_sqs_queue.consumer_dlq["billing"].policy == data.aws_iam_policy_document.consumer_dlq["billing"].json
    )
    error_message = "The policies must be set on the queues."
  }

  # was run "mapping_reports_batch_item_failures_with_default_batching"
  assert {
    condition = alltrue([
      for k in ["billing", "audit"] : (
        aws_lambda_event_source_mapping.consumer[k].event_source_arn == aws_sqs_queue.consumer[k].arn
        && toset(aws_lambda_event_source_mapping.consumer[k].function_response_types) == toset(["ReportBatchItemFailures"])
        && aws_lambda_event_source_mapping.consumer[k].batch_size == 10
        && aws_lambda_event_source_mapping.consumer[k].maximum_batching_window_in_seconds == 0
        && length(aws_lambda_event_source_mapping.consumer[k].scaling_config) == 0
      )
    ])
    error_message = "Each queue's mapping must report partial batch failures, with batch size 10, no window and no concurrency limit by default."
  }

  assert {
    condition = (
      aws_lambda_event_source_mapping.consumer["billing"].function_name == "arn:aws:lambda:eu-west-1:111122223333:function:billing"
      && aws_lambda_event_source_mapping.consumer["audit"].function_name == aws_lambda_function.consumer["audit"].arn
    )
    error_message = "The mapping must invoke the caller's function, or the module's reference consumer."
  }

  # was run "reference_consumer_runs_the_bundled_handler"
  assert {
    condition = (
      aws_lambda_function.consumer["audit"].function_name == "orders-outbox-audit-consumer"
      && aws_lambda_function.consumer["audit"].handler == "dynamodb_outbox.reference_consumer.handler"
      && endswith(aws_lambda_function.consumer["audit"].filename, "package/dynamodb_outbox.zip")
      && aws_lambda_function.consumer["audit"].source_code_hash == filebase64sha256("package/dynamodb_outbox.zip")
    )
    error_message = "The reference consumer deploys the module's package with the dynamodb_outbox.reference_consumer.handler entry point."
  }

  assert {
    condition = (
      aws_lambda_function.consumer["audit"].runtime == aws_lambda_function.publisher.runtime
      && aws_lambda_function.consumer["audit"].architectures == aws_lambda_function.publisher.architectures
      && aws_lambda_function.consumer["audit"].layers == tolist(["arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:40"])
      && aws_lambda_function.consumer["audit"].memory_size == 256
    )
    error_message = "The reference consumer uses the publisher's runtime, architecture and Powertools layer, 256 MB by default."
  }

  assert {
    condition = aws_lambda_function.consumer["audit"].environment[0].variables == tomap({
      OUTBOX_IDEMPOTENCY_TABLE                 = "orders-outbox-idempotency"
      OUTBOX_CONSUMER_NAME                     = "audit"
      OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS = "1728000"
      POWERTOOLS_SERVICE_NAME                  = "orders-outbox-audit"
      POWERTOOLS_METRICS_NAMESPACE             = "DynamoDBOutbox"
      OUTBOX_CONSUMER_TRANSPORT                = "eventbridge"
      OUTBOX_CONSUMER_EVENT_BUS_ARN            = "arn:aws:events:eu-west-1:111122223333:event-bus/orders-outbox"
    })
    error_message = "The reference consumer's environment must name the idempotency table and the consumer (its key), the bus its messages must come from, and configure Powertools."
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.consumer["audit"].name == "/aws/lambda/orders-outbox-audit-consumer"
      && aws_cloudwatch_log_group.consumer["audit"].retention_in_days == 30
    )
    error_message = "The module owns the reference consumer's log group, with the module's retention."
  }

  assert {
    condition = (
      aws_iam_role.consumer["audit"].name == "orders-outbox-audit-consumer"
      && aws_lambda_function.consumer["audit"].role == aws_iam_role.consumer["audit"].arn
      && aws_iam_role_policy.consumer["audit"].role == aws_iam_role.consumer["audit"].id
      && aws_iam_role_policy.consumer["audit"].name == "orders-outbox-audit-consumer"
      && data.aws_iam_policy_document.consumer_function["audit"].source_policy_documents == tolist([data.aws_iam_policy_document.consumer["audit"].json])
    )
    error_message = "The reference consumer has its own role with the consumer policy plus its log group."
  }

  # was run "reference_consumer_iam_is_scoped_to_its_queue_records_and_logs"
  assert {
    condition = merge(
      { for s in data.aws_iam_policy_document.consumer["audit"].statement : s.sid => s.resources },
      { for s in data.aws_iam_policy_document.consumer_function["audit"].statement : s.sid => s.resources },
      ) == {
      ConsumeQueue           = toset(["arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"])
      KeepIdempotencyRecords = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"])
      WriteOwnLogs           = toset(["arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer:*"])
    }
    error_message = "The reference consumer's statements must be scoped to its queue, the idempotency table and its log group (no KMS statement without a key)."
  }

  assert {
    condition = merge(
      { for s in data.aws_iam_policy_document.consumer["audit"].statement : s.sid => s.actions },
      { for s in data.aws_iam_policy_document.consumer_function["audit"].statement : s.sid => s.actions },
      ) == {
      ConsumeQueue           = toset(["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"])
      KeepIdempotencyRecords = toset(["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"])
      WriteOwnLogs           = toset(["logs:CreateLogStream", "logs:PutLogEvents"])
    }
    error_message = "The reference consumer must get exactly the actions the mapping and the toolkit need."
  }

  assert {
    condition = (
      one(one([for s in data.aws_iam_policy_document.consumer["audit"].statement : s.condition if s.sid == "KeepIdempotencyRecords"])).test == "ForAllValues:StringLike"
      && one(one([for s in data.aws_iam_policy_document.consumer["audit"].statement : s.condition if s.sid == "KeepIdempotencyRecords"])).variable == "dynamodb:LeadingKeys"
      && toset(one(one([for s in data.aws_iam_policy_document.consumer["audit"].statement : s.condition if s.sid == "KeepIdempotencyRecords"])).values) == toset(["idempotency#audit#*", "ledger#audit#*", "sequence#audit#*"])
    )
    error_message = "Idempotency access must be limited to the consumer's own key prefixes (dynamodb:LeadingKeys)."
  }

  # was run "caller_function_with_role_name_gets_an_inline_policy_and_nothing_else"
  assert {
    condition = (
      aws_iam_role_policy.consumer_caller_role["billing"].role == "billing-role"
      && aws_iam_role_policy.consumer_caller_role["billing"].name == "orders-outbox-billing-consumer"
      && aws_iam_role_policy.consumer_caller_role["billing"].policy == data.aws_iam_policy_document.consumer["billing"].json
    )
    error_message = "With function.role_name the module attaches the consumer policy to that role."
  }

  assert {
    condition = (
      keys(aws_lambda_function.consumer) == ["audit"]
      && keys(aws_iam_role.consumer) == ["audit"]
      && keys(aws_cloudwatch_log_group.consumer) == ["audit"]
      && keys(aws_iam_role_policy.consumer_caller_role) == ["billing"]
    )
    error_message = "The module creates a function, role and log group only for consumers without a function."
  }

  assert {
    condition = { for s in data.aws_iam_policy_document.consumer["billing"].statement : s.sid => s.resources } == {
      ConsumeQueue           = toset(["arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"])
      KeepIdempotencyRecords = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"])
    }
    error_message = "A caller's function gets its queue and the idempotency table (uses_toolkit defaults to true), no log statement."
  }

  assert {
    condition = (
      output.consumers["billing"].required_policy_json == data.aws_iam_policy_document.consumer["billing"].json
      && output.consumers["billing"].role_arn == null
      && output.consumers["billing"].log_group_name == null
      && output.consumers["billing"].function_name == "billing"
      && output.consumers["billing"].function_arn == "arn:aws:lambda:eu-west-1:111122223333:function:billing"
    )
    error_message = "The outputs give a caller's function its required policy, its name and no module role."
  }

  # was run "idempotency_table_keys_on_id_with_ttl_pitr_and_sse"
  assert {
    condition = (
      aws_dynamodb_table.idempotency[0].name == "orders-outbox-idempotency"
      && aws_dynamodb_table.idempotency[0].hash_key == "id"
      && aws_dynamodb_table.idempotency[0].range_key == null
      && aws_dynamodb_table.idempotency[0].attribute == toset([{ name = "id", type = "S" }])
      && aws_dynamodb_table.idempotency[0].billing_mode == "PAY_PER_REQUEST"
    )
    error_message = "The idempotency table is keyed by id (string), on demand."
  }

  assert {
    condition     = aws_dynamodb_table.idempotency[0].ttl[0].enabled && aws_dynamodb_table.idempotency[0].ttl[0].attribute_name == "expiration"
    error_message = "Expired idempotency records must be removed by TTL on `expiration`."
  }

  assert {
    condition = (
      aws_dynamodb_table.idempotency[0].point_in_time_recovery[0].enabled
      && aws_dynamodb_table.idempotency[0].server_side_encryption[0].enabled
    )
    error_message = "PITR and SSE must be on."
  }

  assert {
    condition     = aws_dynamodb_table.idempotency[0].deletion_protection_enabled == false && aws_dynamodb_table.this[0].deletion_protection_enabled == true
    error_message = "The idempotency table's deletion protection is its own setting, off by default, whatever the outbox table's (on by default)."
  }

  assert {
    condition     = output.idempotency_table_name == "orders-outbox-idempotency" && output.idempotency_table_arn == aws_dynamodb_table.idempotency[0].arn
    error_message = "The idempotency table outputs must describe it."
  }

  # was run "outputs_describe_each_consumer"
  assert {
    condition = output.consumers["audit"] == {
      queue_url                         = aws_sqs_queue.consumer["audit"].url
      queue_arn                         = aws_sqs_queue.consumer["audit"].arn
      dlq_url                           = aws_sqs_queue.consumer_dlq["audit"].url
      dlq_arn                           = aws_sqs_queue.consumer_dlq["audit"].arn
      rule_arn                          = aws_cloudwatch_event_rule.consumer["audit"].arn
      subscription_arn                  = null
      event_source_mapping_uuid         = aws_lambda_event_source_mapping.consumer["audit"].uuid
      function_name                     = "orders-outbox-audit-consumer"
      function_arn                      = aws_lambda_function.consumer["audit"].arn
      role_arn                          = aws_iam_role.consumer["audit"].arn
      log_group_name                    = "/aws/lambda/orders-outbox-audit-consumer"
      consumer_name                     = "audit"
      idempotency_expires_after_seconds = 1728000
      environment = {
        OUTBOX_CONSUMER_NAME                     = "audit"
        OUTBOX_IDEMPOTENCY_TABLE                 = "orders-outbox-idempotency"
        OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS = "1728000"
        OUTBOX_CONSUMER_TRANSPORT                = "eventbridge"
        OUTBOX_CONSUMER_EVENT_BUS_ARN            = output.consumer_environment.OUTBOX_CONSUMER_EVENT_BUS_ARN
      }
      required_policy_json = data.aws_iam_policy_document.consumer["audit"].json
    }
    error_message = "The consumers output must describe the reference consumer's resources."
  }

  assert {
    condition     = output.consumers["billing"].event_source_mapping_uuid == "b1111111-2222-3333-4444-555555555555"
    error_message = "The consumers output must give each consumer's mapping."
  }

  # was run "tags_reach_every_taggable_consumer_resource"
  assert {
    condition = alltrue([
      aws_sqs_queue.consumer["audit"].tags == var.tags,
      aws_sqs_queue.consumer_dlq["audit"].tags == var.tags,
      aws_cloudwatch_event_rule.consumer["audit"].tags == var.tags,
      aws_dynamodb_table.idempotency[0].tags == var.tags,
      aws_cloudwatch_log_group.consumer["audit"].tags == var.tags,
      aws_iam_role.consumer["audit"].tags == var.tags,
      aws_lambda_function.consumer["audit"].tags == var.tags,
      aws_lambda_event_source_mapping.consumer["audit"].tags == var.tags,
      aws_lambda_event_source_mapping.consumer["billing"].tags == var.tags,
    ])
    error_message = "var.tags must be set on every taggable consumer resource."
  }

  # was run "tracing_defaults_to_pass_through_and_grants_no_xray_permission"
  assert {
    condition = (
      aws_lambda_function.publisher.tracing_config[0].mode == "PassThrough"
      && aws_lambda_function.sweeper[0].tracing_config[0].mode == "PassThrough"
      && aws_lambda_function.consumer["audit"].tracing_config[0].mode == "PassThrough"
    )
    error_message = "By default the module's functions must run in PassThrough (Lambda's own default)."
  }

  assert {
    condition = length(flatten([
      for statements in [
        data.aws_iam_policy_document.publisher.statement,
        data.aws_iam_policy_document.sweeper[0].statement,
        data.aws_iam_policy_document.consumer_function["audit"].statement,
      ] : [for s in statements : s.actions if length([for a in s.actions : a if startswith(a, "xray:")]) > 0]
    ])) == 0
    error_message = "Without active tracing no role may be granted an X-Ray action."
  }
}

################################################################################
# Tuned consumer settings
################################################################################

run "tuned_consumer_settings_reach_queue_mapping_and_target" {
  command = plan

  variables {
    consumers = {
      audit = {
        event_pattern                      = "{\"source\":[\"orders\"]}"
        function_timeout_seconds           = 60
        function_memory_size_mb            = 512
        visibility_timeout_seconds         = 900
        message_retention_seconds          = 1209600
        max_receive_count                  = 10
        batch_size                         = 100
        maximum_batching_window_in_seconds = 5
        maximum_concurrency                = 50
        maximum_event_age_in_seconds       = 3600
        maximum_retry_attempts             = 20
      }
    }
  }

  assert {
    condition = (
      aws_sqs_queue.consumer["audit"].visibility_timeout_seconds == 900
      && aws_sqs_queue.consumer["audit"].message_retention_seconds == 1209600
      && jsondecode(aws_sqs_queue.consumer["audit"].redrive_policy).maxReceiveCount == 10
    )
    error_message = "visibility_timeout_seconds, message_retention_seconds and max_receive_count must reach the queue."
  }

  assert {
    condition = (
      aws_lambda_event_source_mapping.consumer["audit"].batch_size == 100
      && aws_lambda_event_source_mapping.consumer["audit"].maximum_batching_window_in_seconds == 5
      && aws_lambda_event_source_mapping.consumer["audit"].scaling_config[0].maximum_concurrency == 50
    )
    error_message = "batch_size, the batching window and maximum_concurrency must reach the mapping."
  }

  assert {
    condition = (
      aws_cloudwatch_event_target.consumer["audit"].retry_policy[0].maximum_event_age_in_seconds == 3600
      && aws_cloudwatch_event_target.consumer["audit"].retry_policy[0].maximum_retry_attempts == 20
    )
    error_message = "The retry policy inputs must reach the target."
  }

  assert {
    condition = (
      aws_lambda_function.consumer["audit"].timeout == 60
      && aws_lambda_function.consumer["audit"].memory_size == 512
      && aws_lambda_function.consumer["audit"].environment[0].variables["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == "2509200"
    )
    error_message = "Timeout and memory reach the function; idempotency records outlive every copy (modules/windows): stream 86400 + event age 3600 + DLQ 1209600 + the queue's 1209600 after a redrive."
  }
}

################################################################################
# Caller functions
################################################################################

run "caller_function_without_role_or_toolkit_gets_no_policy_and_no_table" {
  command = plan

  variables {
    consumers = {
      billing = {
        event_pattern = "{\"detail-type\":[\"OrderCreated\"]}"
        function = {
          arn          = "arn:aws:lambda:eu-west-1:111122223333:function:billing:live"
          uses_toolkit = false
        }
      }
    }
  }

  assert {
    condition     = length(aws_iam_role_policy.consumer_caller_role) == 0
    error_message = "Without function.role_name the module cannot attach a policy."
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.consumer["billing"].statement : s.sid] == ["ConsumeQueue"]
    error_message = "Without the toolkit the function needs only its queue."
  }

  assert {
    condition     = length(aws_dynamodb_table.idempotency) == 0 && output.idempotency_table_name == null && output.idempotency_table_arn == null
    error_message = "No idempotency table when no consumer uses the toolkit."
  }

  assert {
    condition     = output.consumers["billing"].function_name == "billing" && aws_lambda_event_source_mapping.consumer["billing"].function_name == "arn:aws:lambda:eu-west-1:111122223333:function:billing:live"
    error_message = "An alias ARN is accepted: the mapping invokes it, the output names the function."
  }
}

################################################################################
# Idempotency table
################################################################################

# An existing outbox table: the module owns only the idempotency table, which
# must not block `terraform destroy` unless asked to.
run "idempotency_table_is_unprotected_by_default_beside_an_existing_table" {
  command = plan

  variables {
    table = { create = false, name = "orders" }
  }

  assert {
    condition     = aws_dynamodb_table.idempotency[0].deletion_protection_enabled == false
    error_message = "With an existing table, nothing the module creates may be deletion-protected by default."
  }
}

run "idempotency_table_protection_follows_its_own_setting" {
  command = plan

  variables {
    table             = { deletion_protection_enabled = false }
    idempotency_table = { deletion_protection_enabled = true }
  }

  assert {
    condition     = aws_dynamodb_table.idempotency[0].deletion_protection_enabled == true && aws_dynamodb_table.this[0].deletion_protection_enabled == false
    error_message = "idempotency_table.deletion_protection_enabled protects the idempotency table, independently of table.deletion_protection_enabled."
  }
}

run "customer_key_encrypts_consumer_queues_table_and_logs" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
  }

  assert {
    condition = alltrue(flatten([
      for q in [aws_sqs_queue.consumer, aws_sqs_queue.consumer_dlq] : [
        for k in ["billing", "audit"] : q[k].kms_master_key_id == var.kms_key_arn && q[k].sqs_managed_sse_enabled != true
      ]
    ]))
    error_message = "With a key every consumer queue and DLQ must be encrypted with it."
  }

  assert {
    condition = (
      aws_dynamodb_table.idempotency[0].server_side_encryption[0].kms_key_arn == var.kms_key_arn
      && aws_cloudwatch_log_group.consumer["audit"].kms_key_id == var.kms_key_arn
    )
    error_message = "The idempotency table and the consumer's log group must use the key."
  }

  assert {
    condition = (
      [for s in data.aws_iam_policy_document.consumer["billing"].statement : s.actions if s.sid == "DecryptQueueMessages"][0] == toset(["kms:Decrypt"])
      && [for s in data.aws_iam_policy_document.consumer["billing"].statement : s.resources if s.sid == "DecryptQueueMessages"][0] == toset([var.kms_key_arn])
    )
    error_message = "A consumer must be allowed to decrypt its queue's messages with exactly the key."
  }
}

################################################################################
# SNS variant
################################################################################

run "sns_replaces_the_bus_with_a_topic_and_subscriptions" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      billing = {
        filter_policy = "{\"event_type\":[\"OrderCreated\"]}"
        function = {
          arn       = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          role_name = "billing-role"
        }
      }
      audit = {
        filter_policy = "{\"source\":[\"orders\"]}"
      }
    }
  }

  assert {
    condition = (
      aws_sns_topic.this[0].name == "orders-outbox"
      && aws_sns_topic.this[0].kms_master_key_id == "alias/aws/sns"
      && aws_sns_topic.this[0].tags == var.tags
    )
    error_message = "The topic is named after var.name and encrypted with the AWS managed SNS key without a customer key."
  }

  assert {
    condition = (
      length(aws_cloudwatch_event_bus.this) == 0 && length(data.aws_cloudwatch_event_bus.existing) == 0
      && length(aws_cloudwatch_event_rule.consumer) == 0 && length(aws_cloudwatch_event_target.consumer) == 0
      && length(aws_cloudwatch_event_archive.this) == 0 && output.event_archive_name == null
      && output.event_bus_name == null && output.event_bus_arn == null
      && output.sns_topic_arn == aws_sns_topic.this[0].arn
    )
    error_message = "With publish_to = sns no bus is created or read, and no rules or archive."
  }

  assert {
    condition = alltrue([
      for k in ["billing", "audit"] : (
        aws_sns_topic_subscription.consumer[k].topic_arn == aws_sns_topic.this[0].arn
        && aws_sns_topic_subscription.consumer[k].protocol == "sqs"
        && aws_sns_topic_subscription.consumer[k].endpoint == aws_sqs_queue.consumer[k].arn
        && aws_sns_topic_subscription.consumer[k].raw_message_delivery == true
        && aws_sns_topic_subscription.consumer[k].filter_policy_scope == "MessageAttributes"
        && jsondecode(aws_sns_topic_subscription.consumer[k].redrive_policy) == { deadLetterTargetArn = aws_sqs_queue.consumer_dlq[k].arn }
      )
    ])
    error_message = "Each queue subscribes with raw delivery, a filter on message attributes, and its DLQ for undeliverable messages."
  }

  assert {
    condition     = aws_sns_topic_subscription.consumer["billing"].filter_policy == "{\"event_type\":[\"OrderCreated\"]}"
    error_message = "The consumer's filter policy must reach its subscription."
  }

  assert {
    condition = alltrue(flatten([
      for k in ["billing", "audit"] : [
        for doc in [data.aws_iam_policy_document.consumer_queue[k], data.aws_iam_policy_document.consumer_dlq[k]] : [
          for s in doc.statement : (
            s.actions == toset(["sqs:SendMessage"])
            && toset(one(s.principals).identifiers) == toset(["sns.amazonaws.com"])
            && one(s.condition).variable == "aws:SourceArn"
            && toset(one(s.condition).values) == toset([aws_sns_topic.this[0].arn])
          ) if s.sid != "NoOtherSender"
        ]
      ]
    ]))
    error_message = "The queue and DLQ policies must allow only sns.amazonaws.com, with aws:SourceArn = the topic."
  }

  assert {
    condition = aws_lambda_function.publisher.environment[0].variables == tomap({
      OUTBOX_TABLE_NAME            = "orders-outbox"
      OUTBOX_PARTITION_KEY         = "PK"
      OUTBOX_SORT_KEY              = "SK"
      OUTBOX_PUBLISH_TO            = "sns"
      OUTBOX_TOPIC_ARN             = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
      OUTBOX_SWEEPER_ENABLED       = "true"
      POWERTOOLS_SERVICE_NAME      = "orders-outbox"
      POWERTOOLS_METRICS_NAMESPACE = "DynamoDBOutbox"
      LOG_LEVEL                    = "INFO"
    })
    error_message = "The publisher must be told to publish to the topic (and given no bus)."
  }

  assert {
    condition = (
      [for s in data.aws_iam_policy_document.publisher.statement : s.actions if s.sid == "PublishEvents"][0] == toset(["sns:Publish"])
      && [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "PublishEvents"][0] == toset([aws_sns_topic.this[0].arn])
      && alltrue(flatten([for s in data.aws_iam_policy_document.publisher.statement : [for a in s.actions : !startswith(a, "events:")]]))
    )
    error_message = "The publisher must be allowed sns:Publish (which covers PublishBatch) on the topic, and nothing on EventBridge."
  }

  assert {
    condition     = output.consumers["billing"].subscription_arn == aws_sns_topic_subscription.consumer["billing"].arn && output.consumers["billing"].rule_arn == null
    error_message = "The consumers output gives the subscription instead of a rule."
  }
}

run "sns_topic_uses_the_customer_key" {
  command = plan

  variables {
    publish_to  = "sns"
    kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
    consumers   = {}
  }

  assert {
    condition     = aws_sns_topic.this[0].kms_master_key_id == var.kms_key_arn
    error_message = "With a customer key the topic must be encrypted with it."
  }
}

# The ordered path: FIFO topic, FIFO queues and DLQs, a FIFO-valid mapping.
run "sns_fifo_creates_a_fifo_topic_and_per_consumer_fifo_queue_and_dlq" {
  command = plan

  variables {
    publish_to = "sns_fifo"
    consumers = {
      billing = {
        filter_policy = "{\"event_type\":[\"OrderCreated\"]}"
        function = {
          arn       = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          role_name = "billing-role"
        }
      }
      audit = {
        filter_policy = "{\"source\":[\"orders\"]}"
      }
    }
  }

  # The ARNs the module builds from the FIFO names (postconditions compare them).
  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer["billing"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer_dlq["billing"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer["audit"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer.fifo" }
  }

  override_resource {
    target          = aws_sqs_queue.consumer_dlq["audit"]
    override_during = plan
    values          = { arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq.fifo" }
  }

  assert {
    condition = (
      aws_sns_topic.this[0].name == "orders-outbox.fifo"
      && aws_sns_topic.this[0].fifo_topic == true
      && aws_sns_topic.this[0].content_based_deduplication == false
    )
    error_message = "sns_fifo creates a FIFO topic <name>.fifo without content-based deduplication (the event id is the deduplication id)."
  }

  assert {
    condition = alltrue(flatten([
      for k in ["billing", "audit"] : [
        aws_sqs_queue.consumer[k].name == "orders-outbox-${k}-consumer.fifo",
        aws_sqs_queue.consumer_dlq[k].name == "orders-outbox-${k}-consumer-dlq.fifo",
        [for q in [aws_sqs_queue.consumer[k], aws_sqs_queue.consumer_dlq[k]] : q.fifo_queue == true && q.content_based_deduplication == false],
        jsondecode(aws_sqs_queue.consumer[k].redrive_policy).deadLetterTargetArn == aws_sqs_queue.consumer_dlq[k].arn,
        aws_sns_topic_subscription.consumer[k].endpoint == aws_sqs_queue.consumer[k].arn,
        aws_sns_topic_subscription.consumer[k].raw_message_delivery == true,
        jsondecode(aws_sns_topic_subscription.consumer[k].redrive_policy) == { deadLetterTargetArn = aws_sqs_queue.consumer_dlq[k].arn },
        aws_lambda_event_source_mapping.consumer[k].event_source_arn == aws_sqs_queue.consumer[k].arn,
        aws_lambda_event_source_mapping.consumer[k].batch_size == 10,
        aws_lambda_event_source_mapping.consumer[k].maximum_batching_window_in_seconds == 0,
        aws_lambda_event_source_mapping.consumer[k].function_response_types == toset(["ReportBatchItemFailures"]),
      ]
    ]))
    error_message = "Each consumer gets a FIFO queue and FIFO DLQ (redrive and subscription DLQ), a raw-delivery subscription and a mapping of at most 10 messages without a window."
  }

  assert {
    condition = (
      aws_lambda_function.publisher.environment[0].variables["OUTBOX_PUBLISH_TO"] == "sns_fifo"
      && aws_lambda_function.publisher.environment[0].variables["OUTBOX_TOPIC_ARN"] == "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo"
    )
    error_message = "The publisher must be told it publishes to a FIFO topic (it groups by subject)."
  }
}

# The ordered path's limits on two inputs, both read with the same valid publish_to.
run "sns_fifo_rejects_a_consumer_batch_size_above_10_and_a_stream_parallelization_factor_above_1" {
  command = plan

  # The FIFO topic's ARN (its postcondition compares it with the one built from the name).
  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  variables {
    publish_to = "sns_fifo"
    # was run "sns_fifo_rejects_a_consumer_batch_size_above_10"
    consumers = {
      audit = {
        filter_policy                      = "{\"source\":[\"orders\"]}"
        batch_size                         = 11
        maximum_batching_window_in_seconds = 1
      }
    }
    # was run "sns_fifo_rejects_a_stream_parallelization_factor_above_1" (with consumers = {})
    stream_mapping = { parallelization_factor = 2 }
  }

  expect_failures = [var.consumers, var.stream_mapping]
}

run "sns_fifo_rejects_a_consumer_batching_window" {
  command = plan

  # The FIFO topic's ARN (its postcondition compares it with the one built from the name).
  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  variables {
    publish_to = "sns_fifo"
    consumers = {
      audit = {
        filter_policy                      = "{\"source\":[\"orders\"]}"
        maximum_batching_window_in_seconds = 5
      }
    }
  }

  expect_failures = [var.consumers]
}

run "sns_standard_keeps_allowing_a_parallelization_factor_above_1" {
  command = plan

  variables {
    publish_to     = "sns"
    consumers      = {}
    stream_mapping = { parallelization_factor = 4 }
  }

  assert {
    condition     = aws_lambda_event_source_mapping.publisher.parallelization_factor == 4
    error_message = "Only the ordered path restricts the parallelization factor."
  }
}

################################################################################
# Layer
################################################################################

run "layer_publishes_the_package_for_the_runtime_and_architecture" {
  command = plan

  variables {
    lambda_runtime      = "python3.12"
    lambda_architecture = "x86_64"
  }

  assert {
    condition = (
      aws_lambda_layer_version.this[0].layer_name == "orders-outbox-dynamodb-outbox"
      && endswith(aws_lambda_layer_version.this[0].filename, "package/dynamodb_outbox_layer.zip")
      && aws_lambda_layer_version.this[0].source_code_hash == filebase64sha256("package/dynamodb_outbox_layer.zip")
      && aws_lambda_layer_version.this[0].compatible_runtimes == toset(["python3.12"])
      && aws_lambda_layer_version.this[0].compatible_architectures == toset(["x86_64"])
    )
    error_message = "The layer must deploy package/dynamodb_outbox_layer.zip for lambda_runtime and lambda_architecture."
  }

  assert {
    condition     = output.layer_arn == aws_lambda_layer_version.this[0].arn
    error_message = "layer_arn must be the layer version's ARN."
  }
}

run "layer_can_be_turned_off" {
  command = plan

  variables {
    create_layer = false
  }

  assert {
    condition     = length(aws_lambda_layer_version.this) == 0 && output.layer_arn == null
    error_message = "create_layer = false publishes no layer."
  }
}

################################################################################
# No consumers
################################################################################

run "no_consumers_means_no_consumer_resources" {
  command = plan

  variables {
    consumers = {}
  }

  assert {
    condition = alltrue([
      length(aws_sqs_queue.consumer) == 0,
      length(aws_sqs_queue.consumer_dlq) == 0,
      length(aws_cloudwatch_event_rule.consumer) == 0,
      length(aws_lambda_event_source_mapping.consumer) == 0,
      length(aws_lambda_function.consumer) == 0,
      length(aws_dynamodb_table.idempotency) == 0,
      output.consumers == {},
    ])
    error_message = "Without consumers the module creates none of their resources."
  }
}

################################################################################
# Event archive and dashboard
################################################################################

run "archive_keeps_the_bus_events_7_days_and_idempotency_records_outlive_them" {
  command = plan

  variables {
    event_archive = { retention_days = 30 }
  }

  assert {
    condition = (
      aws_cloudwatch_event_archive.this[0].name == "orders-outbox"
      && aws_cloudwatch_event_archive.this[0].event_source_arn == aws_cloudwatch_event_bus.this[0].arn
      && aws_cloudwatch_event_archive.this[0].retention_days == 30
      && aws_cloudwatch_event_archive.this[0].event_pattern == null
    )
    error_message = "The archive keeps every event of the module's bus for event_archive.retention_days."
  }

  assert {
    condition     = aws_lambda_function.consumer["audit"].environment[0].variables["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == "2592000"
    error_message = "Idempotency records must be kept as long as the archive keeps events (30 days), or a replay re-applies events whose record expired."
  }
}

run "dashboard_draws_the_flow_in_order_from_the_alarm_definitions" {
  command = plan

  variables {
    alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"], disabled = ["consumer_dlq_depth"] }
  }

  assert {
    condition = [for w in jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets : w.properties.title] == [
      "1. Writes: TransactWriteItems on orders-outbox",
      "2. Stream: publisher iterator age (ms)",
      "3. Published",
      "4. Quarantined (publisher + sweeper)",
      "5. Oldest pending outbox item (s)",
      "6. Sweeper recoveries",
      "7. Stream batches given up (on-failure queue)",
      "audit: processed / failed / duplicates",
      "audit: queue age (s)",
      "audit: DLQ depth",
      "billing: processed / failed / duplicates",
      "billing: queue age (s)",
      "billing: DLQ depth",
    ]
    error_message = "The dashboard draws writes, stream, publishing, quarantine, pending age and sweeper, then each consumer, in that order."
  }

  assert {
    condition = (
      jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets[1].properties.metrics == [
        ["AWS/Lambda", "IteratorAge", "FunctionName", "orders-outbox-publisher", { stat = "Maximum", label = "IteratorAge" }],
      ]
      && jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets[1].properties.annotations.horizontal == [
        { label = "alarm publisher_iterator_age", value = 60000 },
      ]
    )
    error_message = "The iterator age widget draws the alarm's metric, with its threshold."
  }

  assert {
    condition = (
      jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets[9].properties.metrics == [
        ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", "orders-outbox-audit-consumer-dlq", { stat = "Maximum", label = "messages" }],
      ]
      && jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets[9].properties.annotations.horizontal == []
    )
    error_message = "A consumer's DLQ depth is drawn even with its alarm off, without a threshold."
  }

  assert {
    condition = [for m in jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets[7].properties.metrics : m[3]] == [
      "orders-outbox-audit", "orders-outbox-audit", "orders-outbox-audit",
    ]
    error_message = "The reference consumer's counts are drawn under its Powertools service."
  }
}

run "archive_and_dashboard_can_be_turned_off" {
  command = plan

  variables {
    event_archive = { enabled = false }
    dashboard     = { enabled = false }
  }

  assert {
    condition = (
      length(aws_cloudwatch_event_archive.this) == 0
      && length(aws_cloudwatch_dashboard.this) == 0
      && output.event_archive_name == null
      && output.dashboard_name == null
      && aws_lambda_function.consumer["audit"].environment[0].variables["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == "1728000"
    )
    error_message = "enabled = false creates no archive and no dashboard (the window is then the copies' 20 days)."
  }
}

################################################################################
# Validation: at most one bad value per input in a run; a run passes only if
# every input it lists in expect_failures is refused (see validation.tftest.hcl).
# Inputs whose validations read another input (consumers and stream_mapping
# read publish_to, consumers reads name) go without a bad value for that one:
# Terraform does not evaluate them when the input they read is refused.
################################################################################

run "event_archive_retention_0_and_unknown_publish_to_are_rejected" {
  command = plan

  variables {
    # was run "event_archive_retention_0_is_rejected"
    event_archive = { retention_days = 0 }
    # was run "unknown_publish_to_is_rejected"
    publish_to = "kinesis"
  }

  expect_failures = [var.event_archive, var.publish_to]
}

run "consumer_key_with_uppercase_is_rejected" {
  command = plan

  variables {
    consumers = { Billing = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "consumer_key_with_underscore_is_rejected" {
  command = plan

  variables {
    consumers = { audit_log = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "consumer_key_ending_with_a_hyphen_is_rejected" {
  command = plan

  variables {
    consumers = { audit- = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "consumer_key_of_33_characters_is_rejected" {
  command = plan

  variables {
    consumers = { a23456789012345678901234567890123 = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "name_and_key_longer_than_54_characters_are_rejected" {
  command = plan

  # "<name>-<key>-consumer": 40 + 1 + 15 + 9 = 65 characters.
  variables {
    name      = "a234567890123456789012345678901234567890"
    consumers = { a23456789012345 = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  # The ARNs the module builds from these names, for its postconditions.
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

  override_resource {
    target          = aws_sqs_queue.consumer["a23456789012345"]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-a23456789012345-consumer"
    }
  }

  override_resource {
    target          = aws_sqs_queue.consumer_dlq["a23456789012345"]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-a23456789012345-consumer-dlq"
    }
  }

  override_resource {
    target          = aws_dynamodb_table.idempotency[0]
    override_during = plan
    values = {
      arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/a234567890123456789012345678901234567890-idempotency"
    }
  }

  override_resource {
    target          = aws_cloudwatch_log_group.consumer["a23456789012345"]
    override_during = plan
    values = {
      arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/a234567890123456789012345678901234567890-a23456789012345-consumer"
    }
  }

  expect_failures = [var.consumers]
}

run "name_and_key_of_54_characters_are_accepted" {
  command = plan

  # 40 + 1 + 14 + 9 = 64 characters, the limit.
  variables {
    name      = "a234567890123456789012345678901234567890"
    consumers = { a2345678901234 = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  # The ARNs the module builds from these names, for its postconditions.
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

  override_resource {
    target          = aws_sqs_queue.consumer["a2345678901234"]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-a2345678901234-consumer"
    }
  }

  override_resource {
    target          = aws_sqs_queue.consumer_dlq["a2345678901234"]
    override_during = plan
    values = {
      arn = "arn:aws:sqs:eu-west-1:111122223333:a234567890123456789012345678901234567890-a2345678901234-consumer-dlq"
    }
  }

  override_resource {
    target          = aws_dynamodb_table.idempotency[0]
    override_during = plan
    values = {
      arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/a234567890123456789012345678901234567890-idempotency"
    }
  }

  override_resource {
    target          = aws_cloudwatch_log_group.consumer["a2345678901234"]
    override_during = plan
    values = {
      arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/a234567890123456789012345678901234567890-a2345678901234-consumer"
    }
  }

  assert {
    condition     = aws_lambda_function.consumer["a2345678901234"].function_name == "a234567890123456789012345678901234567890-a2345678901234-consumer"
    error_message = "A 64-character consumer name is within the limit."
  }
}

run "empty_event_pattern_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{}" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_that_is_a_json_array_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "[\"orders\"]" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_that_is_not_json_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "source = orders" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_value_that_is_a_string_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":\"orders\"}" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_nested_value_that_is_a_number_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"detail\":{\"data\":{\"total\":42}}}" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_with_matchers_and_nested_fields_is_accepted" {
  command = plan

  variables {
    consumers = {
      audit = {
        event_pattern = jsonencode({
          source        = ["orders"]
          "detail-type" = ["OrderCreated", { prefix = "Order" }]
          detail        = { data = { total = [{ numeric = [">", 100] }], status = [{ "anything-but" = "TEST" }] } }
          "$or"         = [{ account = ["111122223333"] }, { region = ["eu-west-1"] }]
        })
      }
    }
  }

  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.consumer["audit"].event_pattern).detail.data.total == [{ numeric = [">", 100] }]
    error_message = "Matcher objects inside arrays and nested fields are valid pattern values."
  }
}

run "empty_filter_policy_is_rejected" {
  command = plan

  variables {
    publish_to = "sns"
    consumers  = { audit = { filter_policy = "{}" } }
  }

  expect_failures = [var.consumers]
}

run "pattern_and_filter_policy_together_are_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", filter_policy = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "filter_policy_with_eventbridge_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { filter_policy = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "event_pattern_with_sns_is_rejected" {
  command = plan

  variables {
    publish_to = "sns"
    consumers  = { audit = { event_pattern = "{\"source\":[\"orders\"]}" } }
  }

  expect_failures = [var.consumers]
}

run "consumer_without_pattern_is_rejected" {
  command = plan

  variables {
    consumers = { audit = {} }
  }

  expect_failures = [var.consumers]
}

run "function_arn_that_is_a_name_is_rejected" {
  command = plan

  variables {
    consumers = { billing = { event_pattern = "{\"source\":[\"orders\"]}", function = { arn = "billing" } } }
  }

  expect_failures = [var.consumers]
}

run "function_role_given_as_an_arn_is_rejected" {
  command = plan

  variables {
    consumers = { billing = { event_pattern = "{\"source\":[\"orders\"]}", function = { arn = "arn:aws:lambda:eu-west-1:111122223333:function:billing", role_name = "arn:aws:iam::111122223333:role/billing" } } }
  }

  expect_failures = [var.consumers]
}

run "function_timeout_0_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", function_timeout_seconds = 0 } }
  }

  expect_failures = [var.consumers]
}

run "function_timeout_901_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", function_timeout_seconds = 901 } }
  }

  expect_failures = [var.consumers]
}

run "function_memory_127_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", function_memory_size_mb = 127 } }
  }

  expect_failures = [var.consumers]
}

run "visibility_timeout_below_6_times_the_function_timeout_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", function_timeout_seconds = 30, visibility_timeout_seconds = 179 } }
  }

  expect_failures = [var.consumers]
}

run "visibility_timeout_above_12_hours_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", visibility_timeout_seconds = 43201 } }
  }

  expect_failures = [var.consumers]
}

run "message_retention_59_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", message_retention_seconds = 59 } }
  }

  expect_failures = [var.consumers]
}

run "max_receive_count_0_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", max_receive_count = 0 } }
  }

  expect_failures = [var.consumers]
}

run "max_receive_count_1001_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", max_receive_count = 1001 } }
  }

  expect_failures = [var.consumers]
}

run "batch_size_0_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", batch_size = 0 } }
  }

  expect_failures = [var.consumers]
}

run "batch_size_10001_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", batch_size = 10001, maximum_batching_window_in_seconds = 1 } }
  }

  expect_failures = [var.consumers]
}

run "batch_size_11_without_batching_window_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", batch_size = 11, maximum_batching_window_in_seconds = 0 } }
  }

  expect_failures = [var.consumers]
}

run "batching_window_301_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_batching_window_in_seconds = 301 } }
  }

  expect_failures = [var.consumers]
}

run "maximum_concurrency_1_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_concurrency = 1 } }
  }

  expect_failures = [var.consumers]
}

run "maximum_concurrency_1001_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_concurrency = 1001 } }
  }

  expect_failures = [var.consumers]
}

run "event_age_59_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_event_age_in_seconds = 59 } }
  }

  expect_failures = [var.consumers]
}

run "event_age_above_a_day_is_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_event_age_in_seconds = 86401 } }
  }

  expect_failures = [var.consumers]
}

run "negative_retry_attempts_are_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_retry_attempts = -1 } }
  }

  expect_failures = [var.consumers]
}

run "retry_attempts_186_are_rejected" {
  command = plan

  variables {
    consumers = { audit = { event_pattern = "{\"source\":[\"orders\"]}", maximum_retry_attempts = 186 } }
  }

  expect_failures = [var.consumers]
}

################################################################################
# Tracing (tracing_mode): every function the module deploys, and its role
################################################################################

run "tracing_active_traces_the_module_functions_with_only_the_xray_write_actions" {
  command = plan

  variables {
    tracing_mode = "Active"
  }

  assert {
    condition = (
      aws_lambda_function.publisher.tracing_config[0].mode == "Active"
      && aws_lambda_function.sweeper[0].tracing_config[0].mode == "Active"
      && aws_lambda_function.consumer["audit"].tracing_config[0].mode == "Active"
    )
    error_message = "tracing_mode = \"Active\" must set active tracing on the publisher, the sweeper and the reference consumer."
  }

  assert {
    condition = alltrue([
      for statements in [
        data.aws_iam_policy_document.publisher.statement,
        data.aws_iam_policy_document.sweeper[0].statement,
        data.aws_iam_policy_document.consumer_function["audit"].statement,
        ] : (
        [for s in statements : s.actions if s.sid == "WriteTraces"] == [toset(["xray:PutTelemetryRecords", "xray:PutTraceSegments"])]
        && [for s in statements : s.resources if s.sid == "WriteTraces"] == [toset(["*"])]
      )
    ])
    error_message = "Each traced function's role must get exactly xray:PutTraceSegments and xray:PutTelemetryRecords (on \"*\", X-Ray has no resource-level permissions), in one statement."
  }

  assert {
    condition     = length([for s in data.aws_iam_policy_document.consumer["billing"].statement : s if s.sid == "WriteTraces"]) == 0
    error_message = "A caller's function keeps its own tracing: the policy for its role must not grant X-Ray."
  }
}

