################################################################################
# General
################################################################################

variable "name" {
  description = <<-EOT
    Name of this outbox. Every resource name is derived from it: the table (unless
    `table.name` is set), the bus (unless `event_bus.name` is set), the publisher
    function and role `<name>-publisher`, its log group and the on-failure queue
    `<name>-publisher-on-failure`, the SNS topic `<name>` (publish_to = "sns"), the
    idempotency table `<name>-idempotency`, the layer `<name>-dynamodb-outbox`, and per
    consumer `<name>-<key>-consumer` (queue, rule, function, role) and
    `<name>-<key>-consumer-dlq`. 3 to 40 characters: lowercase letters, digits and
    hyphens, starting with a letter and not ending with a hyphen. IAM role names are
    global to the account: use a different name per region when deploying one
    outbox to several regions of the same account.
  EOT
  type        = string

  validation {
    # Upper bound: the longest name derived today is "<name>-publisher-on-failure"
    # (SQS limit 80) and the tightest limit is 64 (Lambda function and IAM role
    # "<name>-publisher"); 40 leaves room for the sweeper and per-consumer names
    # of later versions. Lower bound: DynamoDB table names need 3 characters.
    condition     = can(regex("^[a-z][a-z0-9-]{1,38}[a-z0-9]$", var.name))
    error_message = "The name must be 3 to 40 characters of lowercase letters, digits and hyphens, start with a letter and not end with a hyphen."
  }
}

variable "tags" {
  description = "Tags added to every resource the module creates that AWS lets you tag."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "kms_key_arn" {
  description = <<-EOT
    ARN of a customer managed KMS key that encrypts the table, the idempotency table,
    every queue (on-failure, consumer queues and DLQs; not the bus's DLQ, which stays on
    SSE-SQS so that it still works when this key fails), the event bus or the SNS topic, the
    functions' log groups and the functions' environment variables. null (default) uses AWS
    managed encryption: the `aws/dynamodb` key for the tables, SSE-SQS for the queues, an
    AWS owned key for the bus, `alias/aws/sns` for the topic, CloudWatch Logs' own
    encryption for the log groups, `aws/lambda` for the environments. The module does not
    own the key: its key policy must let these services use it (docs/kms.md lists them):
    - CloudWatch Logs (`logs.<region>.amazonaws.com`): the log groups;
    - with publish_to = "eventbridge": `events.amazonaws.com` needs `kms:DescribeKey`,
      `kms:GenerateDataKey` and `kms:Decrypt` for the bus, and the last two or EventBridge
      cannot send to the encrypted queues and every event ends up undelivered (the AWS
      managed `aws/sqs` key cannot be used by EventBridge at all, which is why the default
      is SSE-SQS);
    - with publish_to = "sns": `sns.amazonaws.com` needs the same two actions to deliver
      to the encrypted queues.
    The publisher and sweeper roles are granted `kms:Decrypt` and `kms:GenerateDataKey` on
    the key, the consumer roles `kms:Decrypt`.
    Not encrypted with it: the event archive (`event_archive`, on by default), which keeps
    full events under an AWS owned key whatever this input says (hashicorp/aws 5.x has no
    archive key argument); set `event_archive.enabled = false` if no event may rest under
    AWS's key.
  EOT
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null ? true : can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "The kms_key_arn must be null or a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key-id>); aliases are not accepted by every service that uses it."
  }
}

variable "iam_permissions_boundary_arn" {
  description = "ARN of an IAM managed policy set as the permissions boundary of every IAM role the module creates. null (default) sets none."
  type        = string
  default     = null

  validation {
    condition     = var.iam_permissions_boundary_arn == null ? true : can(regex("^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/.+$", var.iam_permissions_boundary_arn))
    error_message = "The iam_permissions_boundary_arn must be null or an IAM policy ARN (arn:<partition>:iam::<account>:policy/<name>)."
  }
}

variable "iam_role_path" {
  description = <<-EOF
    Path of every IAM role the module creates (publisher, sweeper, the sweeper's schedule,
    reference consumers), for organisations whose SCPs or permission boundaries allow roles
    under a path only, e.g. "/app/outbox/". Default "/". The path is part of the role's ARN,
    not of its name.
  EOF
  type        = string
  default     = "/"
  nullable    = false

  # IAM API Reference, CreateRole: Path is 1 to 512 characters, "/" alone or
  # starting and ending with "/", of printable ASCII (U+0021 to U+007E).
  validation {
    condition     = length(var.iam_role_path) <= 512 && can(regex("^/([!-~]*/)?$", var.iam_role_path))
    error_message = "The iam_role_path must be \"/\" or start and end with \"/\" (e.g. \"/app/outbox/\"), at most 512 printable ASCII characters without spaces; got \"${var.iam_role_path}\"."
  }
}

variable "iam_role_name_prefix" {
  description = <<-EOF
    Prepended to the name of every IAM role the module creates, for organisations whose SCPs
    allow role names with a prefix only: "acme-" gives `acme-<name>-publisher`,
    `acme-<name>-sweeper`, `acme-<name>-sweeper-schedule` and `acme-<name>-<key>-consumer`.
    Default "" (no prefix). Only the roles change: functions, queues and other resources keep
    their names. An IAM role name is at most 64 characters: plan fails, naming the role and
    its length, when the prefix makes one longer (the longest is the consumers'
    `<name>-<key>-consumer`, then `<name>-sweeper-schedule`, 17 characters more than `name`).
    Changing the prefix replaces the roles.
  EOF
  type        = string
  default     = ""
  nullable    = false

  # IAM role names: letters, digits and +=,.@_- (IAM API Reference, CreateRole).
  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{0,32}$", var.iam_role_name_prefix))
    error_message = "The iam_role_name_prefix must be at most 32 characters of letters, digits and +=,.@_- (what IAM allows in a role name); got \"${var.iam_role_name_prefix}\"."
  }
}

variable "iam_role_tags" {
  description = "Tags added to every IAM role the module creates, over `tags` (a key in both takes this value): for tag-based SCP or ABAC conditions on roles only."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "vpc_config" {
  description = <<-EOF
    Places the module's functions (publisher, sweeper, reference consumers) in a VPC. null
    (default): not in a VPC. Otherwise:
    - `subnet_ids`: 1 to 16 private subnet IDs, preferably one per Availability Zone.
    - `security_group_ids`: 1 to 5 security group IDs; the functions need outbound HTTPS
      (TCP 443) only, to the endpoints below, and no inbound rule.
    Their roles get the network-interface permissions of AWS's
    AWSLambdaVPCAccessExecutionRole (ec2:CreateNetworkInterface, ...; on "*", as there).
    The functions then reach AWS through the VPC: it needs a NAT gateway, or the endpoints
    docs/vpc.md lists (a DynamoDB gateway endpoint; interface endpoints for EventBridge or
    SNS and, with tracing_mode = "Active", X-Ray). Functions you bring
    (consumers.*.function) keep their own network settings.
  EOF
  type = object({
    subnet_ids         = list(string)
    security_group_ids = list(string)
  })
  default = null

  validation {
    condition     = var.vpc_config == null ? true : length(var.vpc_config.subnet_ids) >= 1 && length(var.vpc_config.subnet_ids) <= 16 && alltrue([for id in var.vpc_config.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", id))])
    error_message = "The vpc_config.subnet_ids must hold 1 to 16 subnet IDs (subnet-<hex>; Lambda's VpcConfig takes at most 16). Got ${try(length(var.vpc_config.subnet_ids), 0)}; malformed: ${try(join(", ", [for id in var.vpc_config.subnet_ids : "\"${id}\"" if !can(regex("^subnet-[0-9a-f]{8,17}$", id))]), "")}."
  }

  validation {
    condition     = var.vpc_config == null ? true : length(var.vpc_config.security_group_ids) >= 1 && length(var.vpc_config.security_group_ids) <= 5 && alltrue([for id in var.vpc_config.security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", id))])
    error_message = "The vpc_config.security_group_ids must hold 1 to 5 security group IDs (sg-<hex>; Lambda's VpcConfig takes at most 5). Got ${try(length(var.vpc_config.security_group_ids), 0)}; malformed: ${try(join(", ", [for id in var.vpc_config.security_group_ids : "\"${id}\"" if !can(regex("^sg-[0-9a-f]{8,17}$", id))]), "")}."
  }
}

################################################################################
# Table
################################################################################

variable "operator_principal_arns" {
  description = <<-EOT
    IAM principals (role or user ARNs; `*` wildcards allowed, as `ArnLike` reads them)
    that may put messages where only the outbox may otherwise: send to the consumer
    queues (`outbox-ops redrive`: SQS StartMessageMoveTask sends with its caller's
    permissions) and put events on the module's bus or publish to its topic
    (putting the bus DLQ's events back, `outbox-ops replay-failures`,
    `outbox-ops release --publish-now`). Every other IAM principal of the account,
    administrators included, is denied `sqs:SendMessage` on the consumer queues and
    DLQs, `events:PutEvents` on the bus and `sns:Publish` on the topic by their
    resource policies, whatever its IAM policies grant (docs/threat-model.md).
    An assumed role is named by its role ARN. Empty (default): nobody but the module.
  EOT
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for arn in var.operator_principal_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", arn))])
    error_message = "Every operator_principal_arns entry must be an IAM role or user ARN, arn:<partition>:iam::<account>:role/<name> (or user/<name>, with * wildcards allowed); invalid: ${join(", ", [for arn in var.operator_principal_arns : "\"${arn}\"" if !can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", arn))])}."
  }
}

