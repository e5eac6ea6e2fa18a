# The pending index, the sweeper (function, IAM, schedule) and the alarms.
# Run from the repository root:
#   terraform test -test-directory=tests/terraform -filter=tests/terraform/sweeper_alarms.tftest.hcl

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

# The queues' ARNs are checked against the ARNs their policies were given.
override_resource {
  target          = aws_sqs_queue.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq"
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
  target          = aws_sqs_queue.consumer["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer"
  }
}

override_resource {
  target          = aws_sqs_queue.consumer_dlq["billing"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-billing-consumer-dlq"
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

################################################################################
# Pending index (and the sweeper with the file's variables)
################################################################################

# The file's variables: one plan serves every block of asserts below; each
# block was a run of its own (named in its comment).
run "default_sweeper_index_function_iam_and_schedule" {
  command = plan

  # was run "created_table_has_the_sparse_keys_only_pending_index"
  assert {
    condition = (
      length(aws_dynamodb_table.this[0].global_secondary_index) == 1
      && one(aws_dynamodb_table.this[0].global_secondary_index).name == "outbox-pending"
      && one(aws_dynamodb_table.this[0].global_secondary_index).hash_key == "outbox_pending_shard"
      && one(aws_dynamodb_table.this[0].global_secondary_index).range_key == "SK"
      && one(aws_dynamodb_table.this[0].global_secondary_index).projection_type == "KEYS_ONLY"
    )
    error_message = "The table must have exactly one GSI, outbox-pending: hash outbox_pending_shard, range SK, keys only."
  }

  assert {
    condition     = contains(aws_dynamodb_table.this[0].attribute, { name = "outbox_pending_shard", type = "S" })
    error_message = "The index's partition key outbox_pending_shard must be a string attribute (the writer stores \"00\"..\"07\")."
  }

  assert {
    condition     = output.pending_index_name == "outbox-pending"
    error_message = "The pending_index_name output must name the index."
  }

  # was run "sweeper_function_is_configured"
  assert {
    condition     = aws_lambda_function.sweeper[0].function_name == "orders-outbox-sweeper" && aws_lambda_function.sweeper[0].handler == "dynamodb_outbox.sweeper.handler"
    error_message = "The sweeper is <name>-sweeper with handler dynamodb_outbox.sweeper.handler."
  }

  assert {
    condition = (
      aws_lambda_function.sweeper[0].filename == aws_lambda_function.publisher.filename
      && aws_lambda_function.sweeper[0].source_code_hash == filebase64sha256("package/dynamodb_outbox.zip")
      && aws_lambda_function.sweeper[0].runtime == aws_lambda_function.publisher.runtime
      && aws_lambda_function.sweeper[0].architectures == aws_lambda_function.publisher.architectures
      && aws_lambda_function.sweeper[0].layers == aws_lambda_function.publisher.layers
    )
    error_message = "The sweeper deploys the publisher's package with its runtime, architecture and layers."
  }

  assert {
    condition     = aws_lambda_function.sweeper[0].memory_size == 256 && aws_lambda_function.sweeper[0].timeout == 120
    error_message = "Default memory 256 MB and timeout 120 s."
  }

  assert {
    condition = aws_lambda_function.sweeper[0].environment[0].variables == tomap({
      OUTBOX_TABLE_NAME              = "orders-outbox"
      OUTBOX_PARTITION_KEY           = "PK"
      OUTBOX_SORT_KEY                = "SK"
      OUTBOX_PUBLISH_TO              = "eventbridge"
      OUTBOX_EVENT_BUS_NAME          = "orders-outbox"
      OUTBOX_PENDING_INDEX           = "outbox-pending"
      OUTBOX_SWEEPER_MIN_AGE_SECONDS = "300"
      OUTBOX_SWEEPER_MAX_ITEMS       = "1000"
      POWERTOOLS_SERVICE_NAME        = "orders-outbox-sweeper"
      POWERTOOLS_METRICS_NAMESPACE   = "DynamoDBOutbox"
      LOG_LEVEL                      = "INFO"
    })
    error_message = "The sweeper's environment must name the table and its keys, sink, index, min age and max items, and configure Powertools (no shard count: the package's is the only one)."
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.sweeper[0].name == "/aws/lambda/orders-outbox-sweeper"
      && aws_cloudwatch_log_group.sweeper[0].retention_in_days == 30
      && aws_cloudwatch_log_group.sweeper[0].kms_key_id == null
    )
    error_message = "The module owns the sweeper's log group, 30 days retention by default."
  }

  assert {
    condition = alltrue([
      aws_lambda_function.sweeper[0].tags == var.tags,
      aws_cloudwatch_log_group.sweeper[0].tags == var.tags,
      aws_iam_role.sweeper[0].tags == var.tags,
      aws_iam_role.sweeper_schedule[0].tags == var.tags,
    ])
    error_message = "var.tags must be set on the sweeper's taggable resources."
  }

  assert {
    condition = (
      output.sweeper_function_name == "orders-outbox-sweeper"
      && output.sweeper_function_arn == aws_lambda_function.sweeper[0].arn
      && output.sweeper_role_arn == aws_iam_role.sweeper[0].arn
    )
    error_message = "The sweeper outputs must describe the function and its role."
  }

  assert {
    condition = (
      output.sweeper_log_group_name == "/aws/lambda/orders-outbox-sweeper"
      && output.sweeper_schedule_name == "orders-outbox-sweeper"
      && output.sweeper_schedule_expression == "rate(5 minutes)"
    )
    error_message = "The sweeper outputs must give its log group and the schedule that runs it."
  }

  # was run "sweeper_iam_is_least_privilege"
  assert {
    condition     = aws_iam_role.sweeper[0].name == "orders-outbox-sweeper" && aws_lambda_function.sweeper[0].role == aws_iam_role.sweeper[0].arn && aws_iam_role_policy.sweeper[0].role == aws_iam_role.sweeper[0].id
    error_message = "The sweeper has its own role and policy."
  }

  assert {
    condition = { for s in data.aws_iam_policy_document.sweeper[0].statement : s.sid => s.resources } == {
      QueryPendingIndex     = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox/index/outbox-pending"])
      ReadPendingItems      = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox"])
      DeletePublishedItems  = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox"])
      QuarantinePoisonItems = toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox"])
      PublishEvents         = toset([aws_cloudwatch_event_bus.this[0].arn])
      WriteOwnLogs          = toset(["${aws_cloudwatch_log_group.sweeper[0].arn}:*"])
    }
    error_message = "Query only on the pending index ARN; item reads and writes on the table; PutEvents on the bus; logs on its own group; no KMS statement without a key."
  }

  assert {
    condition = { for s in data.aws_iam_policy_document.sweeper[0].statement : s.sid => s.actions } == {
      QueryPendingIndex     = toset(["dynamodb:Query"])
      ReadPendingItems      = toset(["dynamodb:BatchGetItem"])
      DeletePublishedItems  = toset(["dynamodb:BatchWriteItem"])
      QuarantinePoisonItems = toset(["dynamodb:UpdateItem"])
      PublishEvents         = toset(["events:PutEvents"])
      WriteOwnLogs          = toset(["logs:CreateLogStream", "logs:PutLogEvents"])
    }
    error_message = "The sweeper policy must grant exactly what the handler uses: no Scan, no Query on the table itself, no DeleteItem."
  }

  assert {
    condition = {
      for s in data.aws_iam_policy_document.sweeper[0].statement : s.sid => {
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
    error_message = "The sweeper's deletes may carry the key only, its updates the key and the quarantine attributes with no ReturnValues, as the publisher's."
  }

  assert {
    condition     = alltrue([for s in data.aws_iam_policy_document.sweeper[0].statement : !contains(s.resources, "*") && alltrue([for a in s.actions : !strcontains(a, "*") && a != "dynamodb:Scan"])])
    error_message = "No \"*\" resource, no wildcard action and no Scan in the sweeper policy."
  }

  # was run "sweeper_runs_on_an_eventbridge_scheduler_schedule"
  assert {
    condition = (
      aws_scheduler_schedule.sweeper[0].name == "orders-outbox-sweeper"
      && aws_scheduler_schedule.sweeper[0].schedule_expression == "rate(5 minutes)"
      && aws_scheduler_schedule.sweeper[0].state == "ENABLED"
      && aws_scheduler_schedule.sweeper[0].flexible_time_window[0].mode == "OFF"
    )
    error_message = "The schedule runs the sweeper every 5 minutes by default, without a flexible window."
  }

  assert {
    condition     = aws_scheduler_schedule.sweeper[0].target[0].arn == aws_lambda_function.sweeper[0].arn && aws_scheduler_schedule.sweeper[0].target[0].role_arn == aws_iam_role.sweeper_schedule[0].arn
    error_message = "The schedule's target is the sweeper, invoked with the schedule's own role."
  }

  assert {
    condition = (
      one(data.aws_iam_policy_document.sweeper_schedule[0].statement).actions == toset(["lambda:InvokeFunction"])
      && one(data.aws_iam_policy_document.sweeper_schedule[0].statement).resources == toset(["arn:aws:lambda:eu-west-1:111122223333:function:orders-outbox-sweeper"])
    )
    error_message = "The schedule's role may only invoke the sweeper, named by an ARN built from values known at plan (not the function's `arn`, which defers the document to apply whenever the function changes)."
  }

  assert {
    condition = (
      one(one(data.aws_iam_policy_document.sweeper_schedule_assume_role[0].statement).principals).identifiers == toset(["scheduler.amazonaws.com"])
      && { for c in one(data.aws_iam_policy_document.sweeper_schedule_assume_role[0].statement).condition : "${c.test} ${c.variable}" => c.values } == {
        "StringEquals aws:SourceAccount" = tolist(["111122223333"])
        "ArnEquals aws:SourceArn"        = tolist(["arn:aws:scheduler:eu-west-1:111122223333:schedule-group/default"])
      }
    )
    error_message = "Only EventBridge Scheduler, for schedules of this account's schedule group the sweeper's is in (aws:SourceAccount and aws:SourceArn), may assume the schedule's role."
  }

  assert {
    condition     = aws_iam_role.sweeper_schedule[0].name == "orders-outbox-sweeper-schedule" && aws_iam_role_policy.sweeper_schedule[0].role == aws_iam_role.sweeper_schedule[0].id
    error_message = "The schedule's role is <name>-sweeper-schedule."
  }
}

run "provisioned_table_gives_the_index_capacity" {
  command = plan

  variables {
    table = {
      billing_mode   = "PROVISIONED"
      read_capacity  = 5
      write_capacity = 10
    }
  }

  assert {
    condition     = one(aws_dynamodb_table.this[0].global_secondary_index).read_capacity == 5 && one(aws_dynamodb_table.this[0].global_secondary_index).write_capacity == 10
    error_message = "A provisioned table's index needs capacity: the table's."
  }
}

run "existing_table_with_the_pending_index_is_accepted" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
  }

  assert {
    condition     = one([for s in data.aws_iam_policy_document.sweeper[0].statement : s.resources if s.sid == "QueryPendingIndex"]) == toset(["arn:aws:dynamodb:eu-west-1:111122223333:table/orders/index/outbox-pending"])
    error_message = "The sweeper must query the existing table's pending index."
  }

  assert {
    condition     = aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_TABLE_NAME"] == "orders"
    error_message = "The sweeper must be told the existing table's name."
  }
}

run "existing_table_without_the_pending_index_fails_plan" {
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
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      global_secondary_index = []
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_with_another_index_shape_fails_plan" {
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
      arn              = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
      stream_arn       = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
      stream_enabled   = true
      stream_view_type = "NEW_IMAGE"
      hash_key         = "PK"
      range_key        = "SK"
      attribute        = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }, { name = "outbox_pending_shard", type = "S" }]
      global_secondary_index = [{
        name               = "outbox-pending"
        hash_key           = "outbox_pending_shard"
        range_key          = null
        projection_type    = "KEYS_ONLY"
        non_key_attributes = []
        read_capacity      = 0
        write_capacity     = 0
      }]
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  expect_failures = [data.aws_dynamodb_table.existing]
}

