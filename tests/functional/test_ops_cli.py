"""``outbox-ops`` against moto: each command's effect, its dry run, its re-run, its bad input.

``main(argv)`` is called in-process; clients come from the environment (moto),
except where a wrapper injects a fault or a Stubber stands in for an API moto
does not implement (SQS message move tasks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from dynamodb_outbox.local.destinations import DiscardedBatch, stream_failure_record
from dynamodb_outbox.ops import main
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_STATUS,
    STATUS_PENDING,
    STATUS_QUARANTINED,
    outbox_item,
    outbox_sk,
    pending_shard,
)
from tests.factories import ACCOUNT_ID, REGION, TABLE_NAME, make_envelope
from tests.functional.outbox_helpers import PK, RecordingEvents, write_outbox

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable, SnsTopic


def two_hours_ago() -> datetime:
    # Computed per test: a module-level constant ages while a long suite runs.
    return datetime.now(UTC) - timedelta(hours=2)


DLQ_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:orders-dlq"
SOURCE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:orders"


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def ops(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*argv: str, factory: Callable[[str], Any] | None = None, table: bool = True) -> Run:
        args = ["--table", TABLE_NAME, *argv] if table else list(argv)
        code = main(args, client_factory=factory)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def assert_one_line_error(run: Run, code: int, *parts: str) -> None:
    assert run.code == code, run
    assert "Traceback" not in run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    for part in parts:
        assert part in lines[0], lines[0]


def quarantine(table: OutboxTable, sk: str, reason: str = "bad payload", pk: str = PK) -> None:
    table.client.update_item(
        TableName=table.name,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="SET #s = :q, #r = :r, #a = :a REMOVE #p",
        ExpressionAttributeNames={
            "#s": ATTR_STATUS,
            "#r": ATTR_QUARANTINE_REASON,
            "#a": ATTR_QUARANTINED_AT,
            "#p": ATTR_PENDING_SHARD,
        },
        ExpressionAttributeValues={
            ":q": {"S": STATUS_QUARANTINED},
            ":r": {"S": reason},
            ":a": {"S": "2026-01-02T03:04:05.678Z"},
        },
    )


def item(table: OutboxTable, sk: str, pk: str = PK) -> dict[str, Any] | None:
    return table.get({"PK": {"S": pk}, "SK": {"S": sk}})


# ------------------------------------------------------------------------------ help


def test_every_command_has_help(ops: Callable[..., Run]) -> None:
    for command in ([], ["pending"], ["replay-failures"], ["replay"], ["redrive"], ["release"]):
        run = ops(*command, "--help", table=False)
        assert run.code == 0
        assert "usage: outbox-ops" in run.out
        assert "--dry-run" in run.out


@pytest.mark.parametrize("value", ["eight", "0", "16", "101", "8.5"])
@pytest.mark.parametrize("command", [["--help"], ["pending", "--help"], ["pending"], ["release"]])
def test_a_bad_pending_shards_variable_is_one_line_naming_it_even_for_help(
    ops: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, value: str, command: list[str]
) -> None:
    monkeypatch.setenv("OUTBOX_PENDING_SHARDS", value)
    run = ops(*command)
    assert_one_line_error(run, 2, "OUTBOX_PENDING_SHARDS", "must be 8", repr(value))


def test_the_console_script_reports_a_bad_variable_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dynamodb_outbox.ops", "--help"],
        capture_output=True,
        text=True,
        # PYTHONPATH kept: the package under test, not another checkout's install.
        env={
            "OUTBOX_PENDING_SHARDS": "lots",
            "PATH": "",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "outbox-ops: error: environment variable OUTBOX_PENDING_SHARDS must be 8 "
        "(the writers' shard count, the shards the sweeper reads), got 'lots'\n"
    )


def test_pending_help_says_quarantined_items_need_a_scan(ops: Callable[..., Run]) -> None:
    run = ops("pending", "--help", table=False)
    assert "Scan of the WHOLE" in run.out
    assert "--limit" in run.out


# --------------------------------------------------------------------------- pending


def test_pending_lists_pending_and_quarantined_oldest_first(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    outbox = write_outbox(outbox_table, 4, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(1), reason="invalid envelope: boom")

    data = ops("--json", "pending").json()

    assert data["pending"]["count"] == 3
    assert [row["event_id"] for row in data["pending"]["items"]] == [
        outbox.ids[0],
        outbox.ids[2],
        outbox.ids[3],
    ]
    first = data["pending"]["items"][0]
    assert first["event_type"] == "OrderPlaced"
    assert 7100 < first["age_seconds"] < 7300
    (quarantined,) = data["quarantined"]["items"]
    assert quarantined["event_id"] == outbox.ids[1]
    assert quarantined["quarantine_reason"] == "invalid envelope: boom"
    assert data["quarantined"]["count_is_complete"] is True
    assert data["quarantined"]["method"] == "Scan of the whole table"

    text = ops("pending")
    assert text.code == 0
    assert "pending: 3 (oldest 2h00m)" in text.out
    assert "reason=invalid envelope: boom" in text.out


def test_pending_limit_caps_the_list_not_the_count(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    outbox = write_outbox(outbox_table, 5, made_at=two_hours_ago())
    data = ops("--json", "pending", "--limit", "2", "--no-quarantined").json()
    assert data["pending"]["count"] == 5
    assert [row["event_id"] for row in data["pending"]["items"]] == outbox.ids[:2]
    assert data["quarantined"]["method"] == "skipped (--no-quarantined)"


def test_pending_with_pk_queries_the_collection(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    outbox = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    other = write_outbox(outbox_table, 1, made_at=two_hours_ago(), pk="ORDER#2")
    quarantine(outbox_table, outbox.sk(0))
    data = ops("--json", "pending", "--pk", PK).json()
    assert [row["event_id"] for row in data["pending"]["items"]] == [outbox.ids[1]]
    assert [row["event_id"] for row in data["quarantined"]["items"]] == [outbox.ids[0]]
    assert other.ids[0] not in json.dumps(data)
    assert data["quarantined"]["method"].startswith("Query")


def test_pending_on_an_empty_table(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    run = ops("pending")
    assert run.code == 0
    assert "pending: 0" in run.out
    assert "quarantined: 0" in run.out


# --------------------------------------------------------------------------- release


def test_release_dry_run_writes_nothing(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    outbox = write_outbox(outbox_table, 1, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(0))
    before = item(outbox_table, outbox.sk(0))

    run = ops("--dry-run", "release", "--event-id", outbox.ids[0])

    assert run.code == 0
    assert f"would release {PK} {outbox.ids[0]}" in run.out
    assert item(outbox_table, outbox.sk(0)) == before


def test_release_puts_the_item_back_in_the_pending_index(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    outbox = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(0))
    quarantine(outbox_table, outbox.sk(1))

    run = ops("release", "--event-id", outbox.ids[0])

    assert run.code == 0, run
    assert "next sweeper run publishes them" in run.out
    released = item(outbox_table, outbox.sk(0))
    assert released is not None
    assert released[ATTR_STATUS] == {"S": STATUS_PENDING}
    assert released[ATTR_PENDING_SHARD] == {"S": pending_shard(outbox.ids[0])}
    assert ATTR_QUARANTINE_REASON not in released
    assert ATTR_QUARANTINED_AT not in released
    assert outbox_table.pending_sort_keys() == {outbox.sk(0)}
    still = item(outbox_table, outbox.sk(1))
    assert still is not None and still[ATTR_STATUS] == {"S": STATUS_QUARANTINED}

    again = ops("--json", "release", "--event-id", outbox.ids[0])
    assert again.code == 0
    assert again.json()["released"] == []
    assert again.json()["not_quarantined"] == [outbox.ids[0]]
    assert item(outbox_table, outbox.sk(0)) == released


def test_release_all_then_rerun_is_a_noop(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    outbox = write_outbox(outbox_table, 3, made_at=two_hours_ago())
    for index in range(3):
        quarantine(outbox_table, outbox.sk(index))
    assert ops("--json", "release", "--all").json()["released"] == outbox.ids
    assert outbox_table.pending_sort_keys() == {outbox.sk(n) for n in range(3)}
    again = ops("release", "--all")
    assert again.code == 0
    assert "nothing to release" in again.out


def test_release_with_pk_uses_no_scan(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    outbox = write_outbox(outbox_table, 1, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(0))
    real = boto3.client("dynamodb", region_name=REGION)

    class NoScan:
        def __getattr__(self, name: str) -> Any:
            if name == "scan":
                raise AssertionError("release --pk must not Scan")
            return getattr(real, name)

    def factory(service: str) -> Any:
        return NoScan() if service == "dynamodb" else boto3.client(service, region_name=REGION)

    run = ops("release", "--all", "--pk", PK, factory=factory)
    assert run.code == 0, run
    assert outbox_table.pending_sort_keys() == {outbox.sk(0)}


def test_release_publish_now(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(0))
    run = ops("release", "--event-id", outbox.ids[0], "--publish-now", "--bus-name", event_bus.name)
    assert run.code == 0, run
    assert "published 1" in run.out
    assert event_bus.received_ids() == [outbox.ids[0]]
    assert item(outbox_table, outbox.sk(0)) is None
    assert item(outbox_table, outbox.sk(1)) is not None  # not ours to publish


def test_release_publish_now_to_sns(
    ops: Callable[..., Run], outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    outbox = write_outbox(outbox_table, 1, made_at=two_hours_ago())
    quarantine(outbox_table, outbox.sk(0))
    run = ops("release", "--all", "--publish-now", "--topic-arn", sns_topic.arn)
    assert run.code == 0, run
    assert sns_topic.received_ids() == outbox.ids
    assert item(outbox_table, outbox.sk(0)) is None


def test_release_publish_now_requarantines_poison(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    envelope = make_envelope()
    poison = outbox_item(PK, envelope) | {"envelope": {"S": "{not json"}}
    outbox_table.put(poison)
    quarantine(outbox_table, outbox_sk(envelope.id))
    run = ops("--json", "release", "--all", "--publish-now", "--bus-name", event_bus.name)
    assert run.code == 0, run
    assert run.json()["publish"]["quarantined"] == 1
    assert event_bus.received_ids() == []
    after = item(outbox_table, outbox_sk(envelope.id))
    assert after is not None and after[ATTR_STATUS] == {"S": STATUS_QUARANTINED}


def test_release_rejects_bad_event_ids(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    assert_one_line_error(ops("release", "--event-id", "nope"), 2, "--event-id must be a ULID")


def test_release_needs_event_ids_or_all(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    assert_one_line_error(ops("release"), 2, "one of the arguments --event-id --all is required")


# ------------------------------------------------------------------- replay-failures


@dataclass
class StreamRange:
    arn: str
    shard_id: str
    sequence_numbers: list[str]


def read_stream(table: OutboxTable) -> StreamRange:
    arn = table.client.describe_table(TableName=table.name)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard_id = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    return StreamRange(arn, shard_id, [r["dynamodb"]["SequenceNumber"] for r in records])


def failure_body(
    stream: StreamRange, first: int, last: int, *, arrival: datetime | None = None
) -> str:
    moment = (arrival or datetime.now(UTC)).timestamp()
    record = stream_failure_record(
        DiscardedBatch(
            shard_id=stream.shard_id,
            stream_arn=stream.arn,
            sequence_numbers=stream.sequence_numbers[first : last + 1],
            arrival_times=[moment] * (last + 1 - first),
        ),
        condition="RetryAttemptsExhausted",
        function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:publisher",
        request_id="00000000-0000-0000-0000-000000000001",
        invoke_count=3,
        function_error="Unhandled",
        now=moment,
    )
    return json.dumps(record)


@pytest.fixture
def failure_queue(aws: None) -> str:
    sqs = boto3.client("sqs", region_name=REGION)
    url: str = sqs.create_queue(QueueName="publisher-on-failure")["QueueUrl"]
    return url


def queue_depth(url: str) -> int:
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def visible(url: str) -> int:
    sqs = boto3.client("sqs", region_name=REGION)
    return int(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]["ApproximateNumberOfMessages"]
    )


def send(url: str, body: str) -> None:
    boto3.client("sqs", region_name=REGION).send_message(QueueUrl=url, MessageBody=body)


def test_replay_failures_republishes_what_is_still_pending(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    outbox = write_outbox(outbox_table, 5, made_at=two_hours_ago())
    stream = read_stream(outbox_table)
    # Item 0 was published meanwhile (gone), item 1 is quarantined, item 4 is
    # outside the failed batch's range.
    outbox_table.client.delete_item(
        TableName=TABLE_NAME, Key={"PK": {"S": PK}, "SK": {"S": outbox.sk(0)}}
    )
    quarantine(outbox_table, outbox.sk(1))
    send(failure_queue, failure_body(stream, 0, 3))

    run = ops(
        "--json", "replay-failures", "--queue-url", failure_queue, "--bus-name", event_bus.name
    )

    assert run.code == 0, run
    (record,) = run.json()["failure_records"]
    assert record["status"] == "handled"
    assert record["source"] == "stream"
    assert record["outbox_inserts"] == 4
    assert record["still_pending"] == outbox.ids[2:4]
    assert record["already_gone"] == 1
    assert record["quarantined"] == [outbox.ids[1]]
    assert record["publish"]["published"] == 2
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids[2:4])
    assert item(outbox_table, outbox.sk(2)) is None
    assert item(outbox_table, outbox.sk(4)) is not None
    assert queue_depth(failure_queue) == 0

    again = ops("replay-failures", "--queue-url", failure_queue, "--bus-name", event_bus.name)
    assert again.code == 0
    assert "nothing to replay" in again.out
    assert event_bus.received_ids() == []


def test_replay_failures_dry_run_changes_nothing(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    outbox = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    send(failure_queue, failure_body(read_stream(outbox_table), 0, 1))

    run = ops("--dry-run", "replay-failures", "--queue-url", failure_queue)

    assert run.code == 0, run
    assert f"would publish {outbox.ids[0]}, {outbox.ids[1]}" in run.out
    assert event_bus.received_ids() == []
    assert outbox_sort_keys(outbox_table) == {outbox.sk(0), outbox.sk(1)}
    assert visible(failure_queue) == 1  # received, then made visible again


def outbox_sort_keys(table: OutboxTable) -> set[str]:
    return {sk for sk in table.sort_keys() if sk.startswith("OUTBOX#")}


class TrimmedStreams:
    """A streams client whose records are all past the 24-hour retention."""

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}},
            "GetShardIterator",
        )


def trimmed_factory(service: str) -> Any:
    if service == "dynamodbstreams":
        return TrimmedStreams()
    return boto3.client(service, region_name=REGION)


def test_replay_failures_falls_back_to_the_pending_index_when_trimmed(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    old = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    stream = read_stream(outbox_table)
    far = write_outbox(outbox_table, 1, made_at=two_hours_ago() - timedelta(hours=5), pk="ORDER#2")
    send(failure_queue, failure_body(stream, 0, 1, arrival=two_hours_ago()))

    run = ops(
        "--json",
        "replay-failures",
        "--queue-url",
        failure_queue,
        "--bus-name",
        event_bus.name,
        factory=trimmed_factory,
    )

    assert run.code == 0, run
    (record,) = run.json()["failure_records"]
    assert record["source"] == "pending index window (stream records gone)"
    assert "TrimmedDataAccessException" in record["detail"]
    assert sorted(event_bus.received_ids()) == sorted(old.ids)
    assert item(outbox_table, far.sk(0), pk="ORDER#2") is not None  # outside the window
    assert queue_depth(failure_queue) == 0


def test_replay_failures_says_when_records_are_gone_for_good(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    write_outbox(outbox_table, 1, made_at=two_hours_ago())
    body = json.loads(failure_body(read_stream(outbox_table), 0, 0))
    del body["DDBStreamBatchInfo"]["approximateArrivalOfFirstRecord"]
    send(failure_queue, json.dumps(body))

    run = ops(
        "replay-failures",
        "--queue-url",
        failure_queue,
        "--bus-name",
        event_bus.name,
        factory=trimmed_factory,
    )

    assert run.code == 0, run
    assert "the sweeper publishes any of its items still pending" in run.out
    assert event_bus.received_ids() == []


def test_replay_failures_keeps_the_record_on_a_retryable_failure(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    outbox = write_outbox(outbox_table, 2, made_at=two_hours_ago())
    send(failure_queue, failure_body(read_stream(outbox_table), 0, 1))
    events = RecordingEvents(
        boto3.client("events", region_name=REGION),
        entry_errors={outbox.ids[1]: "ThrottlingException"},
    )

    def factory(service: str) -> Any:
        return events if service == "events" else boto3.client(service, region_name=REGION)

    args = ("replay-failures", "--queue-url", failure_queue, "--bus-name", event_bus.name)
    run = ops(*args, factory=factory)

    assert run.code == 3, run
    assert "record kept for a re-run" in run.out
    assert visible(failure_queue) == 1
    assert item(outbox_table, outbox.sk(1)) is not None

    fixed = ops(*args)  # the bus is fine again
    assert fixed.code == 0, fixed
    assert queue_depth(failure_queue) == 0
    assert outbox_sort_keys(outbox_table) == set()


def test_replay_failures_leaves_records_it_does_not_understand(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    send(failure_queue, json.dumps({"hello": "world"}))
    other = read_stream(outbox_table)
    other.arn = other.arn.replace(f"table/{TABLE_NAME}/", "table/someone-else/")
    other.sequence_numbers = ["1100000000017454423009"]
    send(failure_queue, failure_body(other, 0, 0))
    run = ops("replay-failures", "--queue-url", failure_queue, "--bus-name", event_bus.name)
    assert run.code == 0, run
    assert "not a DynamoDB stream failure record" in run.out
    assert "is not table outbox-test's" in run.out
    assert visible(failure_queue) == 2


def test_replay_failures_access_denied_on_the_stream(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus, failure_queue: str
) -> None:
    write_outbox(outbox_table, 1, made_at=two_hours_ago())
    stream = read_stream(outbox_table)
    send(failure_queue, failure_body(stream, 0, 0))

    class DeniedStreams:
        def get_shard_iterator(self, **kwargs: Any) -> Any:
            raise ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "denied"}},
                "GetShardIterator",
            )

    def factory(service: str) -> Any:
        if service == "dynamodbstreams":
            return DeniedStreams()
        return boto3.client(service, region_name=REGION)

    run = ops(
        "replay-failures",
        "--queue-url",
        failure_queue,
        "--bus-name",
        event_bus.name,
        factory=factory,
    )
    assert_one_line_error(
        run, 1, f"missing permission dynamodb:GetShardIterator on the stream of table {TABLE_NAME}"
    )
    assert visible(failure_queue) == 1  # handed back at once, not hidden for 5 minutes


def test_replay_failures_unknown_queue(
    ops: Callable[..., Run], outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/no-such-queue"
    run = ops("replay-failures", "--queue-url", url, "--bus-name", event_bus.name)
    assert_one_line_error(run, 1, f"queue {url} not found in region {REGION}")


def test_replay_failures_bad_queue_url(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    run = ops("replay-failures", "--queue-url", "orders-on-failure", "--bus-name", "b")
    assert_one_line_error(run, 2, "--queue-url must be an SQS queue URL")


def test_replay_failures_bad_topic_arn(
    ops: Callable[..., Run], outbox_table: OutboxTable, failure_queue: str
) -> None:
    run = ops("replay-failures", "--queue-url", failure_queue, "--topic-arn", "arn:aws:sqs:x")
    assert_one_line_error(run, 2, "--topic-arn must be an SNS topic ARN")


# --------------------------------------------------------------------------- redrive


def stubbed_sqs() -> tuple[Any, Stubber]:
    client = boto3.client("sqs", region_name=REGION)
    return client, Stubber(client)


def expect_queue(stub: Stubber, messages: int) -> str:
    url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/orders-dlq"
    stub.add_response(
        "get_queue_url",
        {"QueueUrl": url},
        {"QueueName": "orders-dlq", "QueueOwnerAWSAccountId": ACCOUNT_ID},
    )
    stub.add_response(
        "get_queue_attributes",
        {
            "Attributes": {
                "ApproximateNumberOfMessages": str(messages),
                "ApproximateNumberOfMessagesNotVisible": "0",
            }
        },
        {
            "QueueUrl": url,
            "AttributeNames": [
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        },
    )
    return url


def sqs_factory(client: Any) -> Callable[[str], Any]:
    def factory(service: str) -> Any:
        return client if service == "sqs" else boto3.client(service, region_name=REGION)

    return factory


# moto does not implement StartMessageMoveTask / ListMessageMoveTasks: the
# redrive tests run against a botocore Stubber (real request validation, canned answers).


def test_redrive_dry_run_prints_the_count(ops: Callable[..., Run], aws: None) -> None:
    client, stub = stubbed_sqs()
    url = expect_queue(stub, 7)
    stub.add_response(
        "list_dead_letter_source_queues",
        {"queueUrls": [url.replace("orders-dlq", "orders")]},
        {"QueueUrl": url},
    )
    stub.add_response(
        "list_message_move_tasks", {"Results": []}, {"SourceArn": DLQ_ARN, "MaxResults": 10}
    )
    with stub:
        run = ops("--dry-run", "redrive", "--dlq-arn", DLQ_ARN, factory=sqs_factory(client))
    stub.assert_no_pending_responses()  # and no StartMessageMoveTask was called
    assert run.code == 0, run
    assert "would move ~7 messages to its source queues" in run.out


def test_redrive_starts_a_move_task(ops: Callable[..., Run], aws: None) -> None:
    client, stub = stubbed_sqs()
    expect_queue(stub, 7)
    stub.add_response(
        "list_message_move_tasks", {"Results": []}, {"SourceArn": DLQ_ARN, "MaxResults": 10}
    )
    stub.add_response(
        "start_message_move_task",
        {"TaskHandle": "handle-1"},
        {"SourceArn": DLQ_ARN, "DestinationArn": SOURCE_ARN},
    )
    with stub:
        run = ops(
            "--json",
            "redrive",
            "--dlq-arn",
            DLQ_ARN,
            "--destination-arn",
            SOURCE_ARN,
            factory=sqs_factory(client),
        )
    stub.assert_no_pending_responses()
    assert run.code == 0, run
    assert run.json()["task_handle"] == "handle-1"
    assert run.json()["started"] is True


def test_redrive_rerun_while_a_task_runs_starts_nothing(ops: Callable[..., Run], aws: None) -> None:
    client, stub = stubbed_sqs()
    expect_queue(stub, 7)
    stub.add_response(
        "list_message_move_tasks",
        {"Results": [{"TaskHandle": "handle-1", "Status": "RUNNING", "SourceArn": DLQ_ARN}]},
        {"SourceArn": DLQ_ARN, "MaxResults": 10},
    )
    with stub:
        args = ("redrive", "--dlq-arn", DLQ_ARN, "--destination-arn", SOURCE_ARN)
        run = ops(*args, factory=sqs_factory(client))
    stub.assert_no_pending_responses()
    assert run.code == 0, run
    assert "already running" in run.out and "handle-1" in run.out


def test_redrive_bad_arn(ops: Callable[..., Run], aws: None) -> None:
    run = ops("redrive", "--dlq-arn", "orders-dlq")
    assert_one_line_error(run, 2, "--dlq-arn must be an SQS queue ARN")


def test_redrive_unknown_queue(ops: Callable[..., Run], aws: None) -> None:
    run = ops("redrive", "--dlq-arn", DLQ_ARN)  # real moto: the queue does not exist
    assert_one_line_error(run, 1, f"queue {DLQ_ARN} not found in region {REGION}")


def test_redrive_access_denied(ops: Callable[..., Run], aws: None) -> None:
    client, stub = stubbed_sqs()
    stub.add_client_error(
        "get_queue_url",
        service_error_code="AccessDenied",
        service_message="Access to the resource https://sqs.us-east-1.amazonaws.com/ is denied.",
    )
    with stub:
        run = ops("redrive", "--dlq-arn", DLQ_ARN, factory=sqs_factory(client))
    assert_one_line_error(run, 1, f"missing permission sqs:GetQueueUrl on {DLQ_ARN}")


# ------------------------------------------------------------------------- bad input


def test_unknown_table(ops: Callable[..., Run], aws: None) -> None:
    run = ops("--table", "nope", "pending", table=False)
    assert_one_line_error(run, 1, f"table nope not found in region {REGION}")


def test_missing_table(ops: Callable[..., Run], aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OUTBOX_TABLE_NAME", raising=False)
    assert_one_line_error(ops("pending", table=False), 2, "pass --table")


def test_global_options_after_the_command(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    write_outbox(outbox_table, 1, made_at=two_hours_ago())
    run = ops("pending", "--json", "--table", TABLE_NAME, table=False)
    assert run.code == 0, run
    assert run.json()["pending"]["count"] == 1


def test_access_denied_names_the_permission(
    ops: Callable[..., Run], outbox_table: OutboxTable
) -> None:
    real = boto3.client("dynamodb", region_name=REGION)
    resource = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{TABLE_NAME}/index/outbox-pending"

    class Denied:
        def query(self, **kwargs: Any) -> Any:
            raise ClientError(
                {
                    "Error": {
                        "Code": "AccessDeniedException",
                        "Message": f"User: arn:aws:sts::{ACCOUNT_ID}:assumed-role/ops/me is not "
                        f"authorized to perform: dynamodb:Query on resource: {resource} because "
                        "no identity-based policy allows the dynamodb:Query action",
                    }
                },
                "Query",
            )

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    def factory(service: str) -> Any:
        return Denied() if service == "dynamodb" else boto3.client(service, region_name=REGION)

    run = ops("pending", factory=factory)
    assert_one_line_error(run, 1, f"missing permission dynamodb:Query on {resource}")


def test_missing_pending_index(ops: Callable[..., Run], outbox_table: OutboxTable) -> None:
    run = ops("--pending-index", "nope", "pending")
    assert_one_line_error(
        run, 1, f"index nope not found on table {TABLE_NAME}", "indexes: outbox-pending"
    )


def test_the_cli_imports_nothing_heavy() -> None:
    code = (
        "import sys, dynamodb_outbox.ops.cli; "
        "heavy = [m for m in ('aws_lambda_powertools', 'dynamodb_outbox.publisher', 'moto') "
        "if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dynamodb_outbox.ops", "--help"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "replay-failures" in done.stdout