variable "table" {
  description = <<-EOT
    The DynamoDB table holding entities and their outbox items (string partition and sort keys).
    - `create`: true (default) creates the table; false uses an existing table found by `name`.
      An existing table must have string keys named `partition_key`/`sort_key` and a stream
      with NEW_IMAGE or NEW_AND_OLD_IMAGES, or plan fails. The module then manages neither
      its settings nor its encryption.
    - `name`: table name; defaults to `var.name`. Required when `create` is false.
    - `partition_key`, `sort_key`: the key attribute names, default "PK" and "SK". An outbox
      item shares its entity's partition key and has sort key `OUTBOX#<event id>`. The
      publisher's stream filter, the pending index's sort key, the IAM conditions and the
      functions' environment (`OUTBOX_PARTITION_KEY`, `OUTBOX_SORT_KEY`) follow them; give
      the writer the same names (`OutboxWriter(..., partition_key=, sort_key=)`).
    The other attributes apply to a created table only:
    - `stream_view_type`: NEW_IMAGE (default) or NEW_AND_OLD_IMAGES.
    - `billing_mode`: PAY_PER_REQUEST (default) or PROVISIONED (then set `read_capacity`
      and `write_capacity`).
    - `deletion_protection_enabled`: default true (the outbox table only; the idempotency
      table has its own setting, `idempotency_table`). `terraform destroy` fails on a
      protected table: apply false first.
    - `ttl_attribute_name`: attribute holding the expiry time (epoch seconds), default
      "expires_at"; "" turns TTL off.
    Point-in-time recovery and server-side encryption are always on.
    Any other attribute is refused at plan, naming it (table.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.table_defaults, and the module reads it through them
  # (local.table, below). The other validations read it the same way, with
  # its defaults (`for table in [...]`).
  validation {
    condition     = can(keys(var.table)) && length(setsubtract(try(keys(var.table), []), keys(local.table_defaults))) == 0
    error_message = can(keys(var.table)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.table), keys(local.table_defaults)), []) : "table.${a}"])}: the table takes ${join(", ", keys(local.table_defaults))}." : "The table must be an object of ${join(", ", keys(local.table_defaults))}."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.create || table.name != null])
    error_message = "Set table.name to the existing table's name when table.create is false."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.name == null ? true : can(regex("^[A-Za-z0-9_.-]{3,255}$", table.name))])
    error_message = "The table.name must be 3 to 255 characters of letters, digits, underscores, hyphens and dots."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.partition_key != null && try(length(table.partition_key) >= 1 && length(table.partition_key) <= 255, false)])
    error_message = "The table.partition_key must be an attribute name of 1 to 255 characters (DynamoDB's limit for a key attribute)."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.sort_key != null && try(length(table.sort_key) >= 1 && length(table.sort_key) <= 255, false)])
    error_message = "The table.sort_key must be an attribute name of 1 to 255 characters (DynamoDB's limit for a key attribute)."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.partition_key != table.sort_key])
    error_message = "The table.partition_key and table.sort_key must differ: outbox items need a partition key and a separate sort key (OUTBOX#<event id>)."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : !contains(["envelope", "event_type", "outbox_status", "outbox_pending_shard", "quarantine_reason", "quarantined_at", "outbox_released_at"], table.partition_key)])
    error_message = "The table.partition_key must not be named like an attribute of every outbox item (envelope, event_type, outbox_status, outbox_pending_shard, quarantine_reason, quarantined_at, outbox_released_at)."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : !contains(["envelope", "event_type", "outbox_status", "outbox_pending_shard", "quarantine_reason", "quarantined_at", "outbox_released_at"], table.sort_key)])
    error_message = "The table.sort_key must not be named like an attribute of every outbox item (envelope, event_type, outbox_status, outbox_pending_shard, quarantine_reason, quarantined_at, outbox_released_at)."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : contains(["NEW_IMAGE", "NEW_AND_OLD_IMAGES"], table.stream_view_type)])
    error_message = "The table.stream_view_type must be NEW_IMAGE or NEW_AND_OLD_IMAGES: the publisher reads the event from the new image."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : contains(["PAY_PER_REQUEST", "PROVISIONED"], table.billing_mode)])
    error_message = "The table.billing_mode must be PAY_PER_REQUEST or PROVISIONED."
  }

  validation {
    condition = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : (
      table.billing_mode == "PAY_PER_REQUEST"
      ? table.read_capacity == null && table.write_capacity == null
      : (
        table.read_capacity != null && table.write_capacity != null
        ? table.read_capacity >= 1 && table.write_capacity >= 1 && floor(table.read_capacity) == table.read_capacity + 0 && floor(table.write_capacity) == table.write_capacity + 0
        : false
      )
    )])
    error_message = "With table.billing_mode PROVISIONED set table.read_capacity and table.write_capacity to whole numbers of at least 1; with PAY_PER_REQUEST leave both unset."
  }

  validation {
    condition     = alltrue([for table in [{ for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }] : table.ttl_attribute_name == "" || can(regex("^[A-Za-z0-9_.-]{1,255}$", table.ttl_attribute_name))])
    error_message = "The table.ttl_attribute_name must be \"\" (no TTL) or 1 to 255 characters of letters, digits, underscores, hyphens and dots."
  }
}

locals {
  # The attributes of var.table and their defaults (null: none): the one list
  # the input is checked against and read through.
  table_defaults = {
    create                      = true
    name                        = tostring(null)
    partition_key               = "PK"
    sort_key                    = "SK"
    stream_view_type            = "NEW_IMAGE"
    billing_mode                = "PAY_PER_REQUEST"
    read_capacity               = tonumber(null)
    write_capacity              = tonumber(null)
    deletion_protection_enabled = true
    ttl_attribute_name          = "expires_at"
  }

  # var.table with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  table = { for k, d in local.table_defaults : k => try(var.table[k] == null, true) ? d : var.table[k] }
}

################################################################################
# Event bus
################################################################################

variable "event_bus" {
  description = <<-EOT
    The EventBridge bus the publisher puts events on.
    - `create`: true (default) creates a bus, with a dead-letter queue `<name>-event-bus-dlq`
      for the events it cannot encrypt or decrypt with `kms_key_arn`; false uses an existing
      bus found by `name` (plan fails when it does not exist), whose DLQ is its owner's to set.
    - `name`: bus name; defaults to `var.name`. Required when `create` is false
      ("default" selects the account's default bus).
    Any other attribute is refused at plan, naming it (event_bus.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.event_bus_defaults, and the module reads it through them
  # (local.event_bus, below). The other validations read it the same way, with
  # its defaults (`for event_bus in [...]`).
  validation {
    condition     = can(keys(var.event_bus)) && length(setsubtract(try(keys(var.event_bus), []), keys(local.event_bus_defaults))) == 0
    error_message = can(keys(var.event_bus)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.event_bus), keys(local.event_bus_defaults)), []) : "event_bus.${a}"])}: the event_bus takes ${join(", ", keys(local.event_bus_defaults))}." : "The event_bus must be an object of ${join(", ", keys(local.event_bus_defaults))}."
  }

  validation {
    condition     = alltrue([for event_bus in [{ for k, d in local.event_bus_defaults : k => try(var.event_bus[k] == null, true) ? d : var.event_bus[k] }] : event_bus.create || event_bus.name != null])
    error_message = "Set event_bus.name to the existing bus's name when event_bus.create is false."
  }

  validation {
    condition     = alltrue([for event_bus in [{ for k, d in local.event_bus_defaults : k => try(var.event_bus[k] == null, true) ? d : var.event_bus[k] }] : event_bus.name == null ? true : can(regex("^[A-Za-z0-9._/-]{1,256}$", event_bus.name)) && !startswith(event_bus.name, "aws.")])
    error_message = "The event_bus.name must be 1 to 256 characters of letters, digits, dots, hyphens, underscores and slashes, and must not start with \"aws.\"."
  }

  validation {
    condition     = alltrue([for event_bus in [{ for k, d in local.event_bus_defaults : k => try(var.event_bus[k] == null, true) ? d : var.event_bus[k] }] : !(event_bus.create && event_bus.name == "default")])
    error_message = "The bus named \"default\" always exists: use event_bus = { create = false, name = \"default\" } to publish to it."
  }
}

locals {
  # The attributes of var.event_bus and their defaults (null: none): the one list
  # the input is checked against and read through.
  event_bus_defaults = {
    create = true
    name   = tostring(null)
  }

  # var.event_bus with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  event_bus = { for k, d in local.event_bus_defaults : k => try(var.event_bus[k] == null, true) ? d : var.event_bus[k] }
}

################################################################################
# Publishing target
################################################################################

