"""``python -m dynamodb_outbox.ops``: the same as the ``outbox-ops`` console script."""

from dynamodb_outbox.ops.cli import console_main

console_main()