run "existing_table_without_the_index_is_accepted_without_sweeper" {
  command = plan

  variables {
    table = {
      create = false
      name   = "orders"
    }
    sweeper = {
      enabled = false
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
      attribute              = [{ name = "PK", type = "S" }, { name = "SK", type = "S" }]
      global_secondary_index = []
      billing_mode           = "PAY_PER_REQUEST"
      server_side_encryption = []
    }
  }

  assert {
    condition     = length(aws_lambda_function.sweeper) == 0
    error_message = "sweeper.enabled = false must create no sweeper."
  }
}

################################################################################
# Sweeper
################################################################################

run "sweeper_publishes_to_the_sns_topic_like_the_publisher" {
  command = plan

  variables {
    publish_to = "sns"
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values = {
      arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
    }
  }

  assert {
    condition = (
      aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_PUBLISH_TO"] == "sns"
      && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_TOPIC_ARN"] == "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
      && !contains(keys(aws_lambda_function.sweeper[0].environment[0].variables), "OUTBOX_EVENT_BUS_NAME")
    )
    error_message = "With publish_to = \"sns\" the sweeper publishes to the topic."
  }

  assert {
    condition = (
      one([for s in data.aws_iam_policy_document.sweeper[0].statement : s.actions if s.sid == "PublishEvents"]) == toset(["sns:Publish"])
      && one([for s in data.aws_iam_policy_document.sweeper[0].statement : s.resources if s.sid == "PublishEvents"]) == toset(["arn:aws:sns:eu-west-1:111122223333:orders-outbox"])
    )
    error_message = "With publish_to = \"sns\" the sweeper may only sns:Publish to the topic."
  }
}

