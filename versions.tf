terraform {
  # 1.5: `check` blocks, postconditions on data sources, optional() defaults.
  required_version = ">= 1.5"

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
