"""Transactional outbox on DynamoDB: writer, stream publisher and consumer toolkit."""

__version__ = "0.1.0"