variable "publish_to" {
  description = <<-EOT
    Where the publisher (and the sweeper) send events: "eventbridge" (default), "sns" or
    "sns_fifo" (the ordered path).
    - "eventbridge": `PutEvents` on the bus of `event_bus`; each consumer gets a rule
      (`consumers[*].event_pattern`) whose target is its queue.
    - "sns": `PublishBatch` on a topic the module creates, `<name>`, encrypted with
      `kms_key_arn` or the AWS managed `alias/aws/sns` key; no bus is created or read and
      `event_bus` is ignored. Each consumer's queue subscribes with raw message delivery and
      a filter policy (`consumers[*].filter_policy`) on the message attributes `event_type`
      and `source` the publisher sets on every message.
    - "sns_fifo": as "sns", with a FIFO topic `<name>.fifo` and FIFO consumer queues
      `<name>-<key>-consumer.fifo` (DLQs `<name>-<key>-consumer-dlq.fifo`), content-based
      deduplication off. Each event's message group is its envelope `subject` (the aggregate
      id) and its deduplication id the event id, so every consumer receives one subject's
      events in the order they were written (events with the same partition key and the same
      subject; README, "Guarantees"). The price: a topic's FIFO throughput quota, one
      in-flight batch per subject at each consumer, `stream_mapping.parallelization_factor`
      of 1, and consumer `batch_size` at most 10 with no batching window (all checked at plan).
  EOT
  type        = string
  default     = "eventbridge"
  nullable    = false

  validation {
    condition     = contains(["eventbridge", "sns", "sns_fifo"], var.publish_to)
    error_message = "The publish_to must be \"eventbridge\", \"sns\" or \"sns_fifo\" (SNS with a FIFO topic and queues: events ordered per subject)."
  }
}

################################################################################
# Changes to a running stack
################################################################################

variable "acknowledged_changes" {
  description = <<-EOT
    Changes to a running stack that destroy or empty something holding events or queued
    messages, which the plan refuses until they are named here (docs/live-changes.md gives
    each one's runbook; the refusal message lists the exact strings):
    - `publish_to=<new>`: switching transport deletes the bus with its rules, archive and
      DLQ (or the topic and subscriptions); to or from "sns_fifo" it also replaces every
      consumer queue and DLQ.
    - `name=<new>`: every resource is renamed, so replaced: queues, DLQs, bus, archive (and
      the table when its name is derived: `table=...` too).
    - `table=<name> (<partition key>, <sort key>)` or `table=<name> (existing)`: the created
      table is replaced (a new name or key) or no longer managed (`table.create = false`),
      or the stack moves to another existing table (the old one's pending items stranded).
    - `table.stream_view_type=<new>` with the sweeper off: a new stream; what the old one
      still holds is published only by the sweeper.
    - `event_bus=<name>` or `event_bus=<name> (existing)`: the created bus is replaced or no
      longer created, or the rules move off an existing bus.
    - `event_archive=disabled`, `event_archive.retention_days=<new>` (lower): archived events
      deleted.
    - `idempotency_table=removed`: no consumer uses the toolkit any more, so the consumers'
      record of the events they applied is deleted.
    - `consumers.<key>=removed` (retire it first to drain its queue),
      `consumers.<key>.message_retention_seconds=<new>` (lower).
    `serial`: the module records the stack's shape (what the strings above compare) in two
    `terraform_data` resources, per serial (docs/decisions.md). Raise it by one with each
    apply that changes that shape, destructive or not (adding a consumer, raising a
    retention, enabling the archive too: the plan refuses an unrecorded change, so that
    undoing it later is compared with a shape that had it). A serial lower than the
    recorded one or more than one above it is refused.
    `changes`: the changes acknowledged by that apply. A plan whose acknowledgements name
    nothing pending warns (check "acknowledged_changes_pending"); leaving them is harmless.
    A stack applied with an older version of the module has no record yet: its first apply
    with this version records it and checks nothing.
  EOT
  type = object({
    serial  = optional(number, 0)
    changes = optional(set(string), [])
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.acknowledged_changes.serial >= 0 && floor(var.acknowledged_changes.serial) == var.acknowledged_changes.serial + 0
    error_message = "The acknowledged_changes.serial must be a whole number of at least 0, raised by one with each apply that changes what the module records of the stack (docs/live-changes.md)."
  }
}

################################################################################
# Functions (shared settings)
################################################################################

variable "lambda_runtime" {
  description = "Python runtime of the module's functions. Default python3.13, the newest the hashicorp/aws provider 5.x accepts; python3.14 needs hashicorp/aws 6.20 or newer (on 5.x the plan stops with the module's message saying so)."
  type        = string
  default     = "python3.13"
  nullable    = false

  validation {
    condition     = can(regex("^python3\\.(1[1-9]|[2-9][0-9])$", var.lambda_runtime))
    error_message = "The lambda_runtime must be a Python runtime from python3.11 on (e.g. python3.12, python3.13)."
  }
}

variable "lambda_architecture" {
  description = "Instruction set of the module's functions: arm64 (default) or x86_64."
  type        = string
  default     = "arm64"
  nullable    = false

  validation {
    condition     = contains(["arm64", "x86_64"], var.lambda_architecture)
    error_message = "The lambda_architecture must be arm64 or x86_64."
  }
}

variable "tracing_mode" {
  description = <<-EOT
    X-Ray tracing of the functions the module deploys (publisher, sweeper, reference consumers):
    - "PassThrough" (default, Lambda's own default): no sampling of their own. Their
      invocations (stream and SQS mappings, the schedule) carry no sampled trace
      header, so they send no segments and their roles get no X-Ray permission.
      Events still carry their producer's trace to consumers and, on EventBridge,
      as each PutEvents entry's TraceHeader.
    - "Active": Lambda samples and records their invocations; their roles get
      xray:PutTraceSegments and xray:PutTelemetryRecords (on "*": X-Ray has no
      resource-level permissions). X-Ray charges per trace recorded.
    Functions you bring (consumers.*.function) keep their own tracing settings.
  EOT
  type        = string
  default     = "PassThrough"
  nullable    = false

  validation {
    condition     = contains(["Active", "PassThrough"], var.tracing_mode)
    error_message = "The tracing_mode must be \"Active\" or \"PassThrough\" (Lambda's TracingConfig modes, case as AWS spells them), got \"${var.tracing_mode}\"."
  }
}

variable "powertools_layer_arn" {
  description = <<-EOT
    Layer providing Powertools for AWS Lambda (Python) v3 to the module's functions.
    - null (default): the public AWS layer of the release `powertools_version` for
      the function's region, runtime and architecture, read from the SSM parameter
      Powertools publishes (commercial regions only; elsewhere set the ARN explicitly).
    - "" : no layer, for emulators that reject unknown layers (moto) or when
      Powertools comes from one of `publisher.extra_layer_arns`.
    - a layer version ARN: that layer (a pinned version, GovCloud or China regions,
      a private copy).
  EOT
  type        = string
  default     = null

  validation {
    condition     = var.powertools_layer_arn == null || var.powertools_layer_arn == "" ? true : can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$", var.powertools_layer_arn))
    error_message = "The powertools_layer_arn must be null (public Powertools layer), \"\" (no layer) or a layer version ARN (arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>)."
  }
}

variable "powertools_version" {
  description = <<-EOT
    Powertools for AWS Lambda (Python) release the module's functions run when
    `powertools_layer_arn` is null: the layer version ARN is read at plan from the public
    SSM parameter `/aws/service/powertools/python/<lambda_architecture>/<lambda_runtime>/<version>`
    (Terraform's credentials need ssm:GetParameter on it). Default: the release the
    module's tests run with (aws_lambda_powertools in requirements-dev.txt). Not read when
    `powertools_layer_arn` is set.
  EOT
  type        = string
  default     = "3.37.0"
  nullable    = false

  validation {
    condition     = can(regex("^3\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$", var.powertools_version))
    error_message = "The powertools_version must be a Powertools for AWS Lambda (Python) v3 release, 3.<minor>.<patch> such as \"3.37.0\" (the last part of /aws/service/powertools/python/<arch>/<runtime>/<version>); got \"${var.powertools_version}\"."
  }
}

variable "log_retention_days" {
  description = "Days CloudWatch Logs keeps the functions' logs: one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653, or 0 to keep them forever. Default 30."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = contains([0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "The log_retention_days must be one of the values CloudWatch Logs accepts: 0 (never expire), 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653."
  }
}

################################################################################
# Publisher
################################################################################

variable "publisher" {
  description = <<-EOT
    The publisher function (stream handler `dynamodb_outbox.publisher.handler`).
    - `memory_size_mb`: 128 to 10240, default 256.
    - `timeout_seconds`: 1 to 900, default 60.
    - `log_level`: DEBUG, INFO (default), WARNING or ERROR (env LOG_LEVEL).
    - `extra_layer_arns`: up to 4 more layer version ARNs, after the Powertools layer.
    Any other attribute is refused at plan, naming it (publisher.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.publisher_defaults, and the module reads it through them
  # (local.publisher, below). The other validations read it the same way, with
  # its defaults (`for publisher in [...]`).
  validation {
    condition     = can(keys(var.publisher)) && length(setsubtract(try(keys(var.publisher), []), keys(local.publisher_defaults))) == 0
    error_message = can(keys(var.publisher)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.publisher), keys(local.publisher_defaults)), []) : "publisher.${a}"])}: the publisher takes ${join(", ", keys(local.publisher_defaults))}." : "The publisher must be an object of ${join(", ", keys(local.publisher_defaults))}."
  }

  validation {
    condition     = alltrue([for publisher in [{ for k, d in local.publisher_defaults : k => try(var.publisher[k] == null, true) ? d : var.publisher[k] }] : publisher.memory_size_mb >= 128 && publisher.memory_size_mb <= 10240 && floor(publisher.memory_size_mb) == publisher.memory_size_mb + 0])
    error_message = "The publisher.memory_size_mb must be a whole number of MB from 128 to 10240."
  }

  validation {
    condition     = alltrue([for publisher in [{ for k, d in local.publisher_defaults : k => try(var.publisher[k] == null, true) ? d : var.publisher[k] }] : publisher.timeout_seconds >= 1 && publisher.timeout_seconds <= 900 && floor(publisher.timeout_seconds) == publisher.timeout_seconds + 0])
    error_message = "The publisher.timeout_seconds must be a whole number of seconds from 1 to 900."
  }

  validation {
    condition     = alltrue([for publisher in [{ for k, d in local.publisher_defaults : k => try(var.publisher[k] == null, true) ? d : var.publisher[k] }] : contains(["DEBUG", "INFO", "WARNING", "ERROR"], publisher.log_level)])
    error_message = "The publisher.log_level must be DEBUG, INFO, WARNING or ERROR."
  }

  validation {
    condition     = alltrue([for publisher in [{ for k, d in local.publisher_defaults : k => try(var.publisher[k] == null, true) ? d : var.publisher[k] }] : length(publisher.extra_layer_arns) <= 4 && alltrue([for arn in publisher.extra_layer_arns : can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$", arn))])])
    error_message = "The publisher.extra_layer_arns must hold at most 4 layer version ARNs (arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>); Lambda allows 5 layers including Powertools."
  }
}

locals {
  # The attributes of var.publisher and their defaults (null: none): the one list
  # the input is checked against and read through.
  publisher_defaults = {
    memory_size_mb   = 256
    timeout_seconds  = 60
    log_level        = "INFO"
    extra_layer_arns = []
  }

  # var.publisher with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  publisher = { for k, d in local.publisher_defaults : k => try(var.publisher[k] == null, true) ? d : var.publisher[k] }
}

variable "stream_mapping" {
  description = <<-EOT
    The event source mapping from the table's stream to the publisher. It always reads
    from TRIM_HORIZON, keeps only INSERTs of `OUTBOX#` items, reports partial batch
    failures, bisects failing batches and sends what it gives up on to the on-failure
    queue; these knobs tune it:
    - `batch_size`: 1 to 10000 records, default 100.
    - `maximum_batching_window_in_seconds`: 0 to 300, default 0.
    - `parallelization_factor`: concurrent batches per shard, 1 to 10, default 1; must be 1
      with publish_to = "sns_fifo" (Lambda keeps order per item only when it is above 1).
    - `maximum_retry_attempts`: 0 to 10000, default 10 (never infinite: a record that
      keeps failing must not block its shard).
    - `maximum_record_age_in_seconds`: 60 to 604800, default 86400 (stream records are
      trimmed after 24 hours anyway; never infinite).
    - `enabled`: default true.
    Any other attribute is refused at plan, naming it (stream_mapping.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.stream_mapping_defaults, and the module reads it through them
  # (local.stream_mapping, below). The other validations read it the same way, with
  # its defaults (`for stream_mapping in [...]`).
  validation {
    condition     = can(keys(var.stream_mapping)) && length(setsubtract(try(keys(var.stream_mapping), []), keys(local.stream_mapping_defaults))) == 0
    error_message = can(keys(var.stream_mapping)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.stream_mapping), keys(local.stream_mapping_defaults)), []) : "stream_mapping.${a}"])}: the stream_mapping takes ${join(", ", keys(local.stream_mapping_defaults))}." : "The stream_mapping must be an object of ${join(", ", keys(local.stream_mapping_defaults))}."
  }

  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : stream_mapping.batch_size >= 1 && stream_mapping.batch_size <= 10000 && floor(stream_mapping.batch_size) == stream_mapping.batch_size + 0])
    error_message = "The stream_mapping.batch_size must be a whole number from 1 to 10000."
  }

  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : stream_mapping.maximum_batching_window_in_seconds >= 0 && stream_mapping.maximum_batching_window_in_seconds <= 300 && floor(stream_mapping.maximum_batching_window_in_seconds) == stream_mapping.maximum_batching_window_in_seconds + 0])
    error_message = "The stream_mapping.maximum_batching_window_in_seconds must be a whole number from 0 to 300."
  }

  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : stream_mapping.parallelization_factor >= 1 && stream_mapping.parallelization_factor <= 10 && floor(stream_mapping.parallelization_factor) == stream_mapping.parallelization_factor + 0])
    error_message = "The stream_mapping.parallelization_factor must be a whole number from 1 to 10."
  }

  # Above 1, Lambda keeps the order of each item (partition key + sort key) only,
  # and every outbox item has a sort key of its own: two events of one aggregate
  # could be published by two concurrent batches, in either order.
  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : var.publish_to != "sns_fifo" || stream_mapping.parallelization_factor + 0 == 1])
    error_message = one([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : "With publish_to = \"sns_fifo\" the stream_mapping.parallelization_factor must be 1 (got ${stream_mapping.parallelization_factor}): above 1 Lambda runs several batches of a shard at once and keeps the order of each item only, and every outbox item is an item of its own, so two events of one aggregate could be published out of order."])
  }

  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : stream_mapping.maximum_retry_attempts >= 0 && stream_mapping.maximum_retry_attempts <= 10000 && floor(stream_mapping.maximum_retry_attempts) == stream_mapping.maximum_retry_attempts + 0])
    error_message = "The stream_mapping.maximum_retry_attempts must be a whole number from 0 to 10000 (-1, infinite retries, is not allowed: one failing record would block its shard for 24 hours)."
  }

  validation {
    condition     = alltrue([for stream_mapping in [{ for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }] : stream_mapping.maximum_record_age_in_seconds >= 60 && stream_mapping.maximum_record_age_in_seconds <= 604800 && floor(stream_mapping.maximum_record_age_in_seconds) == stream_mapping.maximum_record_age_in_seconds + 0])
    error_message = "The stream_mapping.maximum_record_age_in_seconds must be a whole number from 60 to 604800 (-1, infinite age, is not allowed)."
  }
}

