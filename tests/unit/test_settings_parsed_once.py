"""Each setting is read in one place, and every part that takes it agrees with that place.

``publish_to`` (the writer's argument, ``OUTBOX_PUBLISH_TO``,
``OUTBOX_CONSUMER_TRANSPORT``), an SNS topic ARN (the publisher's sink, a
consumer's expected sender, ``outbox-ops --topic-arn``), the ``.fifo`` suffix
and the pending-shard count were each decoded in three or four places, not
always alike. Here every accepted and refused value goes through every part
that reads it; the source checks at the end keep the copies from coming back.
"""

from __future__ import annotations

import ast
import functools
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dynamodb_outbox
from dynamodb_outbox import sizes
from dynamodb_outbox.consumer import _processing as consumer_processing
from dynamodb_outbox.ops._arns import check_topic_arn
from dynamodb_outbox.ops._errors import OpsError
from dynamodb_outbox.outbox_item import (
    DEFAULT_PENDING_SHARDS,
    MAX_PENDING_SHARDS,
    pending_shard,
    shard_count,
    writers_shard_count,
)
from dynamodb_outbox.pending_index import shard_keys
from dynamodb_outbox.sender_checks import ExpectedSender, expected_sender_from_environment
from dynamodb_outbox.settings import (
    ConfigurationError,
    pending_shards_from_environment,
    publish_to_from_environment,
    sink_from_environment,
)
from dynamodb_outbox.sinks import (
    PUBLISH_TO,
    SNS_FIFO_RULES,
    SnsSink,
    parse_publish_to,
    parse_topic_arn,
    rules_for,
)
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter

PACKAGE = Path(dynamodb_outbox.__file__).parent
# The test kit and the local runtime mirror AWS and the module for tests; they
# are not shipped and are not the package's own reading of a setting.
NOT_SHIPPED = ("local", "testing")

ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:eu-west-1:{ACCOUNT}:orders"
FIFO_TOPIC = f"{TOPIC}.fifo"


class Clients:
    def __call__(self, service: str) -> object:
        return object()


# ------------------------------------------------------------------- publish_to

ACCEPTED_PUBLISH_TO = [
    ("eventbridge", "eventbridge"),
    ("sns", "sns"),
    ("sns_fifo", "sns_fifo"),
    ("SNS", "sns"),
    (" sns_fifo ", "sns_fifo"),
    ("EventBridge\n", "eventbridge"),
]
REFUSED_PUBLISH_TO = ["kinesis", "sns-fifo", "snsfifo", "event bridge", "sqs", "fifo"]


@pytest.mark.parametrize(("value", "name"), ACCEPTED_PUBLISH_TO)
def test_publish_to_accepts_each_documented_value_whatever_its_case(value: str, name: str) -> None:
    assert parse_publish_to(value) == name


@pytest.mark.parametrize("value", [*REFUSED_PUBLISH_TO, "", None, 1])
def test_publish_to_refuses_anything_else_listing_the_values_it_takes(value: object) -> None:
    with pytest.raises(ValueError, match="eventbridge, sns, sns_fifo"):
        parse_publish_to(value)


def test_the_values_are_those_the_modules_publish_to_validation_lists() -> None:
    variables = (PACKAGE.parents[1] / "variables.tf").read_text()
    listed = ", ".join(f'"{name}"' for name in PUBLISH_TO)
    assert f"contains([{listed}], var.publish_to)" in variables


def _writer_publish_to(value: str) -> object:
    return OutboxWriter.from_environment({"OUTBOX_TABLE_NAME": "t", "OUTBOX_PUBLISH_TO": value})


def _sink_publish_to(value: str) -> object:
    # Every sink gets what it needs, so only OUTBOX_PUBLISH_TO can be refused.
    environ = {"OUTBOX_PUBLISH_TO": value, "OUTBOX_EVENT_BUS_NAME": "bus"}
    return sink_from_environment({**environ, "OUTBOX_TOPIC_ARN": FIFO_TOPIC}, Clients())


def _consumer_publish_to(value: str) -> object:
    return expected_sender_from_environment(
        {
            "OUTBOX_CONSUMER_TRANSPORT": value,
            "OUTBOX_CONSUMER_EVENT_BUS_ARN": f"arn:aws:events:eu-west-1:{ACCOUNT}:event-bus/b",
            "OUTBOX_CONSUMER_TOPIC_ARN": FIFO_TOPIC,
        }
    )


