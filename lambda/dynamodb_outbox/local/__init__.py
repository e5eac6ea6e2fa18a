"""The local AWS runtime: Lambda's event source mappings, in-process, on a virtual clock.

It drives handler functions against an emulator (moto in-process or a moto
server) the way Lambda's DynamoDB stream and SQS pollers do — batching,
filtering, partial batch responses, bisection, retries, record age, on-failure
destinations, visibility timeouts, redrive — so the outbox's whole flow can be
tested on one machine against the semantics in ``docs/aws-semantics.md``. Time is a
:class:`VirtualClock`: tests cross windows and timeouts with ``advance``, never
with sleeps.

This subpackage is test tooling: it imports moto (``pip install
dynamodb-outbox[local]``) and is left out of the Lambda deployment package.

Typical use::

    clock = VirtualClock()
    config = mapping_config(stream_arn, report_batch_item_failures=True)
    publisher = StreamMapping(
        config,
        handler,
        streams_client=boto3.client("dynamodbstreams"),
        clock=clock,
    )
    publisher.drain()
"""

try:
    import moto  # noqa: F401 - checked first, so that its absence says what to install
except ImportError as missing:
    raise ImportError(
        "dynamodb_outbox.local runs on moto, which is not installed: "
        "pip install dynamodb-outbox[local]",
        name=missing.name,
    ) from missing

from .clock import VirtualClock
from .concurrency import InterleavingDeadlock
from .config import (
    MappingConfigError,
    SqsMappingSettings,
    StreamMappingSettings,
    disable_emulator_mappings,
    mapping_config,
    read_mappings,
)
from .context import LambdaContext
from .events import PAYLOAD_LIMIT_BYTES
from .moto_clock import stream_records_follow
from .replication import GlobalTableReplication, ReplicationStats
from .responses import BatchVerdict, judge_response
from .results import (
    DrainLimitReached,
    DrainResult,
    Invocation,
    PollResult,
    SqsStats,
    StreamStats,
)
from .runtime import LocalRuntime
from .seams import SeamLedger, Undelivered, aws_seams
from .sqs_mapping import QueueSettings, SqsMapping
from .stream_mapping import STREAM_RETENTION_SECONDS, StreamMapping
from .toolkit_clock import toolkit_follows

__all__ = [
    "PAYLOAD_LIMIT_BYTES",
    "STREAM_RETENTION_SECONDS",
    "BatchVerdict",
    "DrainLimitReached",
    "DrainResult",
    "GlobalTableReplication",
    "InterleavingDeadlock",
    "Invocation",
    "LambdaContext",
    "LocalRuntime",
    "MappingConfigError",
    "PollResult",
    "QueueSettings",
    "ReplicationStats",
    "SeamLedger",
    "SqsMapping",
    "SqsMappingSettings",
    "SqsStats",
    "StreamMapping",
    "StreamMappingSettings",
    "StreamStats",
    "Undelivered",
    "VirtualClock",
    "aws_seams",
    "disable_emulator_mappings",
    "judge_response",
    "mapping_config",
    "read_mappings",
    "stream_records_follow",
    "toolkit_follows",
]