run "longest_name_keeps_sweeper_names_within_aws_limits" {
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
      length(aws_lambda_function.sweeper[0].function_name) <= 64,
      length(aws_iam_role.sweeper[0].name) <= 64,
      length(aws_iam_role.sweeper_schedule[0].name) <= 64,
      length(aws_scheduler_schedule.sweeper[0].name) <= 64,
      alltrue([for a in aws_cloudwatch_metric_alarm.this : length(a.alarm_name) <= 255]),
    ])
    error_message = "A 40-character name must keep the sweeper's function, role, schedule and alarm names within their AWS limits."
  }
}

run "sweeper_settings_reach_the_function_schedule_and_alarm" {
  command = plan

  variables {
    sweeper = {
      schedule_expression = "rate(1 hour)"
      min_age_seconds     = 600
      max_items           = 50
      memory_size_mb      = 512
      timeout_seconds     = 300
      log_level           = "DEBUG"
    }
    kms_key_arn                  = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    iam_permissions_boundary_arn = "arn:aws:iam::111122223333:policy/boundary"
  }

  assert {
    condition = (
      aws_scheduler_schedule.sweeper[0].schedule_expression == "rate(1 hour)"
      && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_SWEEPER_MIN_AGE_SECONDS"] == "600"
      && aws_lambda_function.sweeper[0].environment[0].variables["OUTBOX_SWEEPER_MAX_ITEMS"] == "50"
      && aws_lambda_function.sweeper[0].environment[0].variables["LOG_LEVEL"] == "DEBUG"
      && aws_lambda_function.sweeper[0].memory_size == 512
      && aws_lambda_function.sweeper[0].timeout == 300
    )
    error_message = "The sweeper inputs must reach the schedule and the function."
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["oldest_pending_item"].threshold == 4200 && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].period == 3600
    error_message = "The oldest-pending threshold is min age + interval (600 + 3600 s), over periods of one interval."
  }

  assert {
    condition = (
      one([for s in data.aws_iam_policy_document.sweeper[0].statement : s if s.sid == "UseEncryptionKeys"]).resources == toset([var.kms_key_arn])
      && aws_cloudwatch_log_group.sweeper[0].kms_key_id == var.kms_key_arn
    )
    error_message = "With a customer key the sweeper may use it, and its log group is encrypted with it."
  }

  assert {
    condition     = aws_iam_role.sweeper[0].permissions_boundary == var.iam_permissions_boundary_arn && aws_iam_role.sweeper_schedule[0].permissions_boundary == var.iam_permissions_boundary_arn
    error_message = "The permissions boundary must be set on the sweeper's roles."
  }
}

