# One customer key (var.kms_key_arn) encrypts everything the module stores:
# both tables, every queue, the bus or the topic, the log groups and the
# functions' environment variables; the roles may use exactly that key. Without
# a key, AWS managed or owned encryption, and no KMS statement in any role.
# docs/kms.md lists what the key policy must allow.

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

# The postconditions compare these ARNs with the ones the policies were built from.
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
  target          = aws_cloudwatch_log_group.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-audit-consumer"
  }
}

variables {
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms      = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name        = "orders-outbox"
  kms_key_arn = "arn:aws:kms:eu-west-1:111122223333:key/0d9f4e56-1111-2222-3333-444455556666"
  consumers = {
    audit = {
      event_pattern = "{\"source\":[\"orders\"]}"
    }
  }
}

run "eventbridge_every_resource_gets_the_key" {
  command = plan

  assert {
    condition = (
      aws_dynamodb_table.this[0].server_side_encryption[0].kms_key_arn == var.kms_key_arn
      && aws_dynamodb_table.idempotency[0].server_side_encryption[0].kms_key_arn == var.kms_key_arn
    )
    error_message = "Both tables must be encrypted with the key."
  }

  assert {
    condition = (
      aws_sqs_queue.on_failure.kms_master_key_id == var.kms_key_arn
      && aws_sqs_queue.consumer["audit"].kms_master_key_id == var.kms_key_arn
      && aws_sqs_queue.consumer_dlq["audit"].kms_master_key_id == var.kms_key_arn
    )
    error_message = "The on-failure queue, the consumer queue and its DLQ must be encrypted with the key."
  }

  assert {
    condition     = aws_cloudwatch_event_bus.this[0].kms_key_identifier == var.kms_key_arn
    error_message = "The event bus must be encrypted with the key."
  }

  assert {
    condition     = aws_sqs_queue.event_bus_dlq[0].kms_master_key_id == null && aws_sqs_queue.event_bus_dlq[0].sqs_managed_sse_enabled == true
    error_message = "The bus's DLQ must not depend on the key it catches the failures of: SSE-SQS (docs/kms.md)."
  }

  assert {
    condition = (
      aws_cloudwatch_log_group.publisher.kms_key_id == var.kms_key_arn
      && aws_cloudwatch_log_group.sweeper[0].kms_key_id == var.kms_key_arn
      && aws_cloudwatch_log_group.consumer["audit"].kms_key_id == var.kms_key_arn
    )
    error_message = "Every log group must be encrypted with the key."
  }

  assert {
    condition = (
      aws_lambda_function.publisher.kms_key_arn == var.kms_key_arn
      && aws_lambda_function.sweeper[0].kms_key_arn == var.kms_key_arn
      && aws_lambda_function.consumer["audit"].kms_key_arn == var.kms_key_arn
    )
    error_message = "Every function's environment must be encrypted with the key."
  }

  assert {
    condition = (
      [for s in data.aws_iam_policy_document.publisher.statement : s.resources if s.sid == "UseEncryptionKeys"][0] == toset([var.kms_key_arn])
      && [for s in data.aws_iam_policy_document.sweeper[0].statement : s.resources if s.sid == "UseEncryptionKeys"][0] == toset([var.kms_key_arn])
      && [for s in data.aws_iam_policy_document.consumer["audit"].statement : s.resources if s.sid == "DecryptQueueMessages"][0] == toset([var.kms_key_arn])
    )
    error_message = "The publisher, sweeper and consumer roles must be allowed to use exactly the key."
  }

  assert {
    condition = (
      { for c in one([for s in data.aws_iam_policy_document.publisher.statement : s.condition if s.sid == "UseEncryptionKeys"]) : "${c.test} ${c.variable}" => toset(c.values) } == {
        "StringEquals kms:ViaService" = toset(["dynamodb.eu-west-1.amazonaws.com", "sqs.eu-west-1.amazonaws.com", "lambda.eu-west-1.amazonaws.com"])
      }
      && { for c in one([for s in data.aws_iam_policy_document.sweeper[0].statement : s.condition if s.sid == "UseEncryptionKeys"]) : "${c.test} ${c.variable}" => toset(c.values) } == {
        "StringEquals kms:ViaService" = toset(["dynamodb.eu-west-1.amazonaws.com", "lambda.eu-west-1.amazonaws.com"])
      }
      && { for c in one([for s in data.aws_iam_policy_document.consumer["audit"].statement : s.condition if s.sid == "DecryptQueueMessages"]) : "${c.test} ${c.variable}" => toset(c.values) } == {
        "StringEquals kms:ViaService" = toset(["sqs.eu-west-1.amazonaws.com", "lambda.eu-west-1.amazonaws.com"])
      }
    )
    error_message = "The roles may use the key only through the services that need it (kms:ViaService): DynamoDB, SQS and Lambda for the publisher, DynamoDB and Lambda for the sweeper (it sends to no queue), SQS and Lambda for a consumer."
  }
}

run "sns_topic_gets_the_key" {
  command = plan

  variables {
    publish_to = "sns"
    consumers = {
      audit = {
        filter_policy = "{\"source\":[\"orders\"]}"
      }
    }
  }

  assert {
    condition     = aws_sns_topic.this[0].kms_master_key_id == var.kms_key_arn
    error_message = "The topic must be encrypted with the key."
  }

  assert {
    condition = contains(
      one([for c in one([for s in data.aws_iam_policy_document.publisher.statement : s.condition if s.sid == "UseEncryptionKeys"]) : c.values if c.variable == "kms:ViaService"]),
      "sns.eu-west-1.amazonaws.com"
    )
    error_message = "With publish_to = \"sns\" the publisher may use the key through SNS (an encrypted topic) too."
  }

  assert {
    condition     = length(aws_cloudwatch_event_bus.this) == 0
    error_message = "No bus with publish_to = \"sns\"."
  }
}

run "no_key_means_aws_managed_encryption_and_no_kms_grants" {
  command = plan

  variables {
    kms_key_arn = null
  }

  assert {
    condition = (
      aws_cloudwatch_event_bus.this[0].kms_key_identifier == null
      && aws_lambda_function.publisher.kms_key_arn == null
      && aws_lambda_function.sweeper[0].kms_key_arn == null
      && aws_lambda_function.consumer["audit"].kms_key_arn == null
      && aws_sqs_queue.consumer["audit"].sqs_managed_sse_enabled == true
      && aws_dynamodb_table.this[0].server_side_encryption[0].enabled
    )
    error_message = "Without a key: AWS owned/managed keys for the bus, functions, queues and tables."
  }

  assert {
    condition = (
      length([for s in data.aws_iam_policy_document.publisher.statement : s if s.sid == "UseEncryptionKeys"]) == 0
      && length([for s in data.aws_iam_policy_document.sweeper[0].statement : s if s.sid == "UseEncryptionKeys"]) == 0
      && length([for s in data.aws_iam_policy_document.consumer["audit"].statement : s if s.sid == "DecryptQueueMessages"]) == 0
    )
    error_message = "Without a key no role gets a KMS statement."
  }
}
