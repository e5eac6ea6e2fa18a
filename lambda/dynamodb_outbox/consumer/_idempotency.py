"""The adapter over Powertools idempotency: one record per event id and consumer.

The consumer drives Powertools' ``IdempotencyHandler`` itself, a class the
package does not export (docs/decisions.md, "The consumer drives Powertools'
IdempotencyHandler itself"; tests/unit/test_powertools_idempotency_contract.py
pins what is used here). Everything that touches it is in this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Final

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer, IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.base import IdempotencyHandler
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)

from dynamodb_outbox.consumer._batch import Outcome
from dynamodb_outbox.consumer._errors import PROCESS_ENDING, HandlerRaised, unwrapped
from dynamodb_outbox.consumer._logging import ENV_LAMBDA_FUNCTION_NAME, default_logger, log_failure
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.settings import (
    DEFAULT_EXPIRES_AFTER_SECONDS,
    ENV_EXPIRES_AFTER_SECONDS,
    ConfigurationError,
    integer_env,
)

#: The envelope field the idempotency record is keyed by (the ULID, end to end).
IDEMPOTENCY_EVENT_KEY: Final = "id"


_warned_without_window = False


def resolve_expires_after_seconds(
    explicit: int | None,
    environ: Mapping[str, str] | None = None,
    logger: Logger | None = None,
) -> int:
    """The idempotency window a consumer keeps records for.

    ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` is what the module derived
    (docs/seams.md, "Windows"): an ``explicit`` window may lengthen it, never
    shorten it (:class:`~dynamodb_outbox.settings.ConfigurationError`: a copy
    of an event arriving after a shorter window would take effect twice).
    Without the variable, ``explicit`` or :data:`DEFAULT_EXPIRES_AFTER_SECONDS`;
    on Lambda (``$AWS_LAMBDA_FUNCTION_NAME`` set) the default is logged as a
    warning, once per process: the function was not given the module's
    ``consumer_environment`` (or its ``consumers`` output's ``environment``).
    """
    env = os.environ if environ is None else environ
    derived = (
        integer_env(env, ENV_EXPIRES_AFTER_SECONDS, 0, minimum=1)
        if env.get(ENV_EXPIRES_AFTER_SECONDS, "").strip()
        else None
    )
    if explicit is not None and explicit <= 0:
        raise ValueError("expires_after_seconds must be positive")
    if derived is not None:
        if explicit is not None and explicit < derived:
            raise ConfigurationError(
                f"expires_after_seconds={explicit} is shorter than {ENV_EXPIRES_AFTER_SECONDS}"
                f"={derived}, the window the module derived from every place a copy of an "
                "event can still come from (docs/seams.md, Windows): a copy arriving after "
                "the shorter window would take effect twice. Drop the argument, or pass at "
                f"least {derived}"
            )
        return explicit if explicit is not None else derived
    if explicit is not None:
        return explicit
    global _warned_without_window
    if env.get(ENV_LAMBDA_FUNCTION_NAME) and not _warned_without_window:
        _warned_without_window = True
        (logger or default_logger).warning(
            f"{ENV_EXPIRES_AFTER_SECONDS} is not set: event ids are remembered "
            f"{DEFAULT_EXPIRES_AFTER_SECONDS} s (7 days), shorter than a copy of an event "
            "can still arrive behind the module (20 days or more, docs/seams.md Windows). "
            "Merge the module's consumer_environment output into this function's environment"
        )
    return DEFAULT_EXPIRES_AFTER_SECONDS


def idempotency_key_prefix(consumer_name: str) -> str:
    """The prefix of this consumer's idempotency keys: ``idempotency#<consumer name>``.

    Powertools stores ``<prefix>#<md5 of the event id>``. A fixed prefix (instead
    of Powertools' default, the Lambda function name plus the Python function's
    qualified name) keeps keys stable across code refactors, lets several
    consumers share one table without deduplicating each other's events, and
    lets IAM restrict a consumer to its own keys (``dynamodb:LeadingKeys``).
    """
    return f"idempotency#{checked_name(consumer_name)}"


def checked_name(consumer_name: str) -> str:
    # "#" separates key parts; a name containing it could collide with another
    # consumer's prefix ("a#b" starts with "a#"). Lambda names cannot hold "#".
    if not consumer_name or "#" in consumer_name:
        raise ValueError(f"consumer name must be non-empty and without '#': {consumer_name!r}")
    return consumer_name


def check_store(store: BasePersistenceLayer, config: IdempotencyConfig, key_prefix: str) -> None:
    # Powertools configures a persistence layer once and then ignores later
    # configs. A store first configured by another idempotent function would
    # hash the wrong field and silently stop deduplicating: refuse it.
    store.configure(config=config, key_prefix=key_prefix)
    if store.event_key_jmespath != IDEMPOTENCY_EVENT_KEY:
        raise ValueError(
            f"the persistence store is already configured with event_key_jmespath="
            f"{store.event_key_jmespath!r}; give the consumer a persistence store of its own"
        )
    if store.expires_after_seconds != config.expires_after_seconds:
        raise ValueError(
            f"the persistence store is already configured with expires_after_seconds="
            f"{store.expires_after_seconds}, not {config.expires_after_seconds}"
        )


def process_envelope(
    message_id: str,
    receive_count: object,
    envelope: Envelope,
    process_one: Callable[[Envelope], object],
    store: BasePersistenceLayer,
    config: IdempotencyConfig,
    key_prefix: str,
    log: Logger,
    *,
    replay: str | None = None,
    reprocess: bool = False,
    log_exception_text: bool = False,
) -> Outcome:
    fields = {
        "message_id": message_id,
        "event_id": envelope.id,
        "event_type": envelope.type,
        "receive_count": receive_count,
    }
    payload = envelope.to_dict()
    if replay:
        fields["replay_name"] = replay
    if reprocess:
        # Its own record per replay: once more than before, once however often
        # this replay delivers it.
        payload[IDEMPOTENCY_EVENT_KEY] = f"{envelope.id}#{replay}"
        log.info("replayed event to be reprocessed, as the replay's name asks", extra=fields)
    ran = False

    def run() -> None:
        nonlocal ran
        ran = True
        try:
            process_one(envelope)
        except Exception:
            raise
        except PROCESS_ENDING:
            raise
        except BaseException as exc:
            # Powertools deletes the in-progress record for an Exception only.
            raise HandlerRaised(exc) from exc

    try:
        IdempotencyHandler(
            function=run,
            function_payload=payload,
            config=config,
            persistence_store=store,
            key_prefix=key_prefix,
            function_args=(),
            function_kwargs={},
        ).handle()
    except IdempotencyAlreadyInProgressError:
        # Another invocation holds this event (a concurrent duplicate). Running
        # it here could run it twice; failing returns it to the queue, and by
        # its next delivery the other run has completed (-> skipped) or failed
        # (record deleted -> runs) or timed out (record expired -> runs).
        log.warning(
            "event is being processed by another invocation; returning it to the queue",
            extra=fields,
        )
        return Outcome.FAILED
    except Exception as exc:
        # The function raised (Powertools deleted the in-progress record, so the
        # retry runs it again) or the idempotency store failed.
        log_failure(log, fields, unwrapped(exc), with_text=log_exception_text)
        return Outcome.FAILED

    if not ran:
        log.info("duplicate event skipped: already processed", extra=fields)
        return Outcome.DUPLICATE
    return Outcome.PROCESSED
