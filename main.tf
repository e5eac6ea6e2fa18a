################################################################################
# Shared data
################################################################################

data "aws_partition" "current" {}

data "aws_region" "current" {}

locals {
  # The provider's region. hashicorp/aws 6.x gives the data source a `region`
  # attribute and deprecates `name` (6.0) and `id` (6.47.0,
  # hashicorp/terraform-provider-aws#48036); 5.x has no `region`. lookup() reads
  # an attribute without a static reference, so 5.x does not fail on `region`.
  # A conditional, not coalesce(): coalesce() carries the marks of every
  # argument to its result, so `id`'s deprecation mark would reach every ARN
  # built from the region on 6.x; a conditional keeps the chosen branch's only.
  region_from_6x = lookup(data.aws_region.current, "region", null)
  region_name    = local.region_from_6x != null ? local.region_from_6x : lookup(data.aws_region.current, "id", null)

  # hashicorp/aws 6.x, told by the `region` attribute only it has.
  provider_is_6x = local.region_from_6x != null

  # hashicorp/aws 5.x validates the runtime against a list that ends at
  # python3.13; python3.14 came with 6.20 (hashicorp/terraform-provider-aws#44984).
  lambda_runtime_needs_6x = tonumber(regex("^python3\\.([0-9]+)$", var.lambda_runtime)[0]) >= 14

  # Only active tracing makes the module's functions send segments (variables.tf).
  tracing_active = var.tracing_mode == "Active"

  # vpc_config: the module's functions in the caller's subnets (docs/vpc.md).
  vpc_enabled = var.vpc_config != null

  # The largest message every queue an event can end in takes (consumer queues,
  # their DLQs, the bus DLQ): the most hashicorp/aws 5.100 accepts as
  # max_message_size (SQS itself takes up to 1 MiB). The writer's and the
  # publisher's size limits are derived from the same figure,
  # dynamodb_outbox.sizes.QUEUE_MAX_MESSAGE_BYTES (docs/seams.md, "Sizes");
  # tests/terraform/test_terraform_static.py pins the agreement.
  queue_max_message_bytes = 262144
}

# The account id completes the ARNs of the consumer queues, which their own
# policies must name before the queues exist (see consumers.tf).
data "aws_caller_identity" "current" {}

################################################################################
# Names and tags
################################################################################

locals {
  # Every name the module derives lives here, so later parts (sweeper, consumers,
  # alarms) extend one list. `var.name` has at most 40 characters: the longest name
  # below is 61 characters (SQS allows 80), the Lambda function and IAM role names
  # are at most 57 (limit 64; EventBridge Scheduler schedule names too).
  table_name               = coalesce(local.table.name, var.name)
  event_bus_name           = coalesce(local.event_bus.name, var.name)
  event_bus_dlq_name       = "${var.name}-event-bus-dlq"
  publisher_name           = "${var.name}-publisher"
  publisher_log_group_name = "/aws/lambda/${local.publisher_name}"
  on_failure_queue_name    = "${var.name}-publisher-on-failure"
  sweeper_name             = "${var.name}-sweeper"
  sweeper_log_group_name   = "/aws/lambda/${local.sweeper_name}"
  sweeper_schedule_name    = "${var.name}-sweeper"
  sweeper_schedule_group   = "default"
  sweeper_scheduler_role   = "${var.name}-sweeper-schedule"
  # publish_to = "sns" or "sns_fifo": the topic takes the bus's place. FIFO topic
  # and queue names must end in ".fifo".
  fifo_suffix            = var.publish_to == "sns_fifo" ? ".fifo" : ""
  sns_topic_name         = "${var.name}${local.fifo_suffix}"
  idempotency_table_name = "${var.name}-idempotency"
  layer_name             = "${var.name}-dynamodb-outbox"

  # Per consumer key: queue, rule, function, role and log group "<name>-<key>-consumer",
  # DLQ "<name>-<key>-consumer-dlq". The suffix keeps keys clear of the publisher's and
  # sweeper's names and of another key's DLQ; at most 64 characters (checked on the queue).
  consumer_names = { for key in keys(local.consumers) : key => "${var.name}-${key}-consumer" }
  # The queues' names: the same, with ".fifo" on the ordered path (at most 73 of SQS's 80).
  consumer_queue_names = { for key, name in local.consumer_names : key => "${name}${local.fifo_suffix}" }
  consumer_dlq_names   = { for key, name in local.consumer_names : key => "${name}-dlq${local.fifo_suffix}" }

  tags = var.tags

  # IAM roles: the organisation's prefix (iam_role_name_prefix) before the derived
  # name, its path (iam_role_path) and tags (iam_role_tags, over `tags`). IAM
  # role names are at most 64 characters (IAM User Guide, "IAM object quotas":
  # "Role name: 64 characters"); each aws_iam_role checks its own name.
  iam_role_name_max_length   = 64
  publisher_role_name        = "${var.iam_role_name_prefix}${local.publisher_name}"
  sweeper_role_name          = "${var.iam_role_name_prefix}${local.sweeper_name}"
  sweeper_schedule_role_name = "${var.iam_role_name_prefix}${local.sweeper_scheduler_role}"
  consumer_role_names        = { for key, name in local.consumer_names : key => "${var.iam_role_name_prefix}${name}" }
  role_tags                  = merge(local.tags, var.iam_role_tags)
}