run "sweeper_can_be_turned_off" {
  command = plan

  variables {
    sweeper = {
      enabled = false
    }
  }

  assert {
    condition = alltrue([
      length(aws_lambda_function.sweeper) == 0,
      length(aws_scheduler_schedule.sweeper) == 0,
      length(aws_iam_role.sweeper) == 0,
      length(aws_iam_role.sweeper_schedule) == 0,
      length(aws_cloudwatch_log_group.sweeper) == 0,
    ])
    error_message = "sweeper.enabled = false must create no sweeper resources."
  }

  assert {
    condition     = output.sweeper_function_name == null && output.sweeper_function_arn == null && output.sweeper_role_arn == null
    error_message = "The sweeper outputs are null without a sweeper."
  }

  assert {
    condition     = keys(output.alarm_arns) == ["event_bus_dlq_depth", "on_failure_queue_depth", "publisher_errors", "publisher_iterator_age", "quarantined_events"]
    error_message = "Without a sweeper there are no sweeper alarms."
  }

  assert {
    condition     = one([for q in aws_cloudwatch_metric_alarm.quarantined_events[0].metric_query : q.expression if q.id == "quarantined"]) == "FILL(m0, 0)"
    error_message = "Without a sweeper the quarantine alarm watches the publisher only."
  }

  assert {
    condition     = length(aws_dynamodb_table.this[0].global_secondary_index) == 1
    error_message = "A created table keeps its pending index without a sweeper."
  }
}

################################################################################
# Alarms
################################################################################

