# Inputs holding a value known only after apply: the ARN of a function or a
# topic created in the same configuration, as examples/sns, examples/sns_fifo
# and docs/operations.md write them. The mock provider here generates computed
# values at apply only (no override_during = plan), so at plan they are
# unknown, as on a first apply against AWS. docs/decisions.md ("Object inputs
# are typed any"): "a value known only after apply ... must leave the others
# known", or every `count` and `for_each` that reads them fails the plan with
# "Invalid count argument" / "Invalid for_each argument".

mock_provider "aws" {
  source = "./tests/terraform/mocks"
}

run "a_consumer_function_created_in_the_same_apply_plans" {
  command = plan

  module {
    source = "./tests/terraform/fixtures/caller_function"
  }

  assert {
    condition     = toset(output.consumer_keys) == toset(["audit", "billing"])
    error_message = "Both consumers must be planned."
  }
}

run "a_consumer_function_created_in_the_same_apply_plans_on_sns_fifo" {
  command = plan

  module {
    source = "./tests/terraform/fixtures/caller_function"
  }

  variables {
    publish_to       = "sns_fifo"
    billing_function = { role_name = "orders-outbox-billing", uses_toolkit = false }
  }

  assert {
    condition     = toset(output.consumer_keys) == toset(["audit", "billing"])
    error_message = "Both consumers must be planned."
  }
}

run "a_consumer_function_without_role_name_created_in_the_same_apply_plans" {
  command = plan

  module {
    source = "./tests/terraform/fixtures/caller_function"
  }

  variables {
    billing_function = {}
  }

  assert {
    condition     = toset(output.consumer_keys) == toset(["audit", "billing"])
    error_message = "Both consumers must be planned."
  }
}

# docs/operations.md's alarms: actions = [aws_sns_topic.oncall.arn]. The
# module's check that someone is notified must still see one action.
run "alarm_actions_from_a_topic_created_in_the_same_apply_plan" {
  command = plan

  module {
    source = "./tests/terraform/fixtures/alarm_topic"
  }

  assert {
    condition     = contains(keys(output.alarm_arns), "publisher_errors")
    error_message = "The publisher_errors alarm must be planned."
  }
}

# A caller's typed variables passed through: every attribute present, null
# where not set, so each takes the module's default (as optional() did).
run "a_callers_typed_objects_with_null_attributes_plan" {
  command = plan

  module {
    source = "./tests/terraform/fixtures/typed_caller"
  }

  variables {
    consumers = {
      audit = { event_pattern = "{\"source\":[\"orders\"]}" }
      billing = {
        event_pattern       = "{\"source\":[\"orders\"]}"
        function            = { arn = "arn:aws:lambda:eu-west-1:111122223333:function:billing" }
        maximum_concurrency = 5
      }
    }
    alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  }

  assert {
    condition     = toset(output.consumer_keys) == toset(["audit", "billing"]) && contains(output.alarm_keys, "sweeper_errors") && contains(output.alarm_keys, "consumer_errors/billing")
    error_message = "Null attributes must take the defaults: both consumers, the sweeper (enabled) and every alarm."
  }
}
