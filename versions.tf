terraform {
  # 1.5: `check` blocks, postconditions on data sources, optional() defaults.
  required_version = ">= 1.5"

  required_providers {
    # The only provider: the module must `init` from a provider mirror in
    # air-gapped CI, so no archive/null/local/external providers.
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}