################################################################################
# Outbox contract
################################################################################

locals {
  # Outbox items share the entity's partition key and carry "OUTBOX#<ulid>" under
  # the sort key, whatever its name (lambda/dynamodb_outbox/table_keys.py, which
  # builds the same filter for tests). The stream mapping keeps only their INSERTs:
  # entity writes, quarantine updates and deletes of published items never reach
  # the publisher.
  outbox_sort_key_prefix = "OUTBOX#"
  partition_key          = local.table.partition_key
  sort_key               = local.table.sort_key

  stream_filter_pattern = jsonencode({
    eventName = ["INSERT"]
    dynamodb = {
      Keys = {
        (local.sort_key) = { S = [{ prefix = local.outbox_sort_key_prefix }] }
      }
    }
  })

  publisher_handler = "dynamodb_outbox.publisher.handler"
  sweeper_handler   = "dynamodb_outbox.sweeper.handler"

  # The sparse index the sweeper reads (see docs/decisions.md): only pending
  # outbox items carry the shard attribute, "00".."07", which the writer derives
  # from the ULID. The count is the package's (outbox_item.DEFAULT_PENDING_SHARDS),
  # not a setting: writer, sweeper and outbox-ops refuse any other.
  pending_index_name      = "outbox-pending"
  pending_index_hash_key  = "outbox_pending_shard"
  pending_index_range_key = local.sort_key

  # Reproducible deployment package, built by `make package` from lambda/ and
  # committed with the module.
  package_path = "${path.module}/package/dynamodb_outbox.zip"
  # The same files under python/, published as a Lambda layer (layer.tf).
  layer_package_path = "${path.module}/package/dynamodb_outbox_layer.zip"

  metrics_namespace = "DynamoDBOutbox"

  # What the publisher and sweeper may write in the application table
  # (dynamodb:Attributes conditions, publisher.tf and sweeper.tf): deletes carry
  # the key only; the quarantine update sets outbox_status, quarantine_reason and
  # quarantined_at, removes outbox_pending_shard and checks the sort key exists
  # (lambda/dynamodb_outbox/publisher.py, _quarantine;
  # tests/functional/test_settle_requests_match_policy.py holds the code to these lists).
  outbox_key_attributes = [local.partition_key, local.sort_key]

  # The key names, for the publisher and the sweeper (dynamodb_outbox.settings).
  table_keys_environment = {
    OUTBOX_PARTITION_KEY = local.partition_key
    OUTBOX_SORT_KEY      = local.sort_key
  }
  quarantine_attributes = ["outbox_status", "quarantine_reason", "quarantined_at", "outbox_pending_shard"]
  # What the publisher and sweeper may read of a partition on the ordered path,
  # besides the keys (publisher.tf, sweeper.tf; QUERY_ATTRIBUTES in
  # lambda/dynamodb_outbox/subject_sequences.py; tests/functional/test_sweeper_ordered.py
  # holds the code to this list).
  sequence_query_attributes = ["outbox_subject", "outbox_sequence", "outbox_status", "outbox_pending_shard"]
}

################################################################################
# Powertools layer
################################################################################

# With powertools_layer_arn = null, the public Powertools for AWS Lambda (Python)
# v3 layer of the release var.powertools_version, for the functions' region,
# runtime and architecture. Powertools publishes each layer version's ARN in SSM
# under /aws/service/powertools/python/<arch>/<runtime>/<version> (Powertools docs,
# "Lambda Layer", "Using SSM Parameter Store"). Not read when the caller gives the
# ARN, or "" for no layer (emulators do not hold AWS's public parameters), nor
# outside the commercial partition (the Powertools docs list the GovCloud and
# China layers by ARN only: publisher.tf's precondition asks for the ARN there).
data "aws_ssm_parameter" "powertools_layer" {
  count = var.powertools_layer_arn == null && data.aws_partition.current.partition == "aws" ? 1 : 0

  name = "/aws/service/powertools/python/${var.lambda_architecture}/${var.lambda_runtime}/${var.powertools_version}"
}

locals {
  # insecure_value: a public layer ARN, not a secret (`value` is always marked
  # sensitive, which would hide the layers in plans and the output).
  default_powertools_layer_arn = one(data.aws_ssm_parameter.powertools_layer[*].insecure_value)

  powertools_layer_arn = var.powertools_layer_arn == null ? local.default_powertools_layer_arn : var.powertools_layer_arn

  # The layers of the module's own functions, publisher and sweeper.
  function_layers = compact(concat([local.powertools_layer_arn], tolist(local.publisher.extra_layer_arns)))
}

################################################################################
# Lambda trust policy
################################################################################