PUBLISH_TO_READERS: dict[str, tuple[Callable[[str], object], type[Exception]]] = {
    "writer argument": (lambda value: OutboxWriter("t", publish_to=value), InvalidWrite),
    "sink rules": (rules_for, ValueError),
    "writer environment": (_writer_publish_to, InvalidWrite),
    "publisher and sweeper environment": (_sink_publish_to, ConfigurationError),
    "consumer environment": (_consumer_publish_to, ConfigurationError),
}


@pytest.mark.parametrize("reader", sorted(PUBLISH_TO_READERS))
@pytest.mark.parametrize("value", [value for value, _ in ACCEPTED_PUBLISH_TO])
def test_every_reader_of_publish_to_takes_what_the_parser_takes(reader: str, value: str) -> None:
    read, _ = PUBLISH_TO_READERS[reader]
    read(value)


@pytest.mark.parametrize("reader", sorted(PUBLISH_TO_READERS))
@pytest.mark.parametrize("value", REFUSED_PUBLISH_TO)
def test_every_reader_of_publish_to_refuses_what_the_parser_refuses(
    reader: str, value: str
) -> None:
    read, error = PUBLISH_TO_READERS[reader]
    with pytest.raises(error, match=value):
        read(value)


@pytest.mark.parametrize("value", ["", "  "])
def test_an_unset_outbox_publish_to_is_eventbridge_for_the_writer_and_the_publisher(
    value: str,
) -> None:
    assert publish_to_from_environment({"OUTBOX_PUBLISH_TO": value}) == "eventbridge"
    assert publish_to_from_environment({}) == "eventbridge"


# ---------------------------------------------------------------- SNS topic ARN

ACCEPTED_TOPIC_ARNS = [
    TOPIC,
    FIFO_TOPIC,
    f"arn:aws-us-gov:sns:us-gov-west-1:{ACCOUNT}:orders_2-b",
    f"arn:aws-cn:sns:cn-north-1:{ACCOUNT}:{'t' * 256}",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:{'t' * 251}.fifo",
]
REFUSED_TOPIC_ARNS = [
    "orders",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:",
    f"arn:aws:sns::{ACCOUNT}:orders",
    "arn:aws:sns:eu-west-1:1234:orders",
    f"arn:aws:sqs:eu-west-1:{ACCOUNT}:orders",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:orders.v2",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:orders:extra",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:{'t' * 257}",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:{'t' * 252}.fifo",
    f"{TOPIC}\n",
    f"arn:aws:sns:eu-west-1:{ACCOUNT}:ord ers",
]


@pytest.mark.parametrize("arn", ACCEPTED_TOPIC_ARNS)
def test_a_topic_arn_is_read_into_its_parts(arn: str) -> None:
    topic = parse_topic_arn(arn)

    assert topic.arn == arn
    assert f"arn:{topic.partition}:sns:{topic.region}:{topic.account}:{topic.name}" == arn
    assert topic.fifo == arn.endswith(".fifo")


@pytest.mark.parametrize("arn", [*REFUSED_TOPIC_ARNS, None])
def test_a_malformed_topic_arn_is_refused_showing_the_form(arn: object) -> None:
    with pytest.raises(ValueError, match=r"SNS topic ARN \(arn:<partition>:sns:"):
        parse_topic_arn(arn)


TOPIC_ARN_READERS: dict[str, tuple[Callable[[str], object], type[Exception]]] = {
    "sink": (lambda arn: SnsSink(object(), arn), ValueError),  # type: ignore[arg-type]
    "publisher and sweeper environment": (
        lambda arn: sink_from_environment(
            {"OUTBOX_PUBLISH_TO": "sns", "OUTBOX_TOPIC_ARN": arn}, Clients()
        ),
        ConfigurationError,
    ),
    "consumer expected sender": (ExpectedSender.sns, ConfigurationError),
    "outbox-ops --topic-arn": (check_topic_arn, OpsError),
}


