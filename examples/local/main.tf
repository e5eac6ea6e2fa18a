# Deploys the module to a local AWS emulator (a moto server): no account, no
# credentials, no network beyond loopback. tests/terraform/test_apply_local.py
# applies it once per test session and checks the live resources with boto3.

provider "aws" {
  region     = var.region
  access_key = "test"
  secret_key = "test"

  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  s3_use_path_style           = true

  # Every service the module (and its later parts: sweeper schedule, SNS variant,
  # alarms) calls. The provider has no separate DynamoDB Streams endpoint: it
  # reads stream settings through the DynamoDB API.
  endpoints {
    cloudwatch = var.endpoint_url
    dynamodb   = var.endpoint_url
    events     = var.endpoint_url
    iam        = var.endpoint_url
    kms        = var.endpoint_url
    lambda     = var.endpoint_url
    logs       = var.endpoint_url
    scheduler  = var.endpoint_url
    sns        = var.endpoint_url
    sqs        = var.endpoint_url
    sts        = var.endpoint_url
  }
}

module "outbox" {
  source = "../.."

  name = var.name
  tags = {
    Environment = "local"
  }

  # moto rejects layer ARNs it does not know: deploy without the Powertools layer.
  powertools_layer_arn = ""

  # So that the test session can destroy what it applied.
  table = {
    deletion_protection_enabled = false
  }

  log_retention_days = 7

  # One consumer, the bundled reference consumer: its queue and DLQ are the only
  # queues besides the on-failure queue and the bus's DLQ (each queue costs ~30 s
  # of apply time).
  # moto holds its SQS mapping ENABLED and, as long as it does, receives the
  # queue's messages itself: the local runtime and the apply test disable it
  # through the Lambda API before they send anything.
  # The same queues on the ordered path: FIFO topic and FIFO queue + DLQ.
  publish_to = var.publish_to
  consumers = {
    for key in var.consumer_keys : key => var.publish_to == "eventbridge" ? {
      event_pattern = jsonencode({ source = [var.event_source] })
      filter_policy = null
      } : {
      event_pattern = null
      filter_policy = jsonencode({ source = [var.event_source] })
    }
  }

  acknowledged_changes = var.acknowledged_changes
}
