# The smallest real deployment for tests/e2e/test_e2e_aws.py: the module with
# one reference consumer, in the account and region of the ambient AWS
# credentials (AWS_PROFILE / AWS_REGION). Everything is destroyed after the test.

terraform {
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.98, < 7.0"
    }
  }
}

provider "aws" {}

variable "name" {
  description = "Outbox name; the test sets a unique one (TF_VAR_name)."
  type        = string
  default     = "outbox-e2e"
}

variable "event_source" {
  description = "The source of the events the test writes; the audit consumer matches it."
  type        = string
  default     = "e2e.orders"
}

# The runner: test_e2e_aws.py sends a poison message to the consumer queue with
# the ambient credentials, and the queue's policy denies sqs:SendMessage to every
# IAM principal but operator_principal_arns. aws:PrincipalArn of an assumed role
# is the role's ARN: the session's issuer, not the session ARN itself. (Root
# credentials cannot be listed and are refused by the input's validation.)
data "aws_caller_identity" "runner" {}

data "aws_iam_session_context" "runner" {
  arn = data.aws_caller_identity.runner.arn
}

module "outbox" {
  source = "../../.."

  operator_principal_arns = [data.aws_iam_session_context.runner.issuer_arn]

  name = var.name
  tags = { Purpose = "dynamodb-outbox-e2e" }

  # Destroyed by the test's teardown.
  table = { deletion_protection_enabled = false }

  log_retention_days = 1

  consumers = {
    audit = {
      event_pattern            = jsonencode({ source = [var.event_source] })
      function_timeout_seconds = 5 # visibility timeout 30 s: the poison message reaches the DLQ in ~1 min
      max_receive_count        = 2
    }
  }
}

output "table_name" {
  description = "The outbox table."
  value       = module.outbox.table_name
}

output "idempotency_table_name" {
  description = "The idempotency table, also holding the reference consumer's ledger."
  value       = module.outbox.idempotency_table_name
}

output "audit_queue_url" {
  description = "The audit consumer's queue."
  value       = module.outbox.consumers["audit"].queue_url
}

output "audit_dlq_url" {
  description = "The audit consumer's DLQ."
  value       = module.outbox.consumers["audit"].dlq_url
}
