# Which Powertools layer the functions run: the release powertools_version
# looked up in AWS's public SSM parameters, an explicit ARN without any lookup,
# or none. tests/terraform/test_powertools_version.py keeps the default equal to
# the release the Python tests run with.

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

# The reference consumer's queue, DLQ and idempotency table, whose ARNs the
# module builds from their names and checks in postconditions (consumers.tf).
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
  # Someone to notify: with no alarms.actions the alarms' check block
  # (alarms.tf) fails, which terraform test reports as an error.
  alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }
  name   = "orders-outbox"
  consumers = {
    audit = { event_pattern = "{\"source\":[\"orders\"]}" }
  }
}

run "default_version_resolves_through_ssm" {
  command = plan

  override_data {
    target = data.aws_ssm_parameter.powertools_layer[0]
    values = {
      insecure_value = "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:41"
    }
  }

  assert {
    condition     = length(data.aws_ssm_parameter.powertools_layer) == 1 && data.aws_ssm_parameter.powertools_layer[0].name == "/aws/service/powertools/python/arm64/python3.13/${var.powertools_version}"
    error_message = "With powertools_layer_arn = null the layer must be read from /aws/service/powertools/python/<arch>/<runtime>/<powertools_version>."
  }

  assert {
    condition = alltrue([
      aws_lambda_function.publisher.layers == tolist(["arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:41"]),
      aws_lambda_function.sweeper[0].layers == aws_lambda_function.publisher.layers,
      aws_lambda_function.consumer["audit"].layers == aws_lambda_function.publisher.layers,
    ])
    error_message = "The publisher, the sweeper and the reference consumer must run the layer the SSM parameter names."
  }

  assert {
    condition     = output.powertools_layer_arn == "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:41"
    error_message = "The powertools_layer_arn output must be the ARN read from SSM."
  }
}

run "another_version_reads_its_own_parameter" {
  command = plan

  variables {
    powertools_version  = "3.20.0"
    lambda_architecture = "x86_64"
  }

  assert {
    condition     = data.aws_ssm_parameter.powertools_layer[0].name == "/aws/service/powertools/python/x86_64/python3.13/3.20.0"
    error_message = "powertools_version and lambda_architecture must name the SSM parameter read."
  }
}

run "explicit_layer_arn_skips_ssm" {
  command = plan

  variables {
    powertools_layer_arn = "arn:aws:lambda:eu-west-1:111122223333:layer:PowertoolsCopy:3"
  }

  assert {
    condition     = length(data.aws_ssm_parameter.powertools_layer) == 0
    error_message = "An explicit powertools_layer_arn must not read SSM (emulators and private copies have no public parameter)."
  }

  assert {
    condition = alltrue([
      aws_lambda_function.publisher.layers == tolist(["arn:aws:lambda:eu-west-1:111122223333:layer:PowertoolsCopy:3"]),
      aws_lambda_function.consumer["audit"].layers == aws_lambda_function.publisher.layers,
      output.powertools_layer_arn == "arn:aws:lambda:eu-west-1:111122223333:layer:PowertoolsCopy:3",
    ])
    error_message = "The functions and the output must use the given layer ARN."
  }
}

run "empty_layer_arn_means_no_layer_and_no_lookup" {
  command = plan

  variables {
    powertools_layer_arn = ""
  }

  assert {
    condition     = length(data.aws_ssm_parameter.powertools_layer) == 0
    error_message = "powertools_layer_arn = \"\" must not read SSM (moto holds no Powertools parameter)."
  }

  assert {
    condition = alltrue([
      length(aws_lambda_function.publisher.layers) == 0,
      length(aws_lambda_function.sweeper[0].layers) == 0,
      length(aws_lambda_function.consumer["audit"].layers) == 0,
      output.powertools_layer_arn == null,
    ])
    error_message = "powertools_layer_arn = \"\" must deploy the functions without layers and give a null output."
  }
}

run "version_that_is_not_a_v3_release_is_rejected" {
  command = plan

  variables {
    powertools_version = "latest"
  }

  expect_failures = [var.powertools_version]
}

run "version_with_a_v_prefix_is_rejected" {
  command = plan

  variables {
    powertools_version = "v3.37.0"
  }

  expect_failures = [var.powertools_version]
}

run "v2_release_is_rejected" {
  command = plan

  variables {
    powertools_version = "2.43.1"
  }

  expect_failures = [var.powertools_version]
}
