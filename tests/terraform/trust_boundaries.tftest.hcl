# Trust boundaries (docs/threat-model.md): who may put events on the bus, publish
# to or subscribe to the topic, and send to a consumer's queue and DLQ, decided
# per principal from the policies the module renders; and what consumers are
# told to expect. Run from the repository root:
#   terraform test -test-directory=tests/terraform -filter=tests/terraform/trust_boundaries.tftest.hcl
#
# The mock provider does not render policy JSON, so each run reads the policy
# documents' statements and evaluates them for a list of principals: an Allow
# statement admits a principal it names; the "NoOtherSender"/"NoOtherPublisher"
# Deny (ArnNotLike aws:PrincipalArn, and BoolIfExists aws:PrincipalIsAWSService
# false) refuses every IAM principal it does not list. The principals here are
# exact ARNs, so "listed" is plain membership. That evaluation reads only the
# exemption, so each run also pins every Deny statement whole (actions,
# principals, every condition with its values): a condition added to a Deny (an
# aws:PrincipalAccount that switches it off) or a wildcard slipped into its
# exemption fails the run. The one wildcard an exemption may hold is one the
# caller wrote into operator_principal_arns.

mock_provider "aws" {
  override_during = plan
  source          = "./tests/terraform/mocks"
}

override_resource {
  target          = aws_sqs_queue.event_bus_dlq[0]
  override_during = plan
  values = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-event-bus-dlq"
  }
}

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
  target          = aws_cloudwatch_event_rule.consumer["audit"]
  override_during = plan
  values = {
    arn = "arn:aws:events:eu-west-1:111122223333:rule/orders-outbox/orders-outbox-audit-consumer"
  }
}

override_resource {
  target          = aws_iam_role.publisher
  override_during = plan
  values = {
    arn = "arn:aws:iam::111122223333:role/orders-outbox-publisher"
  }
}

