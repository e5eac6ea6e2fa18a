"""A small orders service on dynamodb-outbox: the producer (api), two consumers."""
