terraform {
  # 1.9: validations that refer to other inputs (consumers vs name and
  # publish_to), so `terraform validate` reports them; also `check` blocks,
  # postconditions on data sources and optional() defaults (1.5).
  # Not 1.15.0: its `init` evaluated a module's validations that refer to another
  # input before that input had a value and failed with "Reference to
  # uninitialized variable" (hashicorp/terraform#38463, #38508); 1.15.1 fixed it
  # (hashicorp/terraform#38471). docs/decisions.md, "Terraform 1.15".
  required_version = ">= 1.9, != 1.15.0"

  required_providers {
    # The only provider: the module must `init` from a provider mirror in
    # air-gapped CI, so no archive/null/local/external providers.
    # 5.98: dead_letter_config on aws_cloudwatch_event_bus (the bus DLQ, bus.tf;
    # hashicorp/terraform-provider-aws#42471, released in 5.98.0). It also covers
    # 5.61's kms_key_identifier on the bus (var.kms_key_arn).
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.98, < 7.0"
    }
  }
}