override_resource {
  target          = aws_iam_role.sweeper[0]
  override_during = plan
  values = {
    arn = "arn:aws:iam::111122223333:role/orders-outbox-sweeper"
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
  target          = aws_sns_topic.this[0]
  override_during = plan
  values = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
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
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
  consumers = {
    audit = {
      event_pattern = "{\"source\":[\"orders\"]}"
    }
  }
  operator_principal_arns = ["arn:aws:iam::111122223333:role/outbox-operator"]
}

################################################################################
# EventBridge: the bus and the consumer queues
################################################################################

run "only_the_publisher_and_sweeper_put_events_and_only_the_rule_sends_to_a_queue" {
  command = plan

  assert {
    condition = (
      aws_cloudwatch_event_bus_policy.this[0].event_bus_name == aws_cloudwatch_event_bus.this[0].name
      && aws_cloudwatch_event_bus_policy.this[0].policy == data.aws_iam_policy_document.event_bus[0].json
    )
    error_message = "The module's bus must carry the module's resource policy."
  }

  # Per principal: may it put events on the bus? Allowed = named by the Allow;
  # denied = an IAM principal the Deny does not exempt.
  assert {
    condition = {
      for p in [
        "arn:aws:iam::111122223333:role/orders-outbox-publisher",
        "arn:aws:iam::111122223333:role/orders-outbox-sweeper",
        "arn:aws:iam::111122223333:role/outbox-operator",
        "arn:aws:iam::111122223333:role/Administrator",
        "arn:aws:iam::111122223333:role/orders-outbox-audit-consumer",
        ] : p => {
        allowed = anytrue([for s in data.aws_iam_policy_document.event_bus[0].statement : s.effect != "Deny" && contains(flatten([for pr in s.principals : pr.identifiers]), p)])
        denied = anytrue([
          for s in data.aws_iam_policy_document.event_bus[0].statement : s.effect == "Deny"
          && s.actions == toset(["events:PutEvents"])
          && contains(flatten([for pr in s.principals : pr.identifiers]), "*")
          && !contains(flatten([for c in s.condition : c.values if c.test == "ArnNotLike" && c.variable == "aws:PrincipalArn"]), p)
        ])
      }
      } == {
      "arn:aws:iam::111122223333:role/orders-outbox-publisher"      = { allowed = true, denied = false }
      "arn:aws:iam::111122223333:role/orders-outbox-sweeper"        = { allowed = true, denied = false }
      "arn:aws:iam::111122223333:role/outbox-operator"              = { allowed = false, denied = false }
      "arn:aws:iam::111122223333:role/Administrator"                = { allowed = false, denied = true }
      "arn:aws:iam::111122223333:role/orders-outbox-audit-consumer" = { allowed = false, denied = true }
    }
    error_message = "Only the publisher and the sweeper may put events on the bus; operators are only exempt from the Deny; every other IAM principal (an administrator, a consumer) is denied."
  }

  assert {
    condition = alltrue([
      for s in data.aws_iam_policy_document.event_bus[0].statement : (
        s.resources == toset([aws_cloudwatch_event_bus.this[0].arn])
        && (s.effect != "Deny" || { for c in s.condition : "${c.test} ${c.variable}" => c.values if c.test == "BoolIfExists" } == { "BoolIfExists aws:PrincipalIsAWSService" = tolist(["false"]) })
      )
    ])
    error_message = "The bus policy names the bus only, and its Deny never applies to AWS service principals (EventBridge's own deliveries and replays)."
  }

  # Every Deny whole: a condition added, or an exemption widened, fails here.
  assert {
    condition = {
      for doc_key, doc in {
        bus   = data.aws_iam_policy_document.event_bus[0]
        queue = data.aws_iam_policy_document.consumer_queue["audit"]
        dlq   = data.aws_iam_policy_document.consumer_dlq["audit"]
        } : doc_key => {
        for s in doc.statement : s.sid => {
          actions    = s.actions
          principals = [for pr in s.principals : "${pr.type} ${join(",", sort(pr.identifiers))}"]
          conditions = { for c in s.condition : "${c.test} ${c.variable}" => toset(c.values) }
        } if s.effect == "Deny"
      }
      } == {
      bus = {
        NoOtherSender = {
          actions    = toset(["events:PutEvents"])
          principals = ["* *"]
          conditions = {
            "ArnNotLike aws:PrincipalArn" = toset([
              "arn:aws:iam::111122223333:role/orders-outbox-publisher",
              "arn:aws:iam::111122223333:role/orders-outbox-sweeper",
              "arn:aws:iam::111122223333:role/outbox-operator",
            ])
            "BoolIfExists aws:PrincipalIsAWSService" = toset(["false"])
          }
        }
      }
      queue = {
        NoOtherSender = {
          actions    = toset(["sqs:SendMessage"])
          principals = ["* *"]
          conditions = {
            "ArnNotLike aws:PrincipalArn"            = toset(["arn:aws:iam::111122223333:role/outbox-operator"])
            "BoolIfExists aws:PrincipalIsAWSService" = toset(["false"])
          }
        }
      }
      dlq = {
        NoOtherSender = {
          actions    = toset(["sqs:SendMessage"])
          principals = ["* *"]
          conditions = {
            "BoolIfExists aws:PrincipalIsAWSService" = toset(["false"])
          }
        }
      }
    }
    error_message = "Each Deny of the bus, queue and DLQ policies must be exactly: every principal, its one action, exempting only the listed roles (and AWS services); no other condition."
  }

  assert {
    condition = alltrue(flatten([
      for doc in [data.aws_iam_policy_document.event_bus[0], data.aws_iam_policy_document.consumer_queue["audit"], data.aws_iam_policy_document.consumer_dlq["audit"]] : [
        for s in doc.statement : [
          for c in s.condition : [
            for v in c.values : length(regexall("[*?]", v)) == 0 || contains(var.operator_principal_arns, v)
          ] if c.variable == "aws:PrincipalArn"
        ] if s.effect == "Deny"
      ]
    ]))
    error_message = "A Deny's exemption may hold a wildcard only where the caller wrote it into operator_principal_arns."
  }

  # Per principal: may it send to the consumer's queue, to its DLQ?
  assert {
    condition = {
      for doc_key, doc in {
        queue = data.aws_iam_policy_document.consumer_queue["audit"]
        dlq   = data.aws_iam_policy_document.consumer_dlq["audit"]
        } : doc_key => {
        for p in [
          "arn:aws:iam::111122223333:role/outbox-operator",
          "arn:aws:iam::111122223333:role/orders-outbox-publisher",
          "arn:aws:iam::111122223333:role/Administrator",
          ] : p => anytrue([
            for s in doc.statement : s.effect == "Deny"
            && s.actions == toset(["sqs:SendMessage"])
            && contains(flatten([for pr in s.principals : pr.identifiers]), "*")
            && !contains(flatten([for c in s.condition : c.values if c.test == "ArnNotLike" && c.variable == "aws:PrincipalArn"]), p)
        ])
      }
      } == {
      queue = {
        "arn:aws:iam::111122223333:role/outbox-operator"         = false
        "arn:aws:iam::111122223333:role/orders-outbox-publisher" = true
        "arn:aws:iam::111122223333:role/Administrator"           = true
      }
      dlq = {
        "arn:aws:iam::111122223333:role/outbox-operator"         = true
        "arn:aws:iam::111122223333:role/orders-outbox-publisher" = true
        "arn:aws:iam::111122223333:role/Administrator"           = true
      }
    }
    error_message = "No IAM principal may send to a consumer queue but the operators (outbox-ops redrive), and none at all to its DLQ."
  }

  assert {
    condition = alltrue([
      for doc in [data.aws_iam_policy_document.consumer_queue["audit"], data.aws_iam_policy_document.consumer_dlq["audit"]] : alltrue([
        for s in doc.statement : s.effect == "Deny" ? (
          { for c in s.condition : "${c.test} ${c.variable}" => c.values if c.test == "BoolIfExists" } == { "BoolIfExists aws:PrincipalIsAWSService" = tolist(["false"]) }
          ) : (
          flatten([for pr in s.principals : pr.identifiers]) == ["events.amazonaws.com"]
          && flatten([for c in s.condition : c.values if c.variable == "aws:SourceArn"]) == [aws_cloudwatch_event_rule.consumer["audit"].arn]
        )
      ])
    ])
    error_message = "The one AWS service admitted to a consumer's queue and DLQ is EventBridge for the consumer's own rule (aws:SourceArn); the Deny leaves service principals to that Allow."
  }

  assert {
    condition = (
      aws_sqs_queue.consumer["audit"].policy == data.aws_iam_policy_document.consumer_queue["audit"].json
      && aws_sqs_queue.consumer_dlq["audit"].policy == data.aws_iam_policy_document.consumer_dlq["audit"].json
    )
    error_message = "The queue and DLQ policies must be set on the queues."
  }

  # What the consumers are told to expect (dynamodb_outbox.sender_checks).
  assert {
    condition = (
      tomap({ for k, v in output.consumer_environment : k => v if k != "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS" }) == tomap({
        OUTBOX_CONSUMER_TRANSPORT     = "eventbridge"
        OUTBOX_CONSUMER_EVENT_BUS_ARN = "arn:aws:events:eu-west-1:111122223333:event-bus/orders-outbox"
      })
      && alltrue([for k, v in output.consumer_environment : aws_lambda_function.consumer["audit"].environment[0].variables[k] == v if k != "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"])
    )
    error_message = "The reference consumer must be told the transport and the bus its messages come from, and consumer_environment must give callers the same."
  }

  assert {
    condition = (
      aws_cloudwatch_metric_alarm.this["consumer_untrusted_events/audit"].metric_name == "UntrustedEvents"
      && aws_cloudwatch_metric_alarm.this["consumer_untrusted_events/audit"].namespace == "DynamoDBOutbox"
      && aws_cloudwatch_metric_alarm.this["consumer_untrusted_events/audit"].dimensions == tomap({ service = "orders-outbox-audit" })
      && aws_cloudwatch_metric_alarm.this["consumer_untrusted_events/audit"].threshold == 0
    )
    error_message = "A reference consumer refusing a message must raise its untrusted-events alarm."
  }

  assert {
    condition     = alltrue([for s in data.aws_iam_policy_document.publisher.statement : !contains(s.actions, "dynamodb:ListStreams")])
    error_message = "dynamodb:ListStreams has no resource type: scoped to the stream it grants nothing, so the publisher is not given it."
  }
}

run "without_operators_no_iam_principal_sends_to_a_consumer_queue" {
  command = plan

  variables {
    operator_principal_arns = []
  }

  assert {
    condition = alltrue([
      for s in data.aws_iam_policy_document.consumer_queue["audit"].statement : length([for c in s.condition : c if c.variable == "aws:PrincipalArn"]) == 0 if s.effect == "Deny"
    ])
    error_message = "With no operator_principal_arns the queue's Deny exempts no IAM principal."
  }

  assert {
    condition     = flatten([for s in data.aws_iam_policy_document.event_bus[0].statement : [for c in s.condition : c.values if c.variable == "aws:PrincipalArn"]]) == ["arn:aws:iam::111122223333:role/orders-outbox-publisher", "arn:aws:iam::111122223333:role/orders-outbox-sweeper"]
    error_message = "With no operators, only the publisher and the sweeper are exempt from the bus's Deny."
  }
}

run "without_operators_only_the_publisher_and_sweeper_are_exempt_from_the_topic_deny" {
  command = plan

  variables {
    publish_to              = "sns"
    operator_principal_arns = []
    consumers = {
      audit = {
        filter_policy = "{\"source\":[\"orders\"]}"
      }
    }
  }

  assert {
    condition     = flatten([for s in data.aws_iam_policy_document.sns_topic[0].statement : [for c in s.condition : c.values if c.variable == "aws:PrincipalArn"] if s.sid == "NoOtherPublisher"]) == ["arn:aws:iam::111122223333:role/orders-outbox-publisher", "arn:aws:iam::111122223333:role/orders-outbox-sweeper"]
    error_message = "With no operators, only the publisher and the sweeper are exempt from the topic's publish Deny."
  }
}

run "an_existing_bus_keeps_its_owner_policy_and_consumers_expect_it" {
  command = plan

  variables {
    event_bus = { create = false, name = "shared" }
  }

  assert {
    condition = (
      length(aws_cloudwatch_event_bus_policy.this) == 0
      && output.consumer_environment["OUTBOX_CONSUMER_EVENT_BUS_ARN"] == "arn:aws:events:eu-west-1:111122223333:event-bus/shared"
    )
    error_message = "The module must not overwrite an existing bus's policy, and its consumers must expect that bus."
  }
}

run "operator_principal_arns_must_be_iam_role_or_user_arns" {
  command = plan

  variables {
    operator_principal_arns = ["arn:aws:iam::111122223333:role/ok", "outbox-operator"]
  }

  expect_failures = [var.operator_principal_arns]
}

################################################################################
# SNS: the topic
################################################################################

run "only_the_publisher_and_sweeper_publish_and_only_the_queues_subscribe" {
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
    condition = (
      aws_sns_topic_policy.this[0].arn == aws_sns_topic.this[0].arn
      && aws_sns_topic_policy.this[0].policy == data.aws_iam_policy_document.sns_topic[0].json
    )
    error_message = "The topic must carry the module's policy, replacing SNS's default one."
  }

  assert {
    condition = {
      for p in [
        "arn:aws:iam::111122223333:role/orders-outbox-publisher",
        "arn:aws:iam::111122223333:role/orders-outbox-sweeper",
        "arn:aws:iam::111122223333:role/outbox-operator",
        "arn:aws:iam::111122223333:role/Administrator",
        ] : p => {
        allowed = anytrue([for s in data.aws_iam_policy_document.sns_topic[0].statement : s.effect != "Deny" && contains(s.actions, "sns:Publish") && contains(flatten([for pr in s.principals : pr.identifiers]), p)])
        denied = anytrue([
          for s in data.aws_iam_policy_document.sns_topic[0].statement : s.effect == "Deny"
          && s.actions == toset(["sns:Publish"])
          && contains(flatten([for pr in s.principals : pr.identifiers]), "*")
          && !contains(flatten([for c in s.condition : c.values if c.test == "ArnNotLike" && c.variable == "aws:PrincipalArn"]), p)
        ])
      }
      } == {
      "arn:aws:iam::111122223333:role/orders-outbox-publisher" = { allowed = true, denied = false }
      "arn:aws:iam::111122223333:role/orders-outbox-sweeper"   = { allowed = true, denied = false }
      "arn:aws:iam::111122223333:role/outbox-operator"         = { allowed = false, denied = false }
      "arn:aws:iam::111122223333:role/Administrator"           = { allowed = false, denied = true }
    }
    error_message = "Only the publisher and the sweeper may publish to the topic; operators (outbox-ops replay-failures, release --publish-now) are only exempt from the Deny; every other IAM principal, administrators included, is denied."
  }

  # Every Deny whole: a condition added, or an exemption widened, fails here.
  assert {
    condition = {
      for s in data.aws_iam_policy_document.sns_topic[0].statement : s.sid => {
        actions    = s.actions
        principals = [for pr in s.principals : "${pr.type} ${join(",", sort(pr.identifiers))}"]
        conditions = { for c in s.condition : "${c.test} ${c.variable}" => toset(c.values) }
      } if s.effect == "Deny"
      } == {
      NoOtherPublisher = {
        actions    = toset(["sns:Publish"])
        principals = ["* *"]
        conditions = {
          "ArnNotLike aws:PrincipalArn" = toset([
            "arn:aws:iam::111122223333:role/orders-outbox-publisher",
            "arn:aws:iam::111122223333:role/orders-outbox-sweeper",
            "arn:aws:iam::111122223333:role/outbox-operator",
          ])
          "BoolIfExists aws:PrincipalIsAWSService" = toset(["false"])
        }
      }
      SubscribeOnlyQueues = {
        actions    = toset(["sns:Subscribe"])
        principals = ["* *"]
        conditions = { "StringNotEquals sns:Protocol" = toset(["sqs"]) }
      }
      SubscribeOnlyOutboxQueues = {
        actions    = toset(["sns:Subscribe"])
        principals = ["* *"]
        conditions = { "StringNotEquals sns:Endpoint" = toset(["arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"]) }
      }
    }
    error_message = "Each Deny of the topic policy must be exactly: every principal, its one action, exempting only the listed roles (and AWS services) or the module's sqs endpoints; no other condition."
  }

  assert {
    condition = alltrue(flatten([
      for s in data.aws_iam_policy_document.sns_topic[0].statement : [
        for c in s.condition : [
          for v in c.values : length(regexall("[*?]", v)) == 0 || contains(var.operator_principal_arns, v)
        ] if c.variable == "aws:PrincipalArn" || c.variable == "sns:Endpoint"
      ] if s.effect == "Deny"
    ]))
    error_message = "A Deny's exemption may hold a wildcard only where the caller wrote it into operator_principal_arns."
  }

  # Subscribe: denied unless the protocol is sqs AND the endpoint one of the module's queues.
  assert {
    condition = {
      for s in data.aws_iam_policy_document.sns_topic[0].statement : s.sid => {
        for c in s.condition : "${c.test} ${c.variable}" => toset(c.values)
      } if s.effect == "Deny" && s.actions == toset(["sns:Subscribe"])
      } == {
      SubscribeOnlyQueues       = { "StringNotEquals sns:Protocol" = toset(["sqs"]) }
      SubscribeOnlyOutboxQueues = { "StringNotEquals sns:Endpoint" = toset(["arn:aws:sqs:eu-west-1:111122223333:orders-outbox-audit-consumer"]) }
    }
    error_message = "Subscriptions must be denied to any protocol but sqs and any endpoint but the module's consumer queues."
  }

  # No statement of the topic's policy allows "*": administration is the account's
  # (IAM decides), publishing the two roles'.
  assert {
    condition = alltrue([
      for s in data.aws_iam_policy_document.sns_topic[0].statement : (
        s.resources == toset([aws_sns_topic.this[0].arn])
        && (s.effect == "Deny" || !contains(flatten([for pr in s.principals : pr.identifiers]), "*"))
      )
    ])
    error_message = "No Allow statement of the topic's policy may name \"*\"; every statement names the topic."
  }

  assert {
    condition = (
      flatten([for s in data.aws_iam_policy_document.sns_topic[0].statement : [for pr in s.principals : pr.identifiers] if s.sid == "AccountAdministers"]) == ["arn:aws:iam::111122223333:root"]
      && !contains(flatten([for s in data.aws_iam_policy_document.sns_topic[0].statement : s.actions if s.effect != "Deny" && s.sid == "AccountAdministers"]), "sns:Subscribe")
    )
    error_message = "Administration (attributes, permissions, deletion) is left to the account's IAM policies, and grants no Subscribe."
  }

  assert {
    condition = tomap({ for k, v in output.consumer_environment : k => v if k != "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS" }) == tomap({
      OUTBOX_CONSUMER_TRANSPORT = "sns"
      OUTBOX_CONSUMER_TOPIC_ARN = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
    })
    error_message = "Consumers on the SNS path must be told the topic."
  }
}

run "a_topic_without_consumers_takes_no_subscription" {
  command = plan

  variables {
    publish_to = "sns"
    consumers  = {}
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.sns_topic[0].statement : length(s.condition) if s.sid == "SubscribeOnlyOutboxQueues"] == [0]
    error_message = "Without consumers, the topic denies every subscription."
  }
}
