terraform {
  # 1.5: `check` blocks, postconditions on data sources, optional() defaults.
  required_version = ">= 1.5"

  required_providers {
    # The only provider: the module must `init` from a provider mirror in
    # air-gapped CI, so no archive/null/local/external providers.
    # 5.61: kms_key_identifier on aws_cloudwatch_event_bus (var.kms_key_arn).
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.61, < 7.0"
    }
  }
}
