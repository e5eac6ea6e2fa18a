"""Values the Terraform module and the Python package must agree on, pinned.

The module configures the functions through environment variables and names
things the code then reads (the stream filter's sort-key prefix, the pending
index and its key, the metrics the alarms watch, the idempotency keys IAM
lets a consumer touch). Where a value cannot have one source across the two
languages, this test reads it from the .tf source and compares it with the
package's constant, so changing one side alone fails here
(docs/seams.md lists them; the pending-shard count and the idempotency window
have one source each and are not repeated here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynamodb_outbox import settings
from dynamodb_outbox.consumer._idempotency import idempotency_key_prefix
from dynamodb_outbox.ledger import LEDGER_KEY_PREFIX
from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD, OUTBOX_SK_PREFIX
from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX
from dynamodb_outbox.sequence_check import SEQUENCE_KEY_PREFIX, sequence_key
from dynamodb_outbox.settings import DEFAULT_METRICS_NAMESPACE
from dynamodb_outbox.sinks import PUBLISH_TO_EVENTBRIDGE, PUBLISH_TO_SNS, PUBLISH_TO_SNS_FIFO
from dynamodb_outbox.table_keys import OUTBOX_ATTRIBUTES

REPO_ROOT = Path(__file__).resolve().parents[2]


def tf(name: str) -> str:
    return (REPO_ROOT / name).read_text(encoding="utf-8")


def local_string(file: str, name: str) -> str:
    """The string literal a Terraform local (or argument) ``name`` is set to in ``file``."""
    found = re.findall(rf'^\s*{re.escape(name)}\s*=\s*"([^"$]*)"\s*$', tf(file), re.MULTILINE)
    assert len(found) == 1, f'{file}: expected one {name} = "...", found {found}'
    return found[0]


@pytest.mark.parametrize(
    ("file", "name", "python_value"),
    [
        ("main.tf", "outbox_sort_key_prefix", OUTBOX_SK_PREFIX),
        ("main.tf", "pending_index_name", DEFAULT_PENDING_INDEX),
        ("main.tf", "pending_index_hash_key", ATTR_PENDING_SHARD),
        ("main.tf", "metrics_namespace", DEFAULT_METRICS_NAMESPACE),
    ],
)
def test_terraform_locals_name_what_the_package_reads(
    file: str, name: str, python_value: str
) -> None:
    assert local_string(file, name) == python_value


def test_every_outbox_variable_the_module_sets_is_one_the_package_reads() -> None:
    """A renamed variable on either side would leave a function on its default."""
    set_by_module = set(
        re.findall(r"^\s*(OUTBOX_[A-Z_]+)\s*=", "".join(map(tf, _tf_files())), re.M)
    )
    read_by_package = {
        value
        for name, value in vars(settings).items()
        if name.startswith("ENV_") and isinstance(value, str)
    }

    assert set_by_module, "no OUTBOX_* variable found in the module"
    assert set_by_module <= read_by_package, set_by_module - read_by_package


def test_the_reserved_attribute_names_are_the_outbox_items_attributes() -> None:
    listed = re.findall(
        r"!contains\(\[([^\]]*)\],\s*table\.partition_key\)",
        tf("variables.tf"),
    )
    assert len(listed) == 1
    assert set(re.findall(r'"([^"]+)"', listed[0])) == set(OUTBOX_ATTRIBUTES)


def test_the_transports_are_the_sinks_the_package_builds() -> None:
    listed = re.findall(r"contains\(\[([^\]]*)\],\s*var\.publish_to\)", tf("variables.tf"))
    assert len(listed) == 1
    assert set(re.findall(r'"([^"]+)"', listed[0])) == {
        PUBLISH_TO_EVENTBRIDGE,
        PUBLISH_TO_SNS,
        PUBLISH_TO_SNS_FIFO,
    }


def test_a_consumers_iam_prefixes_are_the_keys_its_toolkit_writes() -> None:
    """dynamodb:LeadingKeys allows the idempotency, ledger and sequence prefixes only.

    The sequence records of ``SequenceTracker`` were once missing: on AWS its
    every update was denied and order went unchecked (moto enforces no IAM).
    """
    assert (
        '"idempotency#${statement.value}#*", "ledger#${statement.value}#*", '
        '"sequence#${statement.value}#*"' in tf("consumers.tf")
    )
    assert idempotency_key_prefix("billing") == "idempotency#billing"
    assert LEDGER_KEY_PREFIX == "ledger#"
    assert sequence_key("billing", "order-1").startswith(f"{SEQUENCE_KEY_PREFIX}billing#")
    assert SEQUENCE_KEY_PREFIX == "sequence#"


# Every metric the alarms and the dashboard read from the functions' namespace,
# and each function that emits it: checked against each file alone, so a
# rename in one of two emitters fails too.
_CONSUMER_PY = "lambda/dynamodb_outbox/consumer/_processing.py"
_PUBLISHER_PY = "lambda/dynamodb_outbox/publisher.py"
_SWEEPER_PY = "lambda/dynamodb_outbox/sweeper.py"


def _metric_names(file: str) -> set[str]:
    """The metric names ``file`` reads: ``metric_name = "X"`` and the dashboard's name maps."""
    text = tf(file)
    names = set(re.findall(r'metric_name\s*=\s*"([A-Za-z]+)"', text))
    for block in re.findall(r"for name, label in \{([^}]*)\}", text):
        names |= set(re.findall(r"(\w+)\s*=", block))
    return names