locals {
  # The attributes of var.stream_mapping and their defaults (null: none): the one list
  # the input is checked against and read through.
  stream_mapping_defaults = {
    batch_size                         = 100
    maximum_batching_window_in_seconds = 0
    parallelization_factor             = 1
    maximum_retry_attempts             = 10
    maximum_record_age_in_seconds      = 86400
    enabled                            = true
  }

  # var.stream_mapping with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  stream_mapping = { for k, d in local.stream_mapping_defaults : k => try(var.stream_mapping[k] == null, true) ? d : var.stream_mapping[k] }
}

################################################################################
# Event archive
################################################################################

variable "event_archive" {
  description = <<-EOT
    An EventBridge archive of the events put on the bus, for `outbox-ops replay` (replay to one
    consumer's rule). Not created with publish_to = "sns".
    - `enabled`: default true.
    - `retention_days`: how long events are kept, 1 to 365 days, default 7 (docs/decisions.md:
      the consumers' idempotency records are kept at least as long, so that a replay can never
      re-apply an event by accident; the cost is about $0.10 per GB archived).
    - `event_pattern`: which events to keep (JSON); null keeps every event on the bus. Set it
      on a bus other applications share, e.g. jsonencode({ source = ["orders"] }).
    Any other attribute is refused at plan, naming it (event_archive.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.event_archive_defaults, and the module reads it through them
  # (local.event_archive, below). The other validations read it the same way, with
  # its defaults (`for event_archive in [...]`).
  validation {
    condition     = can(keys(var.event_archive)) && length(setsubtract(try(keys(var.event_archive), []), keys(local.event_archive_defaults))) == 0
    error_message = can(keys(var.event_archive)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.event_archive), keys(local.event_archive_defaults)), []) : "event_archive.${a}"])}: the event_archive takes ${join(", ", keys(local.event_archive_defaults))}." : "The event_archive must be an object of ${join(", ", keys(local.event_archive_defaults))}."
  }

  validation {
    condition     = alltrue([for event_archive in [{ for k, d in local.event_archive_defaults : k => try(var.event_archive[k] == null, true) ? d : var.event_archive[k] }] : event_archive.retention_days >= 1 && event_archive.retention_days <= 365 && floor(event_archive.retention_days) == event_archive.retention_days + 0])
    error_message = "The event_archive.retention_days must be a whole number of days from 1 to 365 (0, keeping events forever, is not allowed: the consumers' idempotency records must outlive every archived event)."
  }

  validation {
    condition     = alltrue([for event_archive in [{ for k, d in local.event_archive_defaults : k => try(var.event_archive[k] == null, true) ? d : var.event_archive[k] }] : event_archive.event_pattern == null ? true : try(length(keys(jsondecode(event_archive.event_pattern))) > 0, false)])
    error_message = "The event_archive.event_pattern must be null or a non-empty JSON object, e.g. jsonencode({ source = [\"orders\"] })."
  }
}

locals {
  # The attributes of var.event_archive and their defaults (null: none): the one list
  # the input is checked against and read through.
  event_archive_defaults = {
    enabled        = true
    retention_days = 7
    event_pattern  = tostring(null)
  }

  # var.event_archive with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  event_archive = { for k, d in local.event_archive_defaults : k => try(var.event_archive[k] == null, true) ? d : var.event_archive[k] }
}

################################################################################
# Dashboard
################################################################################

variable "dashboard" {
  description = <<-EOT
    A CloudWatch dashboard `<name>-outbox` drawing the flow in the order events travel: writes,
    stream iterator age, published, quarantined, oldest pending age, sweeper recoveries, then
    per consumer processed / failed / duplicates, queue age and DLQ depth. Built from the same
    metric definitions as the alarms, with each alarm's threshold drawn on its metric. A
    caller's toolkit function is drawn under Powertools `service` = its consumer key (what the
    toolkit uses when POWERTOOLS_SERVICE_NAME is unset).
    - `enabled`: default true.
    Any other attribute is refused at plan, naming it (dashboard.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.dashboard_defaults, and the module reads it through them
  # (local.dashboard, below).
  validation {
    condition     = can(keys(var.dashboard)) && length(setsubtract(try(keys(var.dashboard), []), keys(local.dashboard_defaults))) == 0
    error_message = can(keys(var.dashboard)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.dashboard), keys(local.dashboard_defaults)), []) : "dashboard.${a}"])}: the dashboard takes ${join(", ", keys(local.dashboard_defaults))}." : "The dashboard must be an object of ${join(", ", keys(local.dashboard_defaults))}."
  }
}

