################################################################################
# Event bus
################################################################################

# Neither created nor read when publish_to = "sns" (sns.tf).
resource "aws_cloudwatch_event_bus" "this" {
  count = !local.publish_to_sns && var.event_bus.create ? 1 : 0

  name = local.event_bus_name

  # Events on the bus are encrypted with the module's key when given, with an AWS
  # owned key otherwise (hashicorp/aws >= 5.61, see versions.tf).
  kms_key_identifier = var.kms_key_arn

  tags = local.tags
}

################################################################################
# Existing event bus
################################################################################

# Reading the bus makes plan fail when it does not exist, rather than the
# publisher failing at run time (PutEvents to a missing bus fails per entry).
data "aws_cloudwatch_event_bus" "existing" {
  count = !local.publish_to_sns && !var.event_bus.create ? 1 : 0

  name = var.event_bus.name
}

locals {
  # null when publish_to = "sns".
  event_bus_arn = (
    local.publish_to_sns ? null
    : var.event_bus.create ? aws_cloudwatch_event_bus.this[0].arn : data.aws_cloudwatch_event_bus.existing[0].arn
  )
  # The created bus's name, through the resource, so that rules wait for the bus.
  event_bus_ref_name = (
    local.publish_to_sns ? null
    : var.event_bus.create ? aws_cloudwatch_event_bus.this[0].name : local.event_bus_name
  )
}