run "alarms_watch_the_right_metrics" {
  command = plan

  variables {
    alarms = {
      actions    = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      ok_actions = ["arn:aws:sns:eu-west-1:111122223333:oncall-ok"]
    }
  }

  assert {
    condition     = keys(output.alarm_arns) == ["event_bus_dlq_depth", "oldest_pending_item", "on_failure_queue_depth", "publisher_errors", "publisher_iterator_age", "quarantined_events", "sweeper_errors"]
    error_message = "Seven alarms by default (the bus DLQ's with the module's bus), each in the alarm_arns output."
  }

  assert {
    condition = alltrue([for a in concat(values(aws_cloudwatch_metric_alarm.this), aws_cloudwatch_metric_alarm.quarantined_events) : (
      a.alarm_actions == toset(["arn:aws:sns:eu-west-1:111122223333:oncall"])
      && a.ok_actions == toset(["arn:aws:sns:eu-west-1:111122223333:oncall-ok"])
      && a.comparison_operator == "GreaterThanThreshold"
      && a.tags == var.tags
    )])
    error_message = "Every alarm notifies alarms.actions and alarms.ok_actions, fires above its threshold and is tagged."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].alarm_name == "orders-outbox-publisher-iterator-age"
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].namespace == "AWS/Lambda"
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].metric_name == "IteratorAge"
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].statistic == "Maximum"
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].threshold == 60000
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].dimensions == tomap({ FunctionName = "orders-outbox-publisher" })
    )
    error_message = "IteratorAge (Maximum) of the publisher above 60000 ms."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["publisher_errors"].metric_name == "Errors"
      && aws_cloudwatch_metric_alarm.this["publisher_errors"].statistic == "Sum"
      && aws_cloudwatch_metric_alarm.this["publisher_errors"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["publisher_errors"].dimensions == tomap({ FunctionName = "orders-outbox-publisher" })
      && aws_cloudwatch_metric_alarm.this["sweeper_errors"].metric_name == "Errors"
      && aws_cloudwatch_metric_alarm.this["sweeper_errors"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["sweeper_errors"].dimensions == tomap({ FunctionName = "orders-outbox-sweeper" })
    )
    error_message = "Errors (Sum > 0) of the publisher and of the sweeper."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["on_failure_queue_depth"].namespace == "AWS/SQS"
      && aws_cloudwatch_metric_alarm.this["on_failure_queue_depth"].metric_name == "ApproximateNumberOfMessagesVisible"
      && aws_cloudwatch_metric_alarm.this["on_failure_queue_depth"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["on_failure_queue_depth"].dimensions == tomap({ QueueName = "orders-outbox-publisher-on-failure" })
    )
    error_message = "The on-failure queue alarm fires on any visible message."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["oldest_pending_item"].namespace == "DynamoDBOutbox"
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].metric_name == "OldestPendingAgeSeconds"
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].statistic == "Maximum"
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].threshold == 600
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].period == 300
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].evaluation_periods == 2
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].treat_missing_data == "breaching"
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].dimensions == tomap({ service = "orders-outbox-sweeper" })
    )
    error_message = "OldestPendingAgeSeconds (Maximum) of the sweeper above min age + interval (300 + 300 s); missing data breaches."
  }

  assert {
    condition = (
      one([for q in aws_cloudwatch_metric_alarm.quarantined_events[0].metric_query : q.expression if q.id == "quarantined"]) == "FILL(m0, 0) + FILL(m1, 0)"
      && toset([for q in aws_cloudwatch_metric_alarm.quarantined_events[0].metric_query : one(q.metric).dimensions["service"] if q.id != "quarantined"]) == toset(["orders-outbox", "orders-outbox-sweeper"])
      && alltrue([for q in aws_cloudwatch_metric_alarm.quarantined_events[0].metric_query : one(q.metric).metric_name == "QuarantinedEvents" && one(q.metric).namespace == "DynamoDBOutbox" && one(q.metric).stat == "Sum" if q.id != "quarantined"])
      && aws_cloudwatch_metric_alarm.quarantined_events[0].threshold == 0
    )
    error_message = "The quarantine alarm adds up QuarantinedEvents (Sum) of the publisher's and the sweeper's services and fires above 0."
  }
}

run "alarm_thresholds_are_inputs" {
  command = plan

  variables {
    alarms = {
      period_seconds                       = 60
      publisher_iterator_age_threshold_ms  = 120000
      publisher_errors_threshold           = 3
      sweeper_errors_threshold             = 1
      oldest_pending_age_threshold_seconds = 1800
    }
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].threshold == 120000
      && aws_cloudwatch_metric_alarm.this["publisher_iterator_age"].period == 60
      && aws_cloudwatch_metric_alarm.this["publisher_errors"].threshold == 3
      && aws_cloudwatch_metric_alarm.this["sweeper_errors"].threshold == 1
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].threshold == 1800
    )
    error_message = "The alarm inputs must reach the alarms."
  }

  assert {
    condition     = length(aws_cloudwatch_metric_alarm.this["publisher_errors"].alarm_actions) == 0
    error_message = "No actions by default."
  }

  # ... and the plan says so (a warning outside terraform test).
  expect_failures = [check.alarms_notify_someone]
}