locals {
  # The attributes of var.dashboard and their defaults (null: none): the one list
  # the input is checked against and read through.
  dashboard_defaults = {
    enabled = true
  }

  # var.dashboard with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  dashboard = { for k, d in local.dashboard_defaults : k => try(var.dashboard[k] == null, true) ? d : var.dashboard[k] }
}

################################################################################
# Consumers
################################################################################

variable "consumers" {
  description = <<-EOT
    Queue consumers of the outbox's events, by a key of your choice (1 to 32 characters of
    lowercase letters, digits and hyphens, starting with a letter, not ending with a hyphen;
    `<name>-<key>-consumer` must stay within 64 characters). Adding or removing one never
    touches the others. Removing one DELETES its queue and DLQ with every message still in
    them: the plan refuses it until the removal is named in `acknowledged_changes`
    (`consumers.<key>=removed`). Retire it first (`retired`, below) to let its queue drain
    (docs/live-changes.md). Per consumer the module creates an SQS queue `<name>-<key>-consumer`
    and its DLQ `<name>-<key>-consumer-dlq` (14 days retention, redrive-allow limited to the
    queue), both encrypted (SSE-SQS, or `kms_key_arn`); the delivery from the bus or topic,
    whose undeliverable events also go to that DLQ; and an event source mapping that always
    reports partial batch failures (`ReportBatchItemFailures`). See docs/consumers.md.

    Where events come from (set exactly the one that matches `publish_to`):
    - `event_pattern` (publish_to = "eventbridge"): the rule's event pattern, a JSON object
      string, e.g. `jsonencode({ "detail-type" = ["OrderCreated"] })`. Events carry the
      envelope's `source` and its `type` as `detail-type`, the envelope as `detail`.
    - `filter_policy` (publish_to = "sns"): the subscription's filter policy on message
      attributes, a JSON object string, e.g. `jsonencode({ event_type = ["OrderCreated"] })`;
      the attributes are `event_type` and `source`.
    Both are JSON strings, not maps: Terraform cannot hold differently shaped patterns in one
    map of objects.

    The function:
    - `function = null` (default): the module deploys the reference consumer
      (`dynamodb_outbox.reference_consumer.handler`, function and role `<name>-<key>-consumer`)
      from the module's package, with the publisher's runtime, architecture and Powertools
      layer, `function_memory_size_mb` (128 to 10240, default 256) and its own log group.
    - `function = { arn, role_name, uses_toolkit }`: your function consumes the queue.
      `arn` is its ARN (an alias or version ARN works). `role_name` (optional) is the name of
      its execution role, known at plan (a literal, or the `name` argument of an
      `aws_iam_role`): the module then attaches an inline policy with exactly what the
      consumer needs (the queue; `kms:Decrypt` on `kms_key_arn`; the idempotency table when
      `uses_toolkit`), before it creates the mapping. Without `role_name`, grant
      `consumers[<key>].required_policy_json` (an output) to the role BEFORE applying: Lambda
      checks the role when it creates the mapping. `uses_toolkit` (default true) says the
      function uses `dynamodb_outbox.consumer` and needs the idempotency table; set
      `OUTBOX_CONSUMER_NAME=<key>` (or `name="<key>"`) in your function: its idempotency
      keys are scoped to `idempotency#<key>#*` and `ledger#<key>#*`.

    Timing:
    - `function_timeout_seconds`: 1 to 900, default 30. The module's function gets this
      timeout; for your own function, give its timeout here.
    - `visibility_timeout_seconds`: the queue's; null (default) means 6 x
      `function_timeout_seconds` (AWS's recommendation, so a batch retried after throttling
      is not received twice). Set explicitly, it must be at least that and at most 43200.
    - `message_retention_seconds`: the queue's, 60 to 1209600, default 345600 (4 days).
    - `max_receive_count`: receives before SQS moves a message to the DLQ, 1 to 1000,
      default 5. Keep at least 5: a batch that failed for an unrelated reason (a timeout, a
      throttle) counts a receive for every message in it.

    Event source mapping:
    - `batch_size`: 1 to 10000, default 10; above 10 needs a batching window of at least 1 s.
      With publish_to = "sns_fifo" (FIFO queues) at most 10.
    - `maximum_batching_window_in_seconds`: 0 to 300, default 0; must be 0 with
      publish_to = "sns_fifo" (Lambda supports no batching window on FIFO queues).
    - `maximum_concurrency`: 2 to 1000 concurrent invocations, null (default) for no limit.

    EventBridge delivery (publish_to = "eventbridge"; SNS retries delivery to SQS itself):
    - `maximum_event_age_in_seconds`: 60 to 86400, default 86400.
    - `maximum_retry_attempts`: 0 to 185, default 185.
    After those, the event goes to the consumer's DLQ with the error in its attributes.

    Idempotency (consumers using the toolkit):
    - `idempotency_expires_after_seconds`: how long an event id is remembered; null (default)
      derives the shortest window that outlives every copy of an event (queue retention twice,
      DLQ retention, delivery retries, the stream's 24 h or the sweeper's republish, the
      archive: docs/seams.md, Windows), 20 days with the defaults. An explicit value below
      that is refused at plan. The `consumers` output gives it to your own function
      (`environment`).
    Retiring:
    - `retired`: default false. true stops new events reaching the consumer (its rule or
      subscription is deleted) and keeps its queue, DLQ, mapping and function, so that what
      is queued is still consumed. Once the queue and DLQ are empty, remove the key (and
      acknowledge `consumers.<key>=removed`). Setting it back to false delivers only the
      events published from then on: those published while it was retired never reach it.
    Lowering `message_retention_seconds` makes SQS delete the messages already older than
    the new value: the plan refuses it unless acknowledged
    (`consumers.<key>.message_retention_seconds=<new>`).
    Any other attribute of a consumer or of its `function` is refused at plan, naming it
    (consumers["<key>"].<attribute>): Terraform would otherwise drop a misspelt one silently.
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt batch_sise would plan the
  # default. So the value is taken as given (type any), its names are checked
  # against local.consumer_defaults and local.consumer_function_defaults, and
  # the module reads it through them (local.consumers, below). The other
  # validations read each consumer the same way, with its defaults.
  validation {
    condition = can(keys(var.consumers)) && try(length(concat(
      [for key, c in var.consumers : "consumers[\"${key}\"] (not an object)" if !can(keys(c))],
      flatten([for key, c in var.consumers : [for a in setsubtract(keys(c), keys(local.consumer_defaults)) : "consumers[\"${key}\"].${a}"] if can(keys(c))]),
      flatten([for key, c in var.consumers : [for a in setsubtract(keys(c.function), keys(local.consumer_function_defaults)) : "consumers[\"${key}\"].function.${a}"] if can(keys(c.function))]),
    )) == 0, false)
    error_message = !can(keys(var.consumers)) ? "The consumers must be a map of consumer objects, by consumer key." : format(
      "Unknown consumer attribute: %s. A consumer takes %s; its function takes %s.",
      join(", ", concat(
        [for key, c in var.consumers : "consumers[\"${key}\"] (not an object)" if !can(keys(c))],
        flatten([for key, c in var.consumers : [for a in setsubtract(keys(c), keys(local.consumer_defaults)) : "consumers[\"${key}\"].${a}"] if can(keys(c))]),
        flatten([for key, c in var.consumers : [for a in setsubtract(keys(c.function), keys(local.consumer_function_defaults)) : "consumers[\"${key}\"].function.${a}"] if can(keys(c.function))]),
      )),
      join(", ", keys(local.consumer_defaults)),
      join(", ", keys(local.consumer_function_defaults)),
    )
  }

  # Every message names the consumer keys it refuses ("Invalid for: ..."), so a
  # map of ten consumers does not have to be searched for the wrong one.
  validation {
    condition     = alltrue([for key in keys(var.consumers) : can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", key))])
    error_message = "Consumer keys must be 1 to 32 characters of lowercase letters, digits and hyphens, start with a letter and not end with a hyphen (they name the consumer's queue, rule, function and role). Invalid: ${join(", ", [for key in keys(var.consumers) : "\"${key}\"" if !can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", key))])}."
  }

  # Lambda function, IAM role and EventBridge rule names: 64 characters.
  validation {
    condition     = alltrue([for key in keys(var.consumers) : length("${var.name}-${key}-consumer") <= 64])
    error_message = "A consumer's function, role and rule are named <name>-<key>-consumer, at most 64 characters: the key and var.name together at most 54. Too long for: ${join(", ", [for key in keys(var.consumers) : "${key} (\"${var.name}-${key}-consumer\", ${length("${var.name}-${key}-consumer")} characters)" if length("${var.name}-${key}-consumer") > 64])}. Shorten the key or var.name."
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.event_pattern == null ? true : try(length(keys(jsondecode(c.event_pattern))) > 0, false)
    ])
    error_message = "A consumer's event_pattern must be a non-empty JSON object, e.g. jsonencode({ source = [\"orders\"] }). Invalid for: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.event_pattern != null && !try(length(keys(jsondecode(c.event_pattern))) > 0, false)])}."
  }

  # EventBridge refuses a pattern field whose value is neither an array of
  # values/matchers nor an object of nested fields ({ source = "orders" }), but
  # only when the rule is created. Checked down to four levels (detail.data.a.b),
  # one line per level; matcher objects inside arrays ({ prefix = "x" }) are left
  # to EventBridge.
  validation {
    condition = length(concat(
      flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : "${key} (${join(".", [f1])})" if !(can(keys(v1)) || can(length(v1)) && !can(tostring(v1)))]]),
      flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : "${key} (${join(".", [f1, f2])})" if !(can(keys(v2)) || can(length(v2)) && !can(tostring(v2)))] if can(keys(v1))]]),
      flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : [for f3, v3 in v2 : "${key} (${join(".", [f1, f2, f3])})" if !(can(keys(v3)) || can(length(v3)) && !can(tostring(v3)))] if can(keys(v2))] if can(keys(v1))]]),
      flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : [for f3, v3 in v2 : [for f4, v4 in v3 : "${key} (${join(".", [f1, f2, f3, f4])})" if !(can(keys(v4)) || can(length(v4)) && !can(tostring(v4)))] if can(keys(v3))] if can(keys(v2))] if can(keys(v1))]]),
    )) == 0
    error_message = format(
      "In an event_pattern every field's value must be an array of values or matchers (source = [\"orders\"], not source = \"orders\") or an object of nested fields. Invalid for: %s.",
      join(", ", concat(
        flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : "${key} (${join(".", [f1])})" if !(can(keys(v1)) || can(length(v1)) && !can(tostring(v1)))]]),
        flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : "${key} (${join(".", [f1, f2])})" if !(can(keys(v2)) || can(length(v2)) && !can(tostring(v2)))] if can(keys(v1))]]),
        flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : [for f3, v3 in v2 : "${key} (${join(".", [f1, f2, f3])})" if !(can(keys(v3)) || can(length(v3)) && !can(tostring(v3)))] if can(keys(v2))] if can(keys(v1))]]),
        flatten([for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : [for f1, v1 in try({ for field, value in jsondecode(c.event_pattern) : field => value if can(keys(jsondecode(c.event_pattern))) }, {}) : [for f2, v2 in v1 : [for f3, v3 in v2 : [for f4, v4 in v3 : "${key} (${join(".", [f1, f2, f3, f4])})" if !(can(keys(v4)) || can(length(v4)) && !can(tostring(v4)))] if can(keys(v3))] if can(keys(v2))] if can(keys(v1))]]),
      )),
    )
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.filter_policy == null ? true : try(length(keys(jsondecode(c.filter_policy))) > 0, false)
    ])
    error_message = "A consumer's filter_policy must be a non-empty JSON object on the message attributes event_type and source, e.g. jsonencode({ event_type = [\"OrderCreated\"] }). Invalid for: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.filter_policy != null && !try(length(keys(jsondecode(c.filter_policy))) > 0, false)])}."
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.event_pattern == null || c.filter_policy == null])
    error_message = "Set either event_pattern (publish_to = \"eventbridge\") or filter_policy (publish_to = \"sns\") on a consumer, not both. Both set on: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.event_pattern != null && c.filter_policy != null])}."
  }

  # What publish_to needs; a consumer with both set has the message above.
  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.event_pattern != null && c.filter_policy != null ? true : (var.publish_to != "eventbridge" ? c.filter_policy != null : c.event_pattern != null)
    ])
    error_message = var.publish_to != "eventbridge" ? "With publish_to = \"${var.publish_to}\" every consumer needs a filter_policy (a JSON filter policy on the message attributes event_type and source) and no event_pattern. Invalid for: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.filter_policy == null])}." : "With publish_to = \"eventbridge\" every consumer needs an event_pattern (a JSON EventBridge event pattern) and no filter_policy (that is for publish_to = \"sns\"). Invalid for: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.event_pattern == null])}."
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.function == null ? true : can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]{1,128})?$", c.function.arn))
    ])
    error_message = format("A consumer's function.arn must be a Lambda function ARN (arn:<partition>:lambda:<region>:<account>:function:<name>, optionally :<alias or version>). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${jsonencode(try(c.function.arn, null))})" if c.function != null && !can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]{1,128})?$", try(c.function.arn, "")))]))
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      try(c.function.role_name == null, true) ? true : can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", c.function.role_name))
    ])
    error_message = format("A consumer's function.role_name must be null or an IAM role NAME (1 to 64 of letters, digits and +=,.@_-), not an ARN. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (\"${c.function.role_name}\")" if try(!can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", c.function.role_name)) && c.function.role_name != null, false)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.function_timeout_seconds >= 1 && c.function_timeout_seconds <= 900 && floor(c.function_timeout_seconds) == c.function_timeout_seconds + 0])
    error_message = format("A consumer's function_timeout_seconds must be a whole number of seconds from 1 to 900. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.function_timeout_seconds})" if !(c.function_timeout_seconds >= 1 && c.function_timeout_seconds <= 900 && floor(c.function_timeout_seconds) == c.function_timeout_seconds + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.function_memory_size_mb >= 128 && c.function_memory_size_mb <= 10240 && floor(c.function_memory_size_mb) == c.function_memory_size_mb + 0])
    error_message = format("A consumer's function_memory_size_mb must be a whole number of MB from 128 to 10240. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.function_memory_size_mb})" if !(c.function_memory_size_mb >= 128 && c.function_memory_size_mb <= 10240 && floor(c.function_memory_size_mb) == c.function_memory_size_mb + 0)]))
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.visibility_timeout_seconds == null ? true : (c.visibility_timeout_seconds <= 43200 && floor(c.visibility_timeout_seconds) == c.visibility_timeout_seconds + 0)
    ])
    error_message = format("A consumer's visibility_timeout_seconds must be null (6 x function_timeout_seconds) or a whole number of seconds up to 43200, the SQS maximum. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.visibility_timeout_seconds})" if try(!(c.visibility_timeout_seconds <= 43200 && floor(c.visibility_timeout_seconds) == c.visibility_timeout_seconds + 0), false)]))
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.visibility_timeout_seconds == null ? true : c.visibility_timeout_seconds >= 6 * c.function_timeout_seconds
    ])
    error_message = format("A consumer's visibility_timeout_seconds must be at least 6 x its function_timeout_seconds (AWS's recommendation for SQS event sources, so a message stays hidden while Lambda retries a throttled batch; Lambda refuses outright a mapping whose function timeout exceeds the visibility timeout). Too small for: %s. Leave it null to get 6 x function_timeout_seconds.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.visibility_timeout_seconds} < 6 x ${c.function_timeout_seconds})" if try(c.visibility_timeout_seconds < 6 * c.function_timeout_seconds, false)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.message_retention_seconds >= 60 && c.message_retention_seconds <= 1209600 && floor(c.message_retention_seconds) == c.message_retention_seconds + 0])
    error_message = format("A consumer's message_retention_seconds must be a whole number from 60 to 1209600 (14 days). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.message_retention_seconds})" if !(c.message_retention_seconds >= 60 && c.message_retention_seconds <= 1209600 && floor(c.message_retention_seconds) == c.message_retention_seconds + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.max_receive_count >= 1 && c.max_receive_count <= 1000 && floor(c.max_receive_count) == c.max_receive_count + 0])
    error_message = format("A consumer's max_receive_count must be a whole number from 1 to 1000 (5 or more is recommended: a batch that fails for an unrelated reason counts a receive for every message in it). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.max_receive_count})" if !(c.max_receive_count >= 1 && c.max_receive_count <= 1000 && floor(c.max_receive_count) == c.max_receive_count + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.batch_size >= 1 && c.batch_size <= 10000 && floor(c.batch_size) == c.batch_size + 0])
    error_message = format("A consumer's batch_size must be a whole number from 1 to 10000. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.batch_size})" if !(c.batch_size >= 1 && c.batch_size <= 10000 && floor(c.batch_size) == c.batch_size + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.maximum_batching_window_in_seconds >= 0 && c.maximum_batching_window_in_seconds <= 300 && floor(c.maximum_batching_window_in_seconds) == c.maximum_batching_window_in_seconds + 0])
    error_message = format("A consumer's maximum_batching_window_in_seconds must be a whole number from 0 to 300. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.maximum_batching_window_in_seconds})" if !(c.maximum_batching_window_in_seconds >= 0 && c.maximum_batching_window_in_seconds <= 300 && floor(c.maximum_batching_window_in_seconds) == c.maximum_batching_window_in_seconds + 0)]))
  }

  # Lambda's SQS parameters: "For FIFO queues, the maximum is 10" and "Batching
  # window is not supported for FIFO queues".
  validation {
    condition     = var.publish_to != "sns_fifo" || alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.batch_size <= 10])
    error_message = format("With publish_to = \"sns_fifo\" the consumer queues are FIFO queues, whose event source mappings take a batch_size of at most 10. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.batch_size})" if c.batch_size > 10]))
  }

  validation {
    condition     = var.publish_to != "sns_fifo" || alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.maximum_batching_window_in_seconds + 0 == 0])
    error_message = format("With publish_to = \"sns_fifo\" the consumer queues are FIFO queues, on which Lambda supports no batching window: maximum_batching_window_in_seconds must be 0. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.maximum_batching_window_in_seconds})" if c.maximum_batching_window_in_seconds + 0 != 0]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.batch_size <= 10 || c.maximum_batching_window_in_seconds >= 1])
    error_message = "A consumer with batch_size above 10 needs maximum_batching_window_in_seconds of at least 1 (AWS's rule for SQS event sources). Needed for: ${join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : key if c.batch_size > 10 && c.maximum_batching_window_in_seconds < 1])}."
  }

  validation {
    condition = alltrue([
      for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) :
      c.maximum_concurrency == null ? true : (c.maximum_concurrency >= 2 && c.maximum_concurrency <= 1000 && floor(c.maximum_concurrency) == c.maximum_concurrency + 0)
    ])
    error_message = format("A consumer's maximum_concurrency must be null (no limit) or a whole number from 2 to 1000 (AWS's range for SQS event sources). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.maximum_concurrency})" if try(!(c.maximum_concurrency >= 2 && c.maximum_concurrency <= 1000 && floor(c.maximum_concurrency) == c.maximum_concurrency + 0), false)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.maximum_event_age_in_seconds >= 60 && c.maximum_event_age_in_seconds <= 86400 && floor(c.maximum_event_age_in_seconds) == c.maximum_event_age_in_seconds + 0])
    error_message = format("A consumer's maximum_event_age_in_seconds must be a whole number from 60 to 86400 (EventBridge's range). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.maximum_event_age_in_seconds})" if !(c.maximum_event_age_in_seconds >= 60 && c.maximum_event_age_in_seconds <= 86400 && floor(c.maximum_event_age_in_seconds) == c.maximum_event_age_in_seconds + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.maximum_retry_attempts >= 0 && c.maximum_retry_attempts <= 185 && floor(c.maximum_retry_attempts) == c.maximum_retry_attempts + 0])
    error_message = format("A consumer's maximum_retry_attempts must be a whole number from 0 to 185 (EventBridge's range). Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.maximum_retry_attempts})" if !(c.maximum_retry_attempts >= 0 && c.maximum_retry_attempts <= 185 && floor(c.maximum_retry_attempts) == c.maximum_retry_attempts + 0)]))
  }

  validation {
    condition     = alltrue([for c in values({ for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } }) : c.idempotency_expires_after_seconds == null ? true : (c.idempotency_expires_after_seconds >= 1 && floor(c.idempotency_expires_after_seconds) == c.idempotency_expires_after_seconds + 0)])
    error_message = format("A consumer's idempotency_expires_after_seconds must be null (derived, docs/seams.md) or a whole number of seconds. Invalid for: %s.", join(", ", [for key, c in { for key, c in var.consumers : key => { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] } } : "${key} (${c.idempotency_expires_after_seconds})" if try(!(c.idempotency_expires_after_seconds >= 1 && floor(c.idempotency_expires_after_seconds) == c.idempotency_expires_after_seconds + 0), false)]))
  }
}

