# Values for the computed attributes the module reads, shared by every
# *.tftest.hcl file (mock_provider "aws" { source = "tests/terraform/mocks" }).
# Fixed, realistic ARNs make assertions and failure messages readable; runs
# override them where a test needs something else.

mock_data "aws_partition" {
  defaults = {
    partition  = "aws"
    dns_suffix = "amazonaws.com"
  }
}

# hashicorp/aws 5.x: `id` and `name` are the region (6.x adds `region`).
mock_data "aws_region" {
  defaults = {
    id   = "eu-west-1"
    name = "eu-west-1"
  }
}

mock_data "aws_caller_identity" {
  defaults = {
    account_id = "111122223333"
  }
}

mock_data "aws_iam_policy_document" {
  defaults = {
    json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
  }
}

# The public Powertools layer parameter (main.tf): the layer of the default
# runtime and architecture. The layer version is the mock's own, not the one
# SSM holds for the default powertools_version.
mock_data "aws_ssm_parameter" {
  defaults = {
    type           = "String"
    insecure_value = "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:40"
  }
}

mock_data "aws_dynamodb_table" {
  defaults = {
    arn              = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders"
    stream_arn       = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders/stream/2024-05-01T00:00:00.000"
    stream_enabled   = true
    stream_view_type = "NEW_IMAGE"
    hash_key         = "PK"
    range_key        = "SK"
    attribute = [
      { name = "PK", type = "S" },
      { name = "SK", type = "S" },
      { name = "outbox_pending_shard", type = "S" },
    ]
    # The sweeper's pending index, which the module requires on an existing table.
    global_secondary_index = [
      {
        name               = "outbox-pending"
        hash_key           = "outbox_pending_shard"
        range_key          = "SK"
        projection_type    = "KEYS_ONLY"
        non_key_attributes = []
        read_capacity      = 0
        write_capacity     = 0
      },
    ]
    billing_mode           = "PAY_PER_REQUEST"
    server_side_encryption = []
  }
}

mock_data "aws_cloudwatch_event_bus" {
  defaults = {
    arn = "arn:aws:events:eu-west-1:111122223333:event-bus/shared"
  }
}

mock_resource "aws_dynamodb_table" {
  defaults = {
    arn        = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox"
    stream_arn = "arn:aws:dynamodb:eu-west-1:111122223333:table/orders-outbox/stream/2024-05-01T00:00:00.000"
  }
}

mock_resource "aws_cloudwatch_event_bus" {
  defaults = {
    arn = "arn:aws:events:eu-west-1:111122223333:event-bus/orders-outbox"
  }
}

# The topic of publish_to = "sns" with name = "orders-outbox": its policy names
# the ARN built from the name, which the topic's postcondition compares with this.
mock_resource "aws_sns_topic" {
  defaults = {
    arn = "arn:aws:sns:eu-west-1:111122223333:orders-outbox"
  }
}

mock_resource "aws_sqs_queue" {
  defaults = {
    arn = "arn:aws:sqs:eu-west-1:111122223333:orders-outbox-publisher-on-failure"
    url = "https://sqs.eu-west-1.amazonaws.com/111122223333/orders-outbox-publisher-on-failure"
  }
}

mock_resource "aws_cloudwatch_log_group" {
  defaults = {
    arn = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/orders-outbox-publisher"
  }
}

mock_resource "aws_iam_role" {
  defaults = {
    arn = "arn:aws:iam::111122223333:role/orders-outbox-publisher"
  }
}

mock_resource "aws_lambda_function" {
  defaults = {
    arn = "arn:aws:lambda:eu-west-1:111122223333:function:orders-outbox-publisher"
  }
}

mock_resource "aws_lambda_event_source_mapping" {
  defaults = {
    uuid = "a1b2c3d4-5678-90ab-cdef-111122223333"
  }
}