run "alarms_can_be_turned_off" {
  command = plan

  variables {
    alarms = {
      enabled = false
    }
  }

  assert {
    condition     = length(aws_cloudwatch_metric_alarm.this) == 0 && length(aws_cloudwatch_metric_alarm.quarantined_events) == 0 && output.alarm_arns == {}
    error_message = "alarms.enabled = false must create no alarm."
  }
}

run "single_alarms_can_be_turned_off" {
  command = plan

  variables {
    alarms = {
      disabled = ["publisher_iterator_age", "quarantined_events"]
      actions  = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  assert {
    condition     = keys(output.alarm_arns) == ["event_bus_dlq_depth", "oldest_pending_item", "on_failure_queue_depth", "publisher_errors", "sweeper_errors"]
    error_message = "The alarms listed in alarms.disabled must not be created; the others must."
  }
}

run "each_consumer_gets_rule_and_dlq_alarms" {
  command = plan

  variables {
    consumers = {
      billing = {
        event_pattern = "{\"detail-type\":[\"OrderCreated\"]}"
        function = {
          arn          = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          uses_toolkit = false
        }
      }
    }
    alarms = {
      actions                            = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
      consumer_dlq_age_threshold_seconds = 86400
    }
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].alarm_name == "orders-outbox-billing-consumer-failed-invocations"
      && aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].namespace == "AWS/Events"
      && aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].metric_name == "FailedInvocations"
      && aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].statistic == "Sum"
      && aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].dimensions == tomap({ EventBusName = "orders-outbox", RuleName = aws_cloudwatch_event_rule.consumer["billing"].name })
    )
    error_message = "A consumer's rule alarms on FailedInvocations (Sum > 0) with the custom bus's EventBusName and the rule's name."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_dlq_depth/billing"].alarm_name == "orders-outbox-billing-consumer-dlq-depth"
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_depth/billing"].namespace == "AWS/SQS"
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_depth/billing"].metric_name == "ApproximateNumberOfMessagesVisible"
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_depth/billing"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_depth/billing"].dimensions == tomap({ QueueName = "orders-outbox-billing-consumer-dlq" })
    )
    error_message = "A consumer's DLQ alarms on any visible message."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_dlq_age/billing"].metric_name == "ApproximateAgeOfOldestMessage"
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_age/billing"].statistic == "Maximum"
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_age/billing"].threshold == 86400
      && aws_cloudwatch_metric_alarm.this["consumer_dlq_age/billing"].dimensions == tomap({ QueueName = "orders-outbox-billing-consumer-dlq" })
    )
    error_message = "A consumer's DLQ alarms when its oldest message is older than consumer_dlq_age_threshold_seconds."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].alarm_name == "orders-outbox-billing-consumer-errors"
      && aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].namespace == "AWS/Lambda"
      && aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].metric_name == "Errors"
      && aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].statistic == "Sum"
      && aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].threshold == 0
      && aws_cloudwatch_metric_alarm.this["consumer_errors/billing"].dimensions == tomap({ FunctionName = "billing" })
    )
    error_message = "A caller's consumer function alarms on its Errors (Sum > 0), by its function name."
  }

  assert {
    condition     = alltrue([for k in ["consumer_failed_invocations/billing", "consumer_dlq_depth/billing", "consumer_dlq_age/billing", "consumer_errors/billing"] : aws_cloudwatch_metric_alarm.this[k].alarm_actions == toset(["arn:aws:sns:eu-west-1:111122223333:oncall"]) && contains(keys(output.alarm_arns), k)])
    error_message = "Consumer alarms notify alarms.actions and appear in alarm_arns."
  }
}

run "the_reference_consumer_gets_an_errors_alarm" {
  command = plan

  # The module's postcondition compares the log group's ARN with the one its
  # policy was built from (consumers.tf).
  override_resource {
    target          = aws_cloudwatch_log_group.consumer["audit"]
    override_during = plan
    values = {
      arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
    }
  }

  variables {
    consumers = {
      audit = {
        event_pattern = "{\"source\":[\"orders\"]}"
      }
    }
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_errors/audit"].metric_name == "Errors"
      && aws_cloudwatch_metric_alarm.this["consumer_errors/audit"].dimensions == tomap({ FunctionName = aws_lambda_function.consumer["audit"].function_name })
      && contains(keys(output.alarm_arns), "consumer_errors/audit")
    )
    error_message = "The reference consumer's function alarms on its Errors, like the publisher's."
  }
}

