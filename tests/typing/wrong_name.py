"""A misspelt import from the package: mypy --strict must refuse it, as Python does."""

from dynamodb_outbox import OutboxWritter  # expected: attr-defined

__all__ = ["OutboxWritter"]
