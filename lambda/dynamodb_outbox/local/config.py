"""Event source mapping configurations: read, built, validated.

The runtime takes a mapping in exactly the shape Lambda's
``GetEventSourceMapping`` / ``ListEventSourceMappings`` return it, so the same
dict can come from three places:

* the emulator, after ``terraform apply`` created the mapping there:
  :func:`read_mappings`;
* a test that states it: :func:`mapping_config`, which fills in AWS's defaults;
* anything else that speaks the API shape (a saved fixture, real AWS).

Where the mapping lives matters with moto. moto cannot run a Python function
without Docker, yet it still acts on the mappings it holds:

* a **DynamoDB stream** mapping makes moto "invoke" the function on every write
  and then *discard the stream's records* — even when the mapping is disabled
  or deleted. A stream the runtime must read cannot have a mapping in moto:
  build the config with :func:`mapping_config` (or read it from wherever it was
  applied) instead.
* an **SQS** mapping makes moto receive the queue on every ``SendMessage``,
  which bumps ``ApproximateReceiveCount`` and can redrive untouched messages
  to the DLQ. Disabling it stops that (moto skips disabled SQS mappings;
  deleting does not): :func:`disable_emulator_mappings`, after reading it.

Every parsed setting is validated against the ranges AWS documents; a setting
the runtime cannot honour is refused with :class:`MappingConfigError` rather
than silently ignored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "INFINITE",
    "SQS_FIFO_MAX_BATCH_SIZE",
    "MappingConfigError",
    "SqsMappingSettings",
    "StreamMappingSettings",
    "arn_parts",
    "check_update",
    "disable_emulator_mappings",
    "is_enabled",
    "mapping_config",
    "read_mappings",
]

REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"

# AWS defaults and limits ("DynamoDB event source mapping parameters",
# "Lambda parameters for Amazon SQS event source mappings").
STREAM_DEFAULT_BATCH_SIZE = 100
# "Lambda parameters for Amazon DynamoDB event source mappings": BatchSize
# "Maximum: 10,000" (older API pages said 1,000). A batch above 1,000 is read
# with several GetRecords calls (1,000 records each) and stays under 6 MB.
STREAM_MAX_BATCH_SIZE = 10_000
SQS_DEFAULT_BATCH_SIZE = 10
SQS_MAX_BATCH_SIZE = 10_000
SQS_FIFO_MAX_BATCH_SIZE = 10
SQS_MAX_BATCH_SIZE_WITHOUT_WINDOW = 10
MAX_BATCHING_WINDOW_SECONDS = 300
MAX_RETRY_ATTEMPTS = 10_000
MIN_RECORD_AGE_SECONDS = 60
MAX_RECORD_AGE_SECONDS = 604_800
MAX_FILTER_PATTERN_CHARS = 4_096
INFINITE = -1

DEFAULT_ACCOUNT_ID = "123456789012"


class MappingConfigError(ValueError):
    """The mapping configuration is invalid, or asks for something the runtime refuses."""


def arn_parts(arn: str) -> tuple[str, str, str, str]:
    """``(service, region, account, resource)`` of an ARN."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise MappingConfigError(f"not an ARN: {arn!r}")
    return parts[2], parts[3], parts[4], parts[5]


def source_kind(event_source_arn: str) -> str:
    """``"dynamodb-stream"`` or ``"sqs"``; anything else is refused."""
    service, _, _, resource = arn_parts(event_source_arn)
    if service == "dynamodb" and "/stream/" in resource:
        return "dynamodb-stream"
    if service == "sqs":
        return "sqs"
    raise MappingConfigError(
        f"the local runtime drives DynamoDB stream and SQS mappings only, not {event_source_arn!r}"
    )


def _int_setting(
    config: Mapping[str, Any], key: str, default: int, *, low: int, high: int, infinite: bool
) -> int:
    raw = config.get(key)
    value = default if raw is None else raw
    if isinstance(value, bool) or not isinstance(value, int):
        raise MappingConfigError(f"{key} must be an integer, got {raw!r}")
    if infinite and value == INFINITE:
        return value
    if not low <= value <= high:
        allowed = f"-1 or {low}-{high}" if infinite else f"{low}-{high}"
        raise MappingConfigError(f"{key}={value} is out of range ({allowed})")
    return value