run "consumer_alarms_on_the_default_bus_and_turned_off" {
  command = plan

  variables {
    event_bus = {
      create = false
      name   = "default"
    }
    consumers = {
      billing = {
        event_pattern = "{\"detail-type\":[\"OrderCreated\"]}"
        function = {
          arn          = "arn:aws:lambda:eu-west-1:111122223333:function:billing"
          uses_toolkit = false
        }
      }
    }
    alarms = {
      disabled = ["consumer_dlq_age"]
      actions  = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["consumer_failed_invocations/billing"].dimensions == tomap({ RuleName = aws_cloudwatch_event_rule.consumer["billing"].name })
    error_message = "Rules on the default bus report FailedInvocations with RuleName only."
  }

  assert {
    condition     = contains(keys(aws_cloudwatch_metric_alarm.this), "consumer_dlq_depth/billing") && !contains(keys(aws_cloudwatch_metric_alarm.this), "consumer_dlq_age/billing")
    error_message = "A consumer alarm key in alarms.disabled turns that alarm off for every consumer, and only that one."
  }
}

run "cron_schedule_needs_an_explicit_pending_age_threshold" {
  command = plan

  variables {
    sweeper = {
      schedule_expression = "cron(0/10 * * * ? *)"
    }
  }

  expect_failures = [aws_cloudwatch_metric_alarm.this, aws_scheduler_schedule.sweeper]
}

# The idempotency window counts the sweeper's re-publishes up to the threshold:
# turning the alarm off does not make a cron() schedule's gap known.
run "cron_schedule_needs_an_explicit_pending_age_threshold_even_with_the_alarm_disabled" {
  command = plan

  variables {
    sweeper = {
      schedule_expression = "cron(0 3 ? * MON *)"
    }
    alarms = {
      disabled = ["oldest_pending_item"]
      actions  = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  expect_failures = [aws_scheduler_schedule.sweeper]
}

run "cron_schedule_with_a_pending_age_threshold" {
  command = plan

  variables {
    sweeper = {
      schedule_expression = "cron(0/10 * * * ? *)"
    }
    alarms = {
      oldest_pending_age_threshold_seconds = 900
      actions                              = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
    }
  }

  assert {
    condition = (
      aws_scheduler_schedule.sweeper[0].schedule_expression == "cron(0/10 * * * ? *)"
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].threshold == 900
      && aws_cloudwatch_metric_alarm.this["oldest_pending_item"].period == 900
    )
    error_message = "With a cron() schedule the threshold is the input, and a period of that length must see a report."
  }
}

################################################################################
# Validation: at most one bad value per input in a run; a run passes only if
# every input it lists in expect_failures is refused (see validation.tftest.hcl)
################################################################################

run "schedule_with_plural_unit_for_one_and_unknown_alarm_key_are_rejected" {
  command = plan

  variables {
    # was run "schedule_with_plural_unit_for_one_is_rejected"
    sweeper = { schedule_expression = "rate(1 minutes)" }
    # was run "unknown_alarm_key_is_rejected"
    alarms = { disabled = ["iterator_age"] }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "schedule_with_singular_unit_for_many_and_alarm_action_that_is_not_an_arn_are_rejected" {
  command = plan

  variables {
    # was run "schedule_with_singular_unit_for_many_is_rejected"
    sweeper = { schedule_expression = "rate(5 minute)" }
    # was run "alarm_action_that_is_not_an_arn_is_rejected"
    alarms = { actions = ["oncall"] }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "one_time_schedule_and_alarm_action_with_a_missing_account_field_are_rejected" {
  command = plan

  variables {
    # was run "one_time_schedule_is_rejected"
    sweeper = { schedule_expression = "at(2030-01-01T00:00:00)" }
    # was run "alarm_action_with_a_missing_account_field_is_rejected"
    alarms = { ok_actions = ["arn:aws:sns:eu-west-1:oncall"] }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "cron_with_five_fields_and_six_alarm_actions_are_rejected" {
  command = plan

  variables {
    # was run "cron_with_five_fields_is_rejected"
    sweeper = { schedule_expression = "cron(*/5 * * * *)" }
    # was run "six_alarm_actions_are_rejected"
    alarms = { actions = [for i in range(6) : "arn:aws:sns:eu-west-1:111122223333:oncall-${i}"] }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "min_age_below_60_and_alarm_period_not_a_multiple_of_60_are_rejected" {
  command = plan

  variables {
    # was run "min_age_below_60_is_rejected"
    sweeper = { min_age_seconds = 59 }
    # was run "alarm_period_not_a_multiple_of_60_is_rejected"
    alarms = { period_seconds = 90 }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "sweeper_timeout_below_60_and_negative_alarm_threshold_are_rejected" {
  command = plan

  variables {
    # was run "sweeper_timeout_below_60_is_rejected"
    sweeper = { timeout_seconds = 59 }
    # was run "negative_alarm_threshold_is_rejected"
    alarms = { publisher_errors_threshold = -1 }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "sweeper_timeout_above_900_and_pending_age_threshold_below_60_are_rejected" {
  command = plan

  variables {
    # was run "sweeper_timeout_above_900_is_rejected"
    sweeper = { timeout_seconds = 901 }
    # was run "pending_age_threshold_below_60_is_rejected"
    alarms = { oldest_pending_age_threshold_seconds = 30 }
  }

  expect_failures = [var.sweeper, var.alarms]
}

run "max_items_0_is_rejected" {
  command = plan

  variables {
    sweeper = { max_items = 0 }
  }

  expect_failures = [var.sweeper]
}

run "max_items_10001_is_rejected" {
  command = plan

  variables {
    sweeper = { max_items = 10001 }
  }

  expect_failures = [var.sweeper]
}

run "sweeper_memory_below_128_is_rejected" {
  command = plan

  variables {
    sweeper = { memory_size_mb = 127 }
  }

  expect_failures = [var.sweeper]
}

run "unknown_sweeper_log_level_is_rejected" {
  command = plan

  variables {
    sweeper = { log_level = "TRACE" }
  }

  expect_failures = [var.sweeper]
}

run "ec2_and_lambda_alarm_actions_are_accepted" {
  command = plan

  variables {
    alarms = { actions = ["arn:aws:automate:eu-west-1:ec2:stop", "arn:aws:lambda:eu-west-1:111122223333:function:pager"] }
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.this["publisher_errors"].alarm_actions == toset(["arn:aws:automate:eu-west-1:ec2:stop", "arn:aws:lambda:eu-west-1:111122223333:function:pager"])
    error_message = "EC2 actions (account field \"ec2\") and Lambda functions are valid alarm actions."
  }
}


run "publisher_and_sweeper_on_the_ordered_path_may_query_a_partitions_pending_sequences_only" {
  command = plan

  variables {
    publish_to = "sns_fifo"
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  assert {
    condition = alltrue([
      for statements in [data.aws_iam_policy_document.sweeper[0].statement, data.aws_iam_policy_document.publisher.statement] : (
        one([for s in statements : s.actions if s.sid == "QueryPendingSequences"]) == toset(["dynamodb:Query"])
        && one([for s in statements : s.resources if s.sid == "QueryPendingSequences"]) == toset([local.table_arn])
        && { for c in one([for s in statements : s.condition if s.sid == "QueryPendingSequences"]) : c.variable => [c.test, toset(c.values)] } == {
          "dynamodb:Attributes" = ["ForAllValues:StringEquals", toset(["PK", "SK", "outbox_subject", "outbox_sequence", "outbox_status", "outbox_pending_shard"])]
          "dynamodb:Select"     = ["StringEqualsIfExists", toset(["SPECIFIC_ATTRIBUTES"])]
        }
      )
    ])
    error_message = "On the ordered path the publisher and the sweeper may Query the table for the keys and the sequence attributes only (subject_sequences.py)."
  }

  assert {
    condition = (
      one([for s in data.aws_iam_policy_document.publisher.statement : s.actions if s.sid == "ReadLowerPendingSequences"]) == toset(["dynamodb:BatchGetItem"])
      && one([for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "ReadLowerPendingSequences"]) == toset([local.table_arn])
    )
    error_message = "On the ordered path the publisher reads a subject's lower pending events by key (BatchGetItem on the table) to send them first."
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_SWEEPER_ENABLED"] == "true"
    error_message = "The publisher is told a sweeper runs (OUTBOX_SWEEPER_ENABLED = sweeper.enabled)."
  }
}

run "without_a_sweeper_the_publisher_is_told_none_runs" {
  command = plan

  variables {
    publish_to = "sns_fifo"
    sweeper    = { enabled = false }
  }

  override_resource {
    target          = aws_sns_topic.this[0]
    override_during = plan
    values          = { arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo" }
  }

  assert {
    condition     = aws_lambda_function.publisher.environment[0].variables["OUTBOX_SWEEPER_ENABLED"] == "false"
    error_message = "With sweeper.enabled = false the publisher must never leave an event pending for a sweeper (OUTBOX_SWEEPER_ENABLED = \"false\")."
  }
}

run "publisher_and_sweeper_off_the_ordered_path_have_no_query_on_the_table" {
  command = plan

  assert {
    condition = length([
      for s in concat(data.aws_iam_policy_document.sweeper[0].statement, data.aws_iam_policy_document.publisher.statement) : s if contains(["QueryPendingSequences", "ReadLowerPendingSequences"], s.sid)
    ]) == 0
    error_message = "Without publish_to = \"sns_fifo\" neither the publisher nor the sweeper reads a partition of the table."
  }
}
