# examples/complete's key policy, the one docs/kms.md points callers to: every
# service statement that uses the key is held to this stack (aws:SourceAccount
# and aws:SourceArn, or an encryption context naming the bus or the log
# groups), as AWS's EventBridge, SQS and CloudWatch Logs guides recommend.
# Without them any account's bus, rule or topic could use the key.

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

override_data {
  target = data.aws_caller_identity.current
  values = {
    account_id = "111122223333"
  }
}

# The module's postconditions compare these with the ARNs its policies were built from.
override_resource {
  target          = module.outbox.aws_sqs_queue.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = module.outbox.aws_sqs_queue.consumer_dlq["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer-dlq"
  }
}

override_resource {
  target          = module.outbox.aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

override_resource {
  target          = module.outbox.aws_cloudwatch_event_bus.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:event-bus/orders"
  }
}

override_resource {
  target          = module.outbox.aws_dynamodb_table.idempotency[0]
  override_during = plan
  values = {
    arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox-idempotency"
  }
}

# The module's postcondition compares the log group's ARN with the one its
# policy was built from (consumers.tf).
override_resource {
  target          = module.outbox.aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
  }
}

run "every_service_statement_that_uses_the_key_is_held_to_this_stack" {
  command = plan

  module {
    source = "./examples/complete"
  }

  # Someone to notify, or the module's alarms check fails the run.
  variables {
    alarm_actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"]
  }

  assert {
    condition = {
      for s in data.aws_iam_policy_document.kms.statement : s.sid => {
        for c in s.condition : "${c.test} ${c.variable}" => toset(c.values)
      } if s.sid != "AccountAdministersKey" && s.sid != "EventBridgeDescribesKey"
      } == {
      CloudWatchLogsUsesKey = {
        "ArnLike kms:EncryptionContext:aws:logs:arn" = toset(["arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-*"])
      }
      EventBridgeEncryptsBusEvents = {
        "StringEquals aws:SourceAccount"                              = toset(["111122223333"])
        "StringEquals kms:EncryptionContext:aws:events:event-bus:arn" = toset(["arn:aws:events:eu-west-1:111122223333:event-bus/orders"])
      }
      EventBridgeSendsToConsumerQueues = {
        "StringEquals aws:SourceAccount" = toset(["111122223333"])
        "ArnLike aws:SourceArn"          = toset(["arn:aws:events:eu-west-1:111122223333:rule/orders/orders-outbox-*-consumer"])
      }
      SNSSendsToConsumerQueues = {
        "StringEquals aws:SourceAccount" = toset(["111122223333"])
        "ArnEquals aws:SourceArn"        = toset(["arn:aws:sns:eu-west-1:111122223333:orders-outbox", "arn:aws:sns:eu-west-1:111122223333:orders-outbox.fifo"])
      }
    }
    error_message = "Each service statement that can use the key must name this account and this stack's bus, rules, topic or log groups."
  }

  assert {
    condition = (
      one([for s in data.aws_iam_policy_document.kms.statement : s.actions if s.sid == "EventBridgeDescribesKey"]) == toset(["kms:DescribeKey"])
      && length(one([for s in data.aws_iam_policy_document.kms.statement : s.condition if s.sid == "EventBridgeDescribesKey"])) == 0
    )
    error_message = "The only unconditioned service statement is EventBridge's DescribeKey (key metadata, no use of the key)."
  }

  assert {
    condition     = module.outbox.event_bus_name == "orders" && local.event_bus_arn == "arn:aws:events:eu-west-1:111122223333:event-bus/orders"
    error_message = "The key policy's bus ARN must be the bus the module creates."
  }
}