def _filter_patterns(config: Mapping[str, Any]) -> tuple[str, ...]:
    criteria = config.get("FilterCriteria") or {}
    filters = criteria.get("Filters") or []
    patterns: list[str] = []
    for entry in filters:
        pattern = entry.get("Pattern") if isinstance(entry, Mapping) else None
        if not isinstance(pattern, str):
            raise MappingConfigError(
                f'each FilterCriteria filter must be {{"Pattern": "<json>"}}, got {entry!r}'
            )
        if len(pattern) > MAX_FILTER_PATTERN_CHARS:
            raise MappingConfigError(
                f"a filter pattern is at most {MAX_FILTER_PATTERN_CHARS} characters "
                f"({len(pattern)} given)"
            )
        patterns.append(pattern)
    return tuple(patterns)


def _response_types(config: Mapping[str, Any]) -> bool:
    types = list(config.get("FunctionResponseTypes") or [])
    unknown = [t for t in types if t != REPORT_BATCH_ITEM_FAILURES]
    if unknown:
        raise MappingConfigError(f"unknown FunctionResponseTypes {unknown}")
    return REPORT_BATCH_ITEM_FAILURES in types


def is_enabled(config: Mapping[str, Any]) -> bool:
    """Whether the mapping polls: ``State`` Enabled (the default) and ``Enabled`` not false."""
    return config.get("State", "Enabled") == "Enabled" and config.get("Enabled") is not False


def check_update(before: str, config: Mapping[str, Any]) -> None:
    """Refuse an update the runtime cannot apply to a running mapping.

    ``UpdateEventSourceMapping`` takes no ``EventSourceArn``: a mapping on
    another source is another mapping (Terraform replaces it).
    """
    after = config.get("EventSourceArn")
    if after != before:
        raise MappingConfigError(
            f"an update cannot move a mapping from {before} to {after!r}: that is a new mapping"
        )


def _common(config: Mapping[str, Any]) -> tuple[str, str]:
    arn = config.get("EventSourceArn")
    if not isinstance(arn, str):
        raise MappingConfigError("the mapping has no EventSourceArn")
    state = config.get("State", "Enabled")
    if not is_enabled(config):
        raise MappingConfigError(
            f"the mapping for {arn} is {state!r}; a disabled mapping does not poll. If the "
            "emulator's copy was disabled by disable_emulator_mappings(), pass the config read "
            "before disabling it."
        )
    _, region, account, _ = arn_parts(arn)
    function_arn = config.get("FunctionArn") or (
        f"arn:aws:lambda:{region}:{account}:function:local-function"
    )
    return arn, str(function_arn)


