################################################################################
# Layer
################################################################################

# The dynamodb_outbox package for functions outside the module: producers import
# the writer, consumers the toolkit. Built by `make package` with the function
# zip (same files, under python/) and checked by `make package-check`.
resource "aws_lambda_layer_version" "this" {
  count = var.create_layer ? 1 : 0

  layer_name  = local.layer_name
  description = "dynamodb_outbox: outbox writer, envelope and consumer toolkit (needs the Powertools layer; boto3 from the runtime)."

  filename                 = local.layer_package_path
  source_code_hash         = filebase64sha256(local.layer_package_path)
  compatible_runtimes      = [var.lambda_runtime]
  compatible_architectures = [var.lambda_architecture]
  license_info             = "Apache-2.0"
}
