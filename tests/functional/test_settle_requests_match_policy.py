"""The publisher's writes to the application table fit the module's IAM conditions.

The publisher and sweeper roles may send BatchWriteItem only with the key
attributes and UpdateItem only with the key and the quarantine attributes,
without ReturnValues (``dynamodb:Attributes`` / ``dynamodb:ReturnValues``,
publisher.tf and sweeper.tf, lists in main.tf). These tests record the
requests the shared core really sends on moto (which does not evaluate IAM
conditions) and hold them to the lists in main.tf: a new attribute in the
quarantine marker fails here before it fails with AccessDenied in AWS.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, outbox_item
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, stream_record
from tests.functional.outbox_helpers import FIXED_NOW, RecordingEvents

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable

MAIN_TF = Path(__file__).resolve().parents[2] / "main.tf"
VARIABLES_TF = MAIN_TF.with_name("variables.tf")


def _hcl_string_list(local_name: str) -> set[str]:
    """The strings of a one-line list local in main.tf, e.g. ``x = ["a", "b"]``."""
    match = re.search(rf"^\s*{local_name}\s*=\s*\[([^\]]*)\]", MAIN_TF.read_text(), re.MULTILINE)
    assert match is not None, f"main.tf has no one-line list local {local_name}"
    return set(re.findall(r'"([^"]+)"', match.group(1)))


def _default_key_attributes() -> set[str]:
    """The key attributes of the policy lists: the table's keys, at the module's defaults."""
    listed = re.search(r"^\s*outbox_key_attributes\s*=\s*(.+)$", MAIN_TF.read_text(), re.MULTILINE)
    assert listed is not None, "main.tf has no outbox_key_attributes local"
    assert listed.group(1).strip() == "[local.partition_key, local.sort_key]", listed.group(1)
    defaults = re.search(
        r"^\s*table_defaults\s*=\s*\{\n(.*?)^\s*\}", VARIABLES_TF.read_text(), re.M | re.S
    )
    assert defaults is not None, "variables.tf has no table_defaults local"
    names: set[str] = set()
    for attribute in ("partition_key", "sort_key"):
        default = re.search(rf'^\s*{attribute}\s*=\s*"([^"]+)"\s*$', defaults.group(1), re.M)
        assert default is not None, f"variables.tf: table.{attribute} has no default"
        names.add(default.group(1))
    return names


def _record_requests(client: Any, operation: str) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        requests.append(dict(params))

    client.meta.events.register(f"provide-client-params.dynamodb.{operation}", record)
    return requests


def _attributes_named(request: dict[str, Any]) -> set[str]:
    """The attribute names an UpdateItem request touches: its key and its expressions' names."""
    return set(request["Key"]) | set(request.get("ExpressionAttributeNames", {}).values())


def test_deletes_and_quarantine_updates_name_only_the_attributes_the_policy_allows(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN a good outbox item (published, then deleted) and a poison one (quarantined)
    good = make_envelope()
    outbox_table.put(outbox_item("ORDER#1001", good))
    poison = make_envelope()
    poison_item = outbox_item("ORDER#1001", poison) | {ATTR_ENVELOPE: {"S": "{not json"}}
    outbox_table.put(poison_item)
    updates = _record_requests(outbox_table.client, "UpdateItem")
    batch_writes = _record_requests(outbox_table.client, "BatchWriteItem")

    # WHEN the stream publisher handles both
    result = publish_stream_batch(
        [outbox_stream_record(good, "ORDER#1001", "1"), stream_record(poison_item, "2")],  # type: ignore[list-item]
        PublishDependencies(
            sink=EventBridgeSink(RecordingEvents(event_bus.client), event_bus.name),
            table_name=outbox_table.name,
            dynamodb_client=outbox_table.client,
            clock=lambda: FIXED_NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert (result.quarantined, result.deleted) == (1, 1)

    key_attributes = _default_key_attributes()
    quarantine_attributes = _hcl_string_list("quarantine_attributes")
    # THEN every delete carries the key attributes only, and no PutRequest
    requests = [r for call in batch_writes for r in call["RequestItems"][outbox_table.name]]
    assert requests and all(set(r) == {"DeleteRequest"} for r in requests)
    assert all(set(r["DeleteRequest"]["Key"]) <= key_attributes for r in requests)
    # AND the quarantine update names exactly the key and the quarantine attributes
    (update,) = updates
    assert _attributes_named(update) == key_attributes | quarantine_attributes
    # AND asks for nothing back that the policy's ReturnValues condition would refuse
    assert update.get("ReturnValues", "NONE") == "NONE"