locals {
  # A consumer's attributes and their defaults (null: none): the one list
  # var.consumers is checked against and read through.
  consumer_defaults = {
    event_pattern                      = tostring(null)
    filter_policy                      = tostring(null)
    function                           = null
    function_timeout_seconds           = 30
    function_memory_size_mb            = 256
    visibility_timeout_seconds         = tonumber(null)
    message_retention_seconds          = 345600
    max_receive_count                  = 5
    batch_size                         = 10
    maximum_batching_window_in_seconds = 0
    maximum_concurrency                = tonumber(null)
    maximum_event_age_in_seconds       = 86400
    maximum_retry_attempts             = 185
    idempotency_expires_after_seconds  = tonumber(null)
    retired                            = false
  }
  consumer_function_defaults = {
    arn          = tostring(null)
    role_name    = tostring(null)
    uses_toolkit = true
  }

  # var.consumers with its defaults, as map(object({ optional(...) })) gave it:
  # an attribute set to null takes its default, one known only after apply
  # leaves the others known (for_each and count depend on them). The module
  # reads this.
  # The typed nulls of the defaults and tomap() give every consumer the same
  # object type, as the declared map(object(...)) did.
  consumers = tomap({
    for key, c in var.consumers : key => merge(
      { for k, d in local.consumer_defaults : k => try(c[k] == null, true) ? d : c[k] },
      { function = try(c.function == null, true) ? null : { for k, d in local.consumer_function_defaults : k => try(c.function[k] == null, true) ? d : c.function[k] } },
    )
  })
}