def _emitted_by(file: str) -> set[str]:
    """The names ``file`` puts on its metrics (a dict key, a name=, or a METRIC_ constant)."""
    text = tf(file)
    return (
        set(re.findall(r'^\s*"([A-Z][A-Za-z]+)":\s', text, re.M))
        | set(re.findall(r'name="([A-Z][A-Za-z]+)"', text))
        | set(re.findall(r'^METRIC_[A-Z_]+: Final = "([A-Za-z]+)"', text, re.M))
    )


@pytest.mark.parametrize(
    ("tf_file", "metric", "emitters"),
    [
        ("alarms.tf", "QuarantinedEvents", [_PUBLISHER_PY, _SWEEPER_PY]),
        ("alarms.tf", "OldestPendingAgeSeconds", [_SWEEPER_PY]),
        ("alarms.tf", "UntrustedEvents", [_CONSUMER_PY]),
        ("dashboard.tf", "PublishedEvents", [_PUBLISHER_PY]),
        ("dashboard.tf", "QuarantinedEvents", [_PUBLISHER_PY, _SWEEPER_PY]),
        ("dashboard.tf", "SweptEvents", [_SWEEPER_PY]),
        ("dashboard.tf", "AdoptionWaitsForRelease", [_SWEEPER_PY]),
        ("dashboard.tf", "ProcessedEvents", [_CONSUMER_PY]),
        ("dashboard.tf", "FailedEvents", [_CONSUMER_PY]),
        ("dashboard.tf", "DuplicateEvents", [_CONSUMER_PY]),
    ],
)
def test_the_metrics_the_alarms_and_dashboard_read_are_the_ones_the_functions_emit(
    tf_file: str, metric: str, emitters: list[str]
) -> None:
    assert metric in _metric_names(tf_file)
    for emitter in emitters:
        assert metric in _emitted_by(emitter), f"{emitter} no longer emits {metric}"


def test_every_outbox_metric_the_module_reads_is_listed_above() -> None:
    """A new alarm or widget on an outbox metric must be pinned here too."""
    aws_metrics = {
        "IteratorAge",
        "Errors",
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "FailedInvocations",
        "SuccessfulRequestLatency",
    }
    pinned = {
        "QuarantinedEvents",
        "OldestPendingAgeSeconds",
        "UntrustedEvents",
        "PublishedEvents",
        "SweptEvents",
        "AdoptionWaitsForRelease",
        "ProcessedEvents",
        "FailedEvents",
        "DuplicateEvents",
    }
    read = _metric_names("alarms.tf") | _metric_names("dashboard.tf")
    assert read - aws_metrics <= pinned, sorted(read - aws_metrics - pinned)


def test_the_idempotency_table_has_the_keys_the_toolkit_writes() -> None:
    """Hash key and TTL attribute: the ledger's constants, which the toolkit gives Powertools."""
    from dynamodb_outbox.ledger import EXPIRY_ATTR, KEY_ATTR

    table = re.search(
        r'^resource "aws_dynamodb_table" "idempotency" \{\n(.*?)^\}',
        tf("consumers.tf"),
        re.M | re.S,
    )
    assert table is not None
    body = table.group(1)
    assert re.findall(r'^\s*hash_key\s*=\s*"([^"]+)"', body, re.M) == [KEY_ATTR]
    assert re.findall(r'^\s*attribute_name\s*=\s*"([^"]+)"', body, re.M) == [EXPIRY_ATTR]