@dataclass(frozen=True)
class StreamMappingSettings:
    """The settings of a DynamoDB stream mapping, defaults applied and validated."""

    event_source_arn: str
    function_arn: str
    batch_size: int
    batching_window_seconds: int
    filter_patterns: tuple[str, ...]
    report_batch_item_failures: bool
    bisect_batch_on_function_error: bool
    maximum_retry_attempts: int
    maximum_record_age_seconds: int
    on_failure_destination: str | None
    parallelization_factor: int = 1

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StreamMappingSettings:
        arn, function_arn = _common(config)
        if source_kind(arn) != "dynamodb-stream":
            raise MappingConfigError(f"{arn} is not a DynamoDB stream; use SqsMapping")
        position = config.get("StartingPosition") or "TRIM_HORIZON"
        if position == "LATEST":
            raise MappingConfigError(
                "StartingPosition LATEST is refused: records written while the mapping is being "
                "created or updated are never delivered, so outbox events would be lost. "
                "An outbox stream mapping must start at TRIM_HORIZON."
            )
        if position != "TRIM_HORIZON":
            raise MappingConfigError(
                f"StartingPosition {position!r} is not valid for a DynamoDB stream"
            )
        parallelization = _int_setting(
            config, "ParallelizationFactor", 1, low=1, high=10, infinite=False
        )
        if config.get("TumblingWindowInSeconds"):
            raise MappingConfigError(
                "TumblingWindowInSeconds is not supported by the local runtime"
            )
        destination = ((config.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
            "Destination"
        )
        if destination is not None and arn_parts(destination)[0] != "sqs":
            raise MappingConfigError(
                f"on-failure destination {destination!r}: the local runtime delivers failure "
                "records to SQS queues only"
            )
        return cls(
            event_source_arn=arn,
            function_arn=function_arn,
            batch_size=_int_setting(
                config,
                "BatchSize",
                STREAM_DEFAULT_BATCH_SIZE,
                low=1,
                high=STREAM_MAX_BATCH_SIZE,
                infinite=False,
            ),
            batching_window_seconds=_int_setting(
                config,
                "MaximumBatchingWindowInSeconds",
                0,
                low=0,
                high=MAX_BATCHING_WINDOW_SECONDS,
                infinite=False,
            ),
            filter_patterns=_filter_patterns(config),
            report_batch_item_failures=_response_types(config),
            bisect_batch_on_function_error=bool(config.get("BisectBatchOnFunctionError", False)),
            maximum_retry_attempts=_int_setting(
                config,
                "MaximumRetryAttempts",
                INFINITE,
                low=0,
                high=MAX_RETRY_ATTEMPTS,
                infinite=True,
            ),
            maximum_record_age_seconds=_int_setting(
                config,
                "MaximumRecordAgeInSeconds",
                INFINITE,
                low=MIN_RECORD_AGE_SECONDS,
                high=MAX_RECORD_AGE_SECONDS,
                infinite=True,
            ),
            on_failure_destination=destination,
            parallelization_factor=parallelization,
        )


@dataclass(frozen=True)
class SqsMappingSettings:
    """The settings of an SQS mapping, defaults applied; queue-dependent checks come later."""

    event_source_arn: str
    function_arn: str
    batch_size: int
    batching_window_seconds: int
    filter_patterns: tuple[str, ...]
    report_batch_item_failures: bool
    maximum_concurrency: int | None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SqsMappingSettings:
        arn, function_arn = _common(config)
        if source_kind(arn) != "sqs":
            raise MappingConfigError(f"{arn} is not an SQS queue; use StreamMapping")
        batch_size = _int_setting(
            config,
            "BatchSize",
            SQS_DEFAULT_BATCH_SIZE,
            low=1,
            high=SQS_MAX_BATCH_SIZE,
            infinite=False,
        )
        window = _int_setting(
            config,
            "MaximumBatchingWindowInSeconds",
            0,
            low=0,
            high=MAX_BATCHING_WINDOW_SECONDS,
            infinite=False,
        )
        if batch_size > SQS_MAX_BATCH_SIZE_WITHOUT_WINDOW and window < 1:
            raise MappingConfigError(
                f"BatchSize={batch_size} needs MaximumBatchingWindowInSeconds of at least 1"
            )
        concurrency = (config.get("ScalingConfig") or {}).get("MaximumConcurrency")
        if concurrency is not None and not 2 <= int(concurrency) <= 1000:
            raise MappingConfigError(f"MaximumConcurrency={concurrency} is out of range (2-1000)")
        return cls(
            event_source_arn=arn,
            function_arn=function_arn,
            batch_size=batch_size,
            batching_window_seconds=window,
            filter_patterns=_filter_patterns(config),
            report_batch_item_failures=_response_types(config),
            maximum_concurrency=None if concurrency is None else int(concurrency),
        )


def mapping_config(
    event_source_arn: str,
    *,
    function_arn: str | None = None,
    batch_size: int | None = None,
    maximum_batching_window_seconds: int = 0,
    filter_patterns: Sequence[Mapping[str, Any] | str] = (),
    report_batch_item_failures: bool = False,
    starting_position: str = "TRIM_HORIZON",
    bisect_batch_on_function_error: bool = False,
    maximum_retry_attempts: int = INFINITE,
    maximum_record_age_seconds: int = INFINITE,
    parallelization_factor: int = 1,
    on_failure_destination: str | None = None,
    maximum_concurrency: int | None = None,
) -> dict[str, Any]:
    """A mapping config as ``GetEventSourceMapping`` would return it, AWS defaults filled in.

    Stream-only arguments (starting position, retries, record age, bisect,
    parallelization, destination) are refused for a queue.
    ``filter_patterns`` are dicts (serialised here) or JSON strings.
    """
    _, region, account, _ = arn_parts(event_source_arn)
    kind = source_kind(event_source_arn)
    mapping_id = str(uuid.uuid4())
    config: dict[str, Any] = {
        "UUID": mapping_id,
        "EventSourceArn": event_source_arn,
        "FunctionArn": function_arn or f"arn:aws:lambda:{region}:{account}:function:local-function",
        "EventSourceMappingArn": (
            f"arn:aws:lambda:{region}:{account}:event-source-mapping:{mapping_id}"
        ),
        "LastModified": datetime.now(UTC),
        "State": "Enabled",
        "StateTransitionReason": "USER_INITIATED",
        "MaximumBatchingWindowInSeconds": maximum_batching_window_seconds,
        "FunctionResponseTypes": [REPORT_BATCH_ITEM_FAILURES] if report_batch_item_failures else [],
    }
    if filter_patterns:
        config["FilterCriteria"] = {
            "Filters": [
                {"Pattern": p if isinstance(p, str) else json.dumps(p)} for p in filter_patterns
            ]
        }
    if kind == "sqs":
        stream_only = {
            "starting_position": starting_position != "TRIM_HORIZON",
            "bisect_batch_on_function_error": bisect_batch_on_function_error,
            "maximum_retry_attempts": maximum_retry_attempts != INFINITE,
            "maximum_record_age_seconds": maximum_record_age_seconds != INFINITE,
            "parallelization_factor": parallelization_factor != 1,
            "on_failure_destination": on_failure_destination is not None,
        }
        given = [name for name, set_ in stream_only.items() if set_]
        if given:
            raise MappingConfigError(f"{', '.join(given)}: stream-only settings on an SQS mapping")
        config["BatchSize"] = SQS_DEFAULT_BATCH_SIZE if batch_size is None else batch_size
        if maximum_concurrency is not None:
            config["ScalingConfig"] = {"MaximumConcurrency": maximum_concurrency}
        return config
    if maximum_concurrency is not None:
        raise MappingConfigError("maximum_concurrency applies to SQS mappings only")
    config.update(
        {
            "BatchSize": STREAM_DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
            "StartingPosition": starting_position,
            "ParallelizationFactor": parallelization_factor,
            "BisectBatchOnFunctionError": bisect_batch_on_function_error,
            "MaximumRetryAttempts": maximum_retry_attempts,
            "MaximumRecordAgeInSeconds": maximum_record_age_seconds,
            "TumblingWindowInSeconds": 0,
            "DestinationConfig": {
                "OnFailure": (
                    {"Destination": on_failure_destination} if on_failure_destination else {}
                )
            },
        }
    )
    return config


def read_mappings(
    lambda_client: Any,
    function_name: str | None = None,
    *,
    event_source_arn: str | None = None,
) -> list[dict[str, Any]]:
    """The mappings of ``function_name`` and/or from ``event_source_arn``, as listed.

    ``lambda_client`` is a boto3 Lambda client. The dicts keep the API shape and
    feed :class:`~dynamodb_outbox.local.StreamMapping` or
    :class:`~dynamodb_outbox.local.SqsMapping` unchanged.

    moto 5.2.5 matches ``FunctionName`` against the exact string the mapping was
    created with: a mapping created with the function's ARN (as Terraform does
    when given ``aws_lambda_function.x.arn``) is not found by the function's
    name, unlike on AWS. Listing by ``event_source_arn`` finds it either way;
    filter the result on ``FunctionArn`` when the source feeds several functions.
    """
    if function_name is None and event_source_arn is None:
        raise ValueError("give function_name, event_source_arn or both")
    configs: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {}
    if function_name is not None:
        kwargs["FunctionName"] = function_name
    if event_source_arn is not None:
        kwargs["EventSourceArn"] = event_source_arn
    while True:
        page = lambda_client.list_event_source_mappings(**kwargs)
        configs.extend(dict(m) for m in page.get("EventSourceMappings", []))
        marker = page.get("NextMarker")
        if not marker:
            return configs
        kwargs["Marker"] = marker


def disable_emulator_mappings(lambda_client: Any, configs: Sequence[Mapping[str, Any]]) -> None:
    """Stop moto from acting on the SQS mappings it holds, so the runtime drives them alone.

    Call it after :func:`read_mappings` and hand the runtime the configs read
    before (they still say ``Enabled``). A DynamoDB stream mapping in moto
    cannot be neutralised this way — moto keeps discarding the stream's records
    even after the mapping is disabled or deleted — so one is refused loudly.
    """
    for config in configs:
        arn = str(config.get("EventSourceArn", ""))
        if source_kind(arn) == "dynamodb-stream":
            raise MappingConfigError(
                f"the emulator holds a stream mapping for {arn}: moto discards the stream's "
                "records on every write while it exists (disabling or deleting it does not stop "
                "that). Do not create stream mappings in moto for runtime tests; pass the "
                "mapping dict to StreamMapping instead."
            )
    for config in configs:
        lambda_client.update_event_source_mapping(UUID=config["UUID"], Enabled=False)