variable "idempotency_table" {
  description = <<-EOT
    The consumers' idempotency table `<name>-idempotency`, created when a consumer uses the
    toolkit (the reference consumer always does).
    - `deletion_protection_enabled`: default false. Unlike the outbox table (`table`), it holds
      nothing that outlives its TTL: idempotency records and the reference consumer's ledger
      entries all expire (`expiration`), and losing them only lets an event redelivered within
      that window take effect again. Off by default so that `terraform destroy` works, also on a
      stack whose outbox table the module does not own; set true to protect it anyway.
    Any other attribute is refused at plan, naming it (idempotency_table.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.idempotency_table_defaults, and the module reads it through them
  # (local.idempotency_table, below).
  validation {
    condition     = can(keys(var.idempotency_table)) && length(setsubtract(try(keys(var.idempotency_table), []), keys(local.idempotency_table_defaults))) == 0
    error_message = can(keys(var.idempotency_table)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.idempotency_table), keys(local.idempotency_table_defaults)), []) : "idempotency_table.${a}"])}: the idempotency_table takes ${join(", ", keys(local.idempotency_table_defaults))}." : "The idempotency_table must be an object of ${join(", ", keys(local.idempotency_table_defaults))}."
  }
}

locals {
  # The attributes of var.idempotency_table and their defaults (null: none): the one list
  # the input is checked against and read through.
  idempotency_table_defaults = {
    deletion_protection_enabled = false
  }

  # var.idempotency_table with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  idempotency_table = { for k, d in local.idempotency_table_defaults : k => try(var.idempotency_table[k] == null, true) ? d : var.idempotency_table[k] }
}

################################################################################
# Layer
################################################################################

variable "create_layer" {
  description = <<-EOT
    Publish the `dynamodb_outbox` package (writer, envelope, consumer toolkit, and the `ulid`
    package it needs) as a Lambda layer `<name>-dynamodb-outbox`, for producer and consumer
    functions outside the module (`layer_arn` output). Compatible with `lambda_runtime` and
    `lambda_architecture`. It does not include Powertools (the consumer toolkit needs it: add
    the Powertools layer too) nor boto3 (the runtime has it). Default true.
  EOT
  type        = bool
  default     = true
  nullable    = false
}

################################################################################
# Sweeper
################################################################################