@pytest.mark.parametrize("reader", sorted(TOPIC_ARN_READERS))
@pytest.mark.parametrize("arn", ACCEPTED_TOPIC_ARNS)
def test_every_reader_of_a_topic_arn_takes_what_the_parser_takes(reader: str, arn: str) -> None:
    read, _ = TOPIC_ARN_READERS[reader]
    read(arn)


@pytest.mark.parametrize("reader", sorted(TOPIC_ARN_READERS))
@pytest.mark.parametrize("arn", REFUSED_TOPIC_ARNS)
def test_every_reader_of_a_topic_arn_refuses_what_the_parser_refuses(reader: str, arn: str) -> None:
    read, error = TOPIC_ARN_READERS[reader]
    with pytest.raises(error, match="SNS topic ARN"):
        read(arn)


# ------------------------------------------------------------------------ .fifo


@pytest.mark.parametrize(
    ("value", "fifo"),
    [
        (FIFO_TOPIC, True),
        (f"arn:aws:sqs:eu-west-1:{ACCOUNT}:orders.fifo", True),
        (f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders.fifo", True),
        ("orders.fifo", True),
        (TOPIC, False),
        ("orders.FIFO", False),
        ("orders.fifo.dlq", False),
        ("", False),
        (None, False),
    ],
)
def test_fifo_is_told_by_the_name_suffix_alone(value: object, fifo: bool) -> None:
    assert sizes.is_fifo(value) is fifo


def test_the_consumer_and_the_sinks_tell_fifo_by_the_one_test() -> None:
    assert consumer_processing.is_fifo is sizes.is_fifo
    assert SnsSink(object(), FIFO_TOPIC).fifo  # type: ignore[arg-type]
    assert not SnsSink(object(), TOPIC).fifo  # type: ignore[arg-type]


def test_sns_fifo_needs_a_fifo_topic_and_gets_the_fifo_rules() -> None:
    with pytest.raises(ConfigurationError, match="OUTBOX_TOPIC_ARN must name a FIFO topic"):
        sink_from_environment({"OUTBOX_PUBLISH_TO": "sns_fifo", "OUTBOX_TOPIC_ARN": TOPIC})
    sink = sink_from_environment(
        {"OUTBOX_PUBLISH_TO": "sns_fifo", "OUTBOX_TOPIC_ARN": FIFO_TOPIC}, Clients()
    )
    assert sink.rules == SNS_FIFO_RULES


# ---------------------------------------------------------------- pending shards


@pytest.mark.parametrize("shards", [1, DEFAULT_PENDING_SHARDS, MAX_PENDING_SHARDS])
def test_a_shard_count_within_the_bound_is_taken_by_the_writer_item_and_the_index(
    shards: int,
) -> None:
    assert shard_count(shards) == shards
    assert pending_shard("01ARZ3NDEKTSV4RRFFQ69G5FAV", shards) in shard_keys(shards)


@pytest.mark.parametrize("shards", [0, -1, MAX_PENDING_SHARDS + 1, True, 8.0, "8", None])
def test_a_shard_count_outside_the_bound_is_refused_alike_everywhere(shards: Any) -> None:
    for read in (shard_count, shard_keys, lambda n: pending_shard("01ARZ3NDEKTSV4RRFFQ69G5FAV", n)):
        with pytest.raises(ValueError, match="pending shards must be"):
            read(shards)


SHARD_SETTINGS: dict[str, tuple[Callable[[Any], object], type[Exception], str]] = {
    "writer argument": (
        lambda n: OutboxWriter("t", pending_shards=n),
        InvalidWrite,
        "pending_shards",
    ),
    "OUTBOX_PENDING_SHARDS": (
        lambda n: pending_shards_from_environment({"OUTBOX_PENDING_SHARDS": str(n)}),
        ConfigurationError,
        "OUTBOX_PENDING_SHARDS",
    ),
    "writers_shard_count": (lambda n: writers_shard_count(n, "x"), ValueError, "x"),
}


@pytest.mark.parametrize("setting", sorted(SHARD_SETTINGS))
@pytest.mark.parametrize("shards", [1, 4, 16, MAX_PENDING_SHARDS, 0])
def test_a_shard_setting_other_than_the_writers_count_is_refused_naming_it(
    setting: str, shards: int
) -> None:
    read, error, name = SHARD_SETTINGS[setting]
    with pytest.raises(error, match=f"{name} must be {DEFAULT_PENDING_SHARDS} .*sweeper reads"):
        read(shards)


@pytest.mark.parametrize("setting", sorted(SHARD_SETTINGS))
def test_the_writers_shard_count_is_taken_by_every_setting(setting: str) -> None:
    read, _, _ = SHARD_SETTINGS[setting]
    read(DEFAULT_PENDING_SHARDS)


# ------------------------------------------- one source: no copy in the package


@functools.cache
def _shipped_modules() -> list[tuple[str, ast.Module]]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in NOT_SHIPPED:
            continue
        modules.append((str(relative), ast.parse(path.read_text(), str(path))))
    return modules


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _where(predicate: Callable[[ast.AST], bool]) -> dict[str, int]:
    found: dict[str, int] = {}
    for name, tree in _shipped_modules():
        docstrings = _docstrings(tree)
        hits = sum(1 for node in ast.walk(tree) if id(node) not in docstrings and predicate(node))
        if hits:
            found[name] = hits
    return found


def _is_text_with(fragment: str) -> Callable[[ast.AST], bool]:
    return lambda node: (
        isinstance(node, ast.Constant) and isinstance(node.value, str) and fragment in node.value
    )


def _calls(attribute: str, keyword: str | None = None) -> Callable[[ast.AST], bool]:
    def match(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == attribute
            and (keyword is None or any(k.arg == keyword for k in node.keywords))
        )

    return match


def test_the_fifo_suffix_is_written_once() -> None:
    assert _where(_is_text_with(".fifo")) == {"sizes.py": 1}


def test_publish_to_names_are_written_once() -> None:
    # sinks/_publish_to.py: the constant and the parser's type (a Literal repeats it);
    # sender_checks.py: the consumer's body shapes, keyed by that type.
    found = _where(_is_text_with("sns_fifo"))
    assert found == {"sinks/_publish_to.py": 2, "sender_checks.py": 1}


def test_only_the_clock_writes_an_instant_as_text_with_milliseconds() -> None:
    assert _where(_calls("isoformat", "timespec")) == {"_clock.py": 1}


def test_only_the_clock_reads_the_invocations_remaining_time() -> None:
    assert _where(_calls("get_remaining_time_in_millis")) == {}
    # getattr(context, "get_remaining_time_in_millis"): the clock, and the
    # consumer's check before it hands the context to Powertools.
    assert _where(_is_text_with("get_remaining_time_in_millis")) == {
        "_clock.py": 1,
        "consumer/_processing.py": 2,
    }


def test_only_stream_types_reads_a_string_attribute() -> None:
    def reads_s(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and any(isinstance(a, ast.Constant) and a.value == "S" for a in node.args)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "get")
                or (isinstance(node.func, ast.Name) and node.func.id == "lookup")
            )
        )

    assert _where(reads_s) == {"stream_types.py": 1}


