################################################################################
# General
################################################################################

variable "name" {
  description = <<-EOT
    Name of this outbox. Every resource name is derived from it: the table (unless
    `table.name` is set), the bus (unless `event_bus.name` is set), the publisher
    function and role `<name>-publisher`, its log group and the on-failure queue
    `<name>-publisher-on-failure`. 3 to 40 characters: lowercase letters, digits and
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
    ARN of a customer managed KMS key that encrypts the table, the on-failure queue
    and the publisher's log group. null (default) uses AWS managed encryption:
    the `aws/dynamodb` key for the table, SSE-SQS for the queue, CloudWatch Logs'
    own encryption for the log group. The key policy must let CloudWatch Logs
    (`logs.<region>.amazonaws.com`) use the key; the publisher role is granted
    `kms:Decrypt` and `kms:GenerateDataKey` on it.
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

################################################################################
# Table
################################################################################

variable "table" {
  description = <<-EOT
    The DynamoDB table holding entities and their outbox items (`PK`/`SK`, both strings).
    - `create`: true (default) creates the table; false uses an existing table found by `name`.
      An existing table must have `PK`/`SK` string keys and a stream with NEW_IMAGE or
      NEW_AND_OLD_IMAGES, or plan fails. The module then manages neither its settings
      nor its encryption.
    - `name`: table name; defaults to `var.name`. Required when `create` is false.
    The other attributes apply to a created table only:
    - `stream_view_type`: NEW_IMAGE (default) or NEW_AND_OLD_IMAGES.
    - `billing_mode`: PAY_PER_REQUEST (default) or PROVISIONED (then set `read_capacity`
      and `write_capacity`).
    - `deletion_protection_enabled`: default true.
    - `ttl_attribute_name`: attribute holding the expiry time (epoch seconds), default
      "expires_at"; "" turns TTL off.
    Point-in-time recovery and server-side encryption are always on.
  EOT
  type = object({
    create                      = optional(bool, true)
    name                        = optional(string)
    stream_view_type            = optional(string, "NEW_IMAGE")
    billing_mode                = optional(string, "PAY_PER_REQUEST")
    read_capacity               = optional(number)
    write_capacity              = optional(number)
    deletion_protection_enabled = optional(bool, true)
    ttl_attribute_name          = optional(string, "expires_at")
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.table.create || var.table.name != null
    error_message = "Set table.name to the existing table's name when table.create is false."
  }

  validation {
    condition     = var.table.name == null ? true : can(regex("^[A-Za-z0-9_.-]{3,255}$", var.table.name))
    error_message = "The table.name must be 3 to 255 characters of letters, digits, underscores, hyphens and dots."
  }

  validation {
    condition     = contains(["NEW_IMAGE", "NEW_AND_OLD_IMAGES"], var.table.stream_view_type)
    error_message = "The table.stream_view_type must be NEW_IMAGE or NEW_AND_OLD_IMAGES: the publisher reads the event from the new image."
  }

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.table.billing_mode)
    error_message = "The table.billing_mode must be PAY_PER_REQUEST or PROVISIONED."
  }

  validation {
    condition = (
      var.table.billing_mode == "PAY_PER_REQUEST"
      ? var.table.read_capacity == null && var.table.write_capacity == null
      : (
        var.table.read_capacity != null && var.table.write_capacity != null
        ? var.table.read_capacity >= 1 && var.table.write_capacity >= 1 && floor(var.table.read_capacity) == var.table.read_capacity && floor(var.table.write_capacity) == var.table.write_capacity
        : false
      )
    )
    error_message = "With table.billing_mode PROVISIONED set table.read_capacity and table.write_capacity to whole numbers of at least 1; with PAY_PER_REQUEST leave both unset."
  }

  validation {
    condition     = var.table.ttl_attribute_name == "" || can(regex("^[A-Za-z0-9_.-]{1,255}$", var.table.ttl_attribute_name))
    error_message = "The table.ttl_attribute_name must be \"\" (no TTL) or 1 to 255 characters of letters, digits, underscores, hyphens and dots."
  }
}

################################################################################
# Event bus
################################################################################