variable "sweeper" {
  description = <<-EOT
    The sweeper function (`dynamodb_outbox.sweeper.handler`, `<name>-sweeper`), run on an
    EventBridge Scheduler schedule. It re-publishes outbox items still pending after
    `min_age_seconds` (the stream path missed them: records trimmed after 24 hours, retries
    exhausted), reading the sparse `outbox-pending` index, never scanning the table.
    - `enabled`: default true. With an existing table (`table.create = false`) the table must
      already have the `outbox-pending` index (partition key `outbox_pending_shard`, sort key
      the table's `table.sort_key` (default `SK`), both strings; keys only is enough) or plan fails with the `aws dynamodb
      update-table` command that adds it; set `enabled = false` to run without a sweeper
      instead (then nothing re-publishes what the stream path gave up on). A table the
      module creates always has the index.
    - `schedule_expression`: `rate(...)` or `cron(...)` (EventBridge Scheduler syntax, UTC),
      default "rate(5 minutes)".
    - `min_age_seconds`: only items older than this are swept, at least 60, default 300 (well
      above the stream path's latency, so the two rarely overlap; overlap only duplicates).
    - `max_items`: items per run, 1 to 10000, default 1000; the rest waits for the next run.
    - `memory_size_mb`: 128 to 10240, default 256.
    - `timeout_seconds`: 60 to 900, default 120 (the sweeper keeps its last 10 s for deletes).
    - `log_level`: DEBUG, INFO (default), WARNING or ERROR (env LOG_LEVEL).
    The function uses the publisher's runtime, architecture and layers.
    Any other attribute is refused at plan, naming it (sweeper.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.sweeper_defaults, and the module reads it through them
  # (local.sweeper, below). The other validations read it the same way, with
  # its defaults (`for sweeper in [...]`).
  validation {
    condition     = can(keys(var.sweeper)) && length(setsubtract(try(keys(var.sweeper), []), keys(local.sweeper_defaults))) == 0
    error_message = can(keys(var.sweeper)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.sweeper), keys(local.sweeper_defaults)), []) : "sweeper.${a}"])}: the sweeper takes ${join(", ", keys(local.sweeper_defaults))}." : "The sweeper must be an object of ${join(", ", keys(local.sweeper_defaults))}."
  }

  validation {
    condition = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : (
      can(regex("^rate\\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\\)$", sweeper.schedule_expression))
      || can(regex("^cron\\([^ ()]+( [^ ()]+){5}\\)$", sweeper.schedule_expression))
    )])
    error_message = "The sweeper.schedule_expression must be a recurring EventBridge Scheduler expression: rate(<n> minutes|hours|days) (singular unit for 1, e.g. rate(1 hour)) or cron(<minutes> <hours> <day-of-month> <month> <day-of-week> <year>)."
  }

  validation {
    condition     = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : sweeper.min_age_seconds >= 60 && floor(sweeper.min_age_seconds) == sweeper.min_age_seconds + 0])
    error_message = "The sweeper.min_age_seconds must be a whole number of at least 60: younger items are still on their way through the stream, and sweeping them only duplicates events."
  }

  validation {
    condition     = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : sweeper.max_items >= 1 && sweeper.max_items <= 10000 && floor(sweeper.max_items) == sweeper.max_items + 0])
    error_message = "The sweeper.max_items must be a whole number from 1 to 10000."
  }

  validation {
    condition     = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : sweeper.memory_size_mb >= 128 && sweeper.memory_size_mb <= 10240 && floor(sweeper.memory_size_mb) == sweeper.memory_size_mb + 0])
    error_message = "The sweeper.memory_size_mb must be a whole number of MB from 128 to 10240."
  }

  validation {
    condition     = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : sweeper.timeout_seconds >= 60 && sweeper.timeout_seconds <= 900 && floor(sweeper.timeout_seconds) == sweeper.timeout_seconds + 0])
    error_message = "The sweeper.timeout_seconds must be a whole number of seconds from 60 to 900: the sweeper keeps its last 10 seconds for deleting what it published."
  }

  validation {
    condition     = alltrue([for sweeper in [{ for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }] : contains(["DEBUG", "INFO", "WARNING", "ERROR"], sweeper.log_level)])
    error_message = "The sweeper.log_level must be DEBUG, INFO, WARNING or ERROR."
  }
}

locals {
  # The attributes of var.sweeper and their defaults (null: none): the one list
  # the input is checked against and read through.
  sweeper_defaults = {
    enabled             = true
    schedule_expression = "rate(5 minutes)"
    min_age_seconds     = 300
    max_items           = 1000
    memory_size_mb      = 256
    timeout_seconds     = 120
    log_level           = "INFO"
  }

  # var.sweeper with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  sweeper = { for k, d in local.sweeper_defaults : k => try(var.sweeper[k] == null, true) ? d : var.sweeper[k] }
}

################################################################################
# Alarms
################################################################################

variable "alarms" {
  description = <<-EOT
    CloudWatch alarms on the outbox. Keys (also the keys of the `alarm_arns` output):
    - `publisher_iterator_age`: the publisher's IteratorAge (Maximum) above
      `publisher_iterator_age_threshold_ms` (default 60000): the stream path is falling behind.
    - `publisher_errors`, `sweeper_errors`: function Errors (Sum) above
      `publisher_errors_threshold` / `sweeper_errors_threshold` (default 0).
    - `on_failure_queue_depth`: the on-failure queue holds messages: the stream mapping gave up
      on a batch (its items wait for the sweeper).
    - `event_bus_dlq_depth`: the bus's DLQ holds events EventBridge accepted but could not
      encrypt or decrypt with `kms_key_arn` (only for a bus the module creates).
    - `quarantined_events`: the publisher or the sweeper quarantined a poison item
      (QuarantinedEvents in the Powertools namespace, both services added up).
    - `oldest_pending_item`: the sweeper's OldestPendingAgeSeconds (Maximum) above
      `oldest_pending_age_threshold_seconds`; null (default) means `sweeper.min_age_seconds`
      plus the schedule's interval, and must be set for a cron() schedule. Missing data is
      breaching: a sweeper that stops reporting is as bad as an old item.
    Per consumer (keys `<alarm>/<consumer key>` in `alarm_arns`):
    - `consumer_failed_invocations`: the consumer's rule failed to deliver events to its queue
      after its retries (AWS/Events FailedInvocations; publish_to = "eventbridge" only).
    - `consumer_dlq_depth`: the consumer's DLQ holds messages.
    - `consumer_dlq_age`: the oldest message in the consumer's DLQ is older than
      `consumer_dlq_age_threshold_seconds`; null (default) derives it per consumer: half of
      what the DLQ keeps a message after its move (5 days with the default retentions), so the
      redrive comes well before SQS deletes it (docs/seams.md, Windows). An explicit value
      that would fire only after that is refused at plan.
    - `consumer_errors`: the function consuming the queue (the reference consumer, or yours
      given in `consumers[*].function`) failed invocations (AWS/Lambda Errors above 0).
    - `consumer_untrusted_events`: the module's reference consumer refused messages its bus
      or topic cannot have delivered (UntrustedEvents above 0; your own function reports it
      under its own Powertools service name).
    Sweeper alarms exist only when the sweeper does.
    - `enabled`: false creates no alarm at all (default true).
    - `disabled`: keys of alarms not to create (a consumer alarm key turns it off for every
      consumer).
    - `actions`: ARNs notified when an alarm fires (SNS topics, ...); `ok_actions`: when it clears.
      Empty by default: the alarms then notify no one, and every plan warns
      (check "alarms_notify_someone").
    - `period_seconds`: evaluation period of the function and queue alarms, a multiple of 60,
      default 300.
    Any other attribute is refused at plan, naming it (alarms.<attribute>).
  EOT
  type        = any
  default     = {}
  nullable    = false

  # Terraform drops the attributes an object type does not declare, without a
  # word (hashicorp/terraform#29204): a misspelt attribute would plan its
  # default. So the value is taken as given (type any), its names are checked
  # against local.alarms_defaults, and the module reads it through them
  # (local.alarms, below). The other validations read it the same way, with
  # its defaults (`for alarms in [...]`).
  validation {
    condition     = can(keys(var.alarms)) && length(setsubtract(try(keys(var.alarms), []), keys(local.alarms_defaults))) == 0
    error_message = can(keys(var.alarms)) ? "Unknown attribute ${join(", ", [for a in try(setsubtract(keys(var.alarms), keys(local.alarms_defaults)), []) : "alarms.${a}"])}: the alarms takes ${join(", ", keys(local.alarms_defaults))}." : "The alarms must be an object of ${join(", ", keys(local.alarms_defaults))}."
  }

  validation {
    condition = alltrue([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : length(setsubtract(alarms.disabled, [
      "publisher_iterator_age",
      "publisher_errors",
      "sweeper_errors",
      "on_failure_queue_depth",
      "event_bus_dlq_depth",
      "quarantined_events",
      "oldest_pending_item",
      "consumer_failed_invocations",
      "consumer_dlq_depth",
      "consumer_dlq_age",
      "consumer_errors",
      "consumer_untrusted_events",
    ])) == 0])
    error_message = "The alarms.disabled entries must be alarm keys: publisher_iterator_age, publisher_errors, sweeper_errors, on_failure_queue_depth, event_bus_dlq_depth, quarantined_events, oldest_pending_item, consumer_failed_invocations, consumer_dlq_depth, consumer_dlq_age, consumer_errors, consumer_untrusted_events."
  }

  validation {
    condition     = alltrue([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : length(alarms.actions) <= 5 && length(alarms.ok_actions) <= 5])
    error_message = one([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : "The alarms.actions and alarms.ok_actions must each hold at most 5 ARNs (CloudWatch's limit); actions has ${length(alarms.actions)}, ok_actions ${length(alarms.ok_actions)}."])
  }

  # arn:<partition>:<service>:<region>:<account>:<resource>; the account field is
  # "ec2" in EC2 actions (arn:aws:automate:<region>:ec2:stop).
  validation {
    condition     = alltrue([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : alltrue([for arn in concat(tolist(alarms.actions), tolist(alarms.ok_actions)) : can(regex("^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:[a-z0-9-]*:[^:\\s].*$", arn))])])
    error_message = one([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : "Malformed ARN in alarms.actions or alarms.ok_actions: ${join(", ", [for arn in concat(tolist(alarms.actions), tolist(alarms.ok_actions)) : "\"${arn}\"" if !can(regex("^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:[a-z0-9-]*:[^:\\s].*$", arn))])}. An action is an ARN, arn:<partition>:<service>:<region>:<account>:<resource>, e.g. arn:aws:sns:eu-west-1:111122223333:alerts."])
  }

  validation {
    condition     = alltrue([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : alarms.period_seconds >= 60 && alarms.period_seconds <= 86400 && alarms.period_seconds % 60 == 0])
    error_message = "The alarms.period_seconds must be a multiple of 60 from 60 to 86400."
  }

  validation {
    condition = alltrue([for alarms in [{ for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }] : alltrue([
      alarms.publisher_iterator_age_threshold_ms >= 0,
      alarms.publisher_errors_threshold >= 0,
      alarms.sweeper_errors_threshold >= 0,
      alarms.oldest_pending_age_threshold_seconds == null ? true : alarms.oldest_pending_age_threshold_seconds >= 60,
      alarms.consumer_dlq_age_threshold_seconds == null ? true : alarms.consumer_dlq_age_threshold_seconds >= 0,
    ])])
    error_message = "The alarm thresholds must not be negative, and alarms.oldest_pending_age_threshold_seconds must be null or at least 60."
  }
}

locals {
  # The attributes of var.alarms and their defaults (null: none): the one list
  # the input is checked against and read through.
  alarms_defaults = {
    enabled                              = true
    disabled                             = []
    actions                              = []
    ok_actions                           = []
    period_seconds                       = 300
    publisher_iterator_age_threshold_ms  = 60000
    publisher_errors_threshold           = 0
    sweeper_errors_threshold             = 0
    oldest_pending_age_threshold_seconds = tonumber(null)
    consumer_dlq_age_threshold_seconds   = tonumber(null)
  }

  # var.alarms with its defaults, as object({ optional(...) }) gave it: an
  # attribute set to null takes its default, one known only after apply leaves
  # the others known (a count may depend on them). The module reads this.
  alarms = { for k, d in local.alarms_defaults : k => try(var.alarms[k] == null, true) ? d : var.alarms[k] }
}