def test_no_shipped_function_defaults_the_table_keys() -> None:
    """The module configures the key names: a forgotten argument must fail, not read PK/SK.

    Only the writer's constructor keeps ``PK``/``SK`` as its documented
    default (``partition_key``/``sort_key``), and ``outbox_item.outbox_item``,
    a public function of the item module that the writer calls with its keys.
    """
    defaulted = []
    for info in pkgutil.walk_packages(dynamodb_outbox.__path__, "dynamodb_outbox."):
        if info.name.split(".")[1] in NOT_SHIPPED or info.name.endswith("__main__"):
            continue
        module = __import__(info.name, fromlist=["_"])
        for owner_name, owner in vars(module).items():
            if getattr(owner, "__module__", None) != info.name or not callable(owner):
                continue
            functions = [owner]
            if inspect.isclass(owner):
                functions = [
                    member for member in vars(owner).values() if inspect.isfunction(member)
                ] + [owner]
            for function in functions:
                try:
                    parameters = inspect.signature(function).parameters.values()
                except (TypeError, ValueError):
                    continue
                for parameter in parameters:
                    if parameter.default is inspect.Parameter.empty:
                        continue
                    if parameter.name == "table_keys" or (
                        parameter.name in ("partition_key", "sort_key")
                        and owner_name not in ("OutboxWriter", "outbox_item")
                    ):
                        defaulted.append(f"{info.name}.{owner_name}({parameter.name}=)")
    assert defaulted == []