def test_the_toolkit_gives_powertools_the_ledgers_key_and_expiry_attributes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dynamodb_outbox.consumer import OutboxConsumer
    from dynamodb_outbox.ledger import EXPIRY_ATTR, KEY_ATTR

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.delenv("OUTBOX_CONSUMER_NAME", raising=False)

    store = OutboxConsumer("orders-idempotency", name="billing").persistence_store

    assert (store.key_attr, store.expiry_attr) == (KEY_ATTR, EXPIRY_ATTR)  # type: ignore[attr-defined]


def _tf_files() -> list[str]:
    return sorted(path.name for path in REPO_ROOT.glob("*.tf"))


def test_the_windows_module_and_the_local_runtime_keep_stream_records_as_long() -> None:
    """The window's stream term and the local runtime's trimming are AWS's one 24 hours."""
    from dynamodb_outbox.local import STREAM_RETENTION_SECONDS

    found = re.findall(
        r"^\s*stream_record_lifetime_seconds\s*=\s*(\d+)\s*$", tf("modules/windows/main.tf"), re.M
    )
    assert found == [str(STREAM_RETENTION_SECONDS)]


def test_outbox_ops_replay_finds_the_rule_and_archive_the_module_names() -> None:
    from dynamodb_outbox.ops.replay_archive import archive_name_of, consumer_rule_name

    rule = re.findall(
        r'consumer_names\s*=\s*\{ for key in keys\(local.consumers\) : key => "([^"]+)" \}',
        tf("main.tf"),
    )
    archive = re.findall(r"^\s*event_archive_name\s*=\s*(\S+)\s*$", tf("bus.tf"), re.M)

    assert len(rule) == 1
    assert rule[0].replace("${var.name}", "orders").replace("${key}", "billing") == (
        consumer_rule_name("orders", "billing")
    )
    assert archive == ["var.name"]
    assert archive_name_of("orders") == "orders"


@pytest.mark.parametrize(
    ("setting", "python_default"),
    [("min_age_seconds", "DEFAULT_MIN_AGE_SECONDS"), ("max_items", "DEFAULT_MAX_ITEMS")],
)
def test_the_sweepers_defaults_are_the_modules(setting: str, python_default: str) -> None:
    """The module always sets them; the package's defaults serve a sweeper run without it."""
    from dynamodb_outbox import sweeper

    defaults = re.search(
        r"^\s*sweeper_defaults\s*=\s*\{\n(.*?)^\s*\}", tf("variables.tf"), re.M | re.S
    )
    assert defaults is not None, "variables.tf has no sweeper_defaults local"
    found = re.findall(rf"^\s*{setting}\s*=\s*(\d+)\s*$", defaults.group(1), re.M)
    assert found == [str(getattr(sweeper, python_default))]


def test_the_region_attribute_has_one_source_read_by_both_languages() -> None:
    """Multi-region: the module's filter and the package name the stamp from one JSON file."""
    import json

    from dynamodb_outbox.regions import ATTR_REGION, REGION_SHARD_SEPARATOR

    shared = REPO_ROOT / "lambda" / "dynamodb_outbox" / "shared_with_terraform.json"
    values = json.loads(shared.read_text(encoding="utf-8"))

    assert (values["region_attribute"], values["region_shard_separator"]) == (
        ATTR_REGION,
        REGION_SHARD_SEPARATOR,
    )
    assert re.findall(
        r'jsondecode\(file\("\$\{path\.module\}/([^"]+)"\)\)', tf("multi_region.tf")
    ) == ["lambda/dynamodb_outbox/shared_with_terraform.json"]
    # Nowhere written out: a rename in the JSON reaches every part.
    assert not [name for name in _tf_files() if ATTR_REGION in tf(name)]


def test_the_deployment_package_carries_the_shared_names() -> None:
    import zipfile

    with zipfile.ZipFile(REPO_ROOT / "package" / "dynamodb_outbox.zip") as package:
        assert "dynamodb_outbox/shared_with_terraform.json" in package.namelist()
