variable "region" {
  description = "AWS Region to deploy the outbox to."
  type        = string
  default     = "eu-west-1"
}

variable "iam_permissions_boundary_arn" {
  description = "Permissions boundary for the module's IAM roles, when the account requires one."
  type        = string
  default     = null
}

variable "extra_layer_arns" {
  description = "More layers for the publisher, e.g. a Lambda extension shipping logs elsewhere."
  type        = list(string)
  default     = []
}

variable "billing_function" {
  description = "An existing consumer function for billing (ARN, execution role name, timeout); null deploys only the reference consumer."
  type = object({
    arn             = string
    role_name       = string
    timeout_seconds = optional(number, 30)
  })
  default = null
}

variable "alarm_actions" {
  description = "SNS topic ARNs the module's alarms notify (your on-call topic). Empty: the alarms only change state, and every plan warns so."
  type        = list(string)
  default     = []
}
