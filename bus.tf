################################################################################
# Event bus
################################################################################

resource "aws_cloudwatch_event_bus" "this" {
  count = var.event_bus.create ? 1 : 0

  name = local.event_bus_name

  tags = local.tags
}

################################################################################
# Existing event bus
################################################################################

# Reading the bus makes plan fail when it does not exist, rather than the
# publisher failing at run time (PutEvents to a missing bus fails per entry).
data "aws_cloudwatch_event_bus" "existing" {
  count = var.event_bus.create ? 0 : 1

  name = var.event_bus.name
}

locals {
  event_bus_arn = var.event_bus.create ? aws_cloudwatch_event_bus.this[0].arn : data.aws_cloudwatch_event_bus.existing[0].arn
}