# The trust policy of every function role the module creates: publisher,
# sweeper and consumers.
data "aws_iam_policy_document" "lambda_assume_role" {
  statement {
    sid     = "LambdaAssumeRole"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

################################################################################
# Encryption
################################################################################

locals {
  # The services through which a role may use the keys (kms:ViaService): the
  # tables and their stream (DynamoDB), the queues (SQS), the topic (SNS), and
  # Lambda, which decrypts the functions' environments.
  kms_via_dynamodb   = "dynamodb.${local.region_name}.amazonaws.com"
  kms_via_sqs        = "sqs.${local.region_name}.amazonaws.com"
  kms_via_sns        = "sns.${local.region_name}.amazonaws.com"
  kms_via_lambda     = "lambda.${local.region_name}.amazonaws.com"
  publishing_kms_via = compact([local.kms_via_dynamodb, local.kms_via_sqs, local.publish_to_sns ? local.kms_via_sns : "", local.kms_via_lambda])
  consumer_kms_via   = [local.kms_via_sqs, local.kms_via_lambda]
  # The sweeper sends to no queue: no SQS.
  sweeper_kms_via = compact([local.kms_via_dynamodb, local.publish_to_sns ? local.kms_via_sns : "", local.kms_via_lambda])

  # Keys the functions that publish (publisher, sweeper) must be able to use: the
  # module's key (table, queue) and, for an existing table, the customer managed
  # key that table is encrypted with.
  publishing_kms_key_arns = distinct(compact([
    var.kms_key_arn,
    local.existing_table_kms_key_arn,
  ]))
}

################################################################################
# Changes to a running stack
################################################################################

locals {
  # What holds events or messages, as modules/live-changes records it with each
  # raise of acknowledged_changes.serial and compares it with the record: a plan
  # that changes it without raising the serial stops, and one that would destroy
  # or empty any of it stops unless var.acknowledged_changes names the change.
  live_shape = {
    name       = var.name
    publish_to = var.publish_to
    # An existing table or bus is recorded by name too: moving to another one
    # strands the old table's pending items, or deletes the rules on the old bus
    # (a rule's event_bus_name forces a new rule) while events may still go there.
    table                        = local.table.create ? "${local.table_name} (${local.partition_key}, ${local.sort_key})" : "${local.table_name} (existing)"
    stream_view_type             = local.table.stream_view_type
    event_bus                    = local.publish_to_sns ? "none" : local.create_event_bus ? local.event_bus_name : "${local.event_bus_name} (existing)"
    event_archive                = local.create_event_archive
    event_archive_retention_days = local.create_event_archive ? local.event_archive.retention_days : 0
    idempotency_table            = local.create_idempotency_table
    consumers = {
      for key, c in local.consumers : key => {
        message_retention_seconds = c.message_retention_seconds
      }
    }
  }
}

module "live_changes" {
  source = "./modules/live-changes"

  shape        = local.live_shape
  sweeper      = local.sweeper.enabled
  acknowledged = var.acknowledged_changes
  now          = plantimestamp()
}

# The refusal: a precondition, so the plan stops before anything is applied.
resource "terraform_data" "live_changes" {
  input = module.live_changes.recorded_serial

  lifecycle {
    precondition {
      condition     = !module.live_changes.serial_out_of_step
      error_message = <<-EOT
        acknowledged_changes.serial ${module.live_changes.serial} is lower than the serial recorded by the last apply that raised it, or more than one above it: this plan would re-create the record of that apply and compare the stack with nothing.
        Set it back to the recorded serial (the `input` of terraform_data.live_changes in the state: terraform state show '<this module>.terraform_data.live_changes'), or to one above it when this apply records a change.
      EOT
    }

    precondition {
      condition     = length(module.live_changes.unrecorded) == 0
      error_message = <<-EOT
        This plan changes what the module records of the stack without recording it: ${join(", ", module.live_changes.unrecorded)}.
        Raise acknowledged_changes.serial by one, to ${module.live_changes.serial + 1}, so that this apply records the new shape and later plans compare with it (undoing an unrecorded addition, e.g. removing an added consumer, would otherwise not be refused). Nothing needs naming in acknowledged_changes.changes unless another message says so.
      EOT
    }

    precondition {
      condition     = length(module.live_changes.unacknowledged) == 0
      error_message = <<-EOT
        This plan would destroy or empty resources holding events or queued messages: ${join(", ", module.live_changes.unacknowledged)}.
        Each is refused until you name it. Follow its runbook in docs/live-changes.md (pause publishing, drain the queues), then name exactly these in acknowledged_changes.changes, ${jsonencode(module.live_changes.unacknowledged)}, with acknowledged_changes.serial one above the value of the last apply that acknowledged changes (${module.live_changes.serial} in this plan; if you raised it already for this change, keep it).
      EOT
    }
  }
}

check "acknowledged_changes_pending" {
  assert {
    condition     = length(module.live_changes.stale) == 0
    error_message = "acknowledged_changes.changes names changes that differ from nothing recorded: ${join(", ", module.live_changes.stale)}. Check their spelling against docs/live-changes.md, or remove them."
  }
}