variable "event_bus" {
  description = <<-EOT
    The EventBridge bus the publisher puts events on.
    - `create`: true (default) creates a bus; false uses an existing bus found by `name`
      (plan fails when it does not exist).
    - `name`: bus name; defaults to `var.name`. Required when `create` is false
      ("default" selects the account's default bus).
  EOT
  type = object({
    create = optional(bool, true)
    name   = optional(string)
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.event_bus.create || var.event_bus.name != null
    error_message = "Set event_bus.name to the existing bus's name when event_bus.create is false."
  }

  validation {
    condition     = var.event_bus.name == null ? true : can(regex("^[A-Za-z0-9._/-]{1,256}$", var.event_bus.name)) && !startswith(var.event_bus.name, "aws.")
    error_message = "The event_bus.name must be 1 to 256 characters of letters, digits, dots, hyphens, underscores and slashes, and must not start with \"aws.\"."
  }

  validation {
    condition     = !(var.event_bus.create && var.event_bus.name == "default")
    error_message = "The bus named \"default\" always exists: use event_bus = { create = false, name = \"default\" } to publish to it."
  }
}

################################################################################
# Functions (shared settings)
################################################################################

variable "lambda_runtime" {
  description = "Python runtime of the module's functions. Default python3.13, the newest the hashicorp/aws provider 5.x accepts."
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

variable "powertools_layer_arn" {
  description = <<-EOT
    Layer providing Powertools for AWS Lambda (Python) v3 to the module's functions.
    - null (default): the public AWS layer for the function's region, runtime and
      architecture, `arn:aws:lambda:<region>:017000801446:layer:AWSLambdaPowertoolsPythonV3-<python3XX>-<arch>:27`
      (commercial regions only; elsewhere set the ARN explicitly).
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
  EOT
  type = object({
    memory_size_mb   = optional(number, 256)
    timeout_seconds  = optional(number, 60)
    log_level        = optional(string, "INFO")
    extra_layer_arns = optional(list(string), [])
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.publisher.memory_size_mb >= 128 && var.publisher.memory_size_mb <= 10240 && floor(var.publisher.memory_size_mb) == var.publisher.memory_size_mb
    error_message = "The publisher.memory_size_mb must be a whole number of MB from 128 to 10240."
  }

  validation {
    condition     = var.publisher.timeout_seconds >= 1 && var.publisher.timeout_seconds <= 900 && floor(var.publisher.timeout_seconds) == var.publisher.timeout_seconds
    error_message = "The publisher.timeout_seconds must be a whole number of seconds from 1 to 900."
  }

  validation {
    condition     = contains(["DEBUG", "INFO", "WARNING", "ERROR"], var.publisher.log_level)
    error_message = "The publisher.log_level must be DEBUG, INFO, WARNING or ERROR."
  }

  validation {
    condition     = length(var.publisher.extra_layer_arns) <= 4 && alltrue([for arn in var.publisher.extra_layer_arns : can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$", arn))])
    error_message = "The publisher.extra_layer_arns must hold at most 4 layer version ARNs (arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>); Lambda allows 5 layers including Powertools."
  }
}

variable "stream_mapping" {
  description = <<-EOT
    The event source mapping from the table's stream to the publisher. It always reads
    from TRIM_HORIZON, keeps only INSERTs of `OUTBOX#` items, reports partial batch
    failures, bisects failing batches and sends what it gives up on to the on-failure
    queue; these knobs tune it:
    - `batch_size`: 1 to 10000 records, default 100.
    - `maximum_batching_window_in_seconds`: 0 to 300, default 0.
    - `parallelization_factor`: concurrent batches per shard, 1 to 10, default 1.
    - `maximum_retry_attempts`: 0 to 10000, default 10 (never infinite: a record that
      keeps failing must not block its shard).
    - `maximum_record_age_in_seconds`: 60 to 604800, default 86400 (stream records are
      trimmed after 24 hours anyway; never infinite).
    - `enabled`: default true.
  EOT
  type = object({
    batch_size                         = optional(number, 100)
    maximum_batching_window_in_seconds = optional(number, 0)
    parallelization_factor             = optional(number, 1)
    maximum_retry_attempts             = optional(number, 10)
    maximum_record_age_in_seconds      = optional(number, 86400)
    enabled                            = optional(bool, true)
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.stream_mapping.batch_size >= 1 && var.stream_mapping.batch_size <= 10000 && floor(var.stream_mapping.batch_size) == var.stream_mapping.batch_size
    error_message = "The stream_mapping.batch_size must be a whole number from 1 to 10000."
  }

  validation {
    condition     = var.stream_mapping.maximum_batching_window_in_seconds >= 0 && var.stream_mapping.maximum_batching_window_in_seconds <= 300 && floor(var.stream_mapping.maximum_batching_window_in_seconds) == var.stream_mapping.maximum_batching_window_in_seconds
    error_message = "The stream_mapping.maximum_batching_window_in_seconds must be a whole number from 0 to 300."
  }

  validation {
    condition     = var.stream_mapping.parallelization_factor >= 1 && var.stream_mapping.parallelization_factor <= 10 && floor(var.stream_mapping.parallelization_factor) == var.stream_mapping.parallelization_factor
    error_message = "The stream_mapping.parallelization_factor must be a whole number from 1 to 10."
  }

  validation {
    condition     = var.stream_mapping.maximum_retry_attempts >= 0 && var.stream_mapping.maximum_retry_attempts <= 10000 && floor(var.stream_mapping.maximum_retry_attempts) == var.stream_mapping.maximum_retry_attempts
    error_message = "The stream_mapping.maximum_retry_attempts must be a whole number from 0 to 10000 (-1, infinite retries, is not allowed: one failing record would block its shard for 24 hours)."
  }

  validation {
    condition     = var.stream_mapping.maximum_record_age_in_seconds >= 60 && var.stream_mapping.maximum_record_age_in_seconds <= 604800 && floor(var.stream_mapping.maximum_record_age_in_seconds) == var.stream_mapping.maximum_record_age_in_seconds
    error_message = "The stream_mapping.maximum_record_age_in_seconds must be a whole number from 60 to 604800 (-1, infinite age, is not allowed)."
  }
}
