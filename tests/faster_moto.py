"""moto without the work that makes the long in-process runs slow.

On the release in tests/dependency_shortcuts.py only. The fault campaign, the
ordered-path run and the generated-input campaign send
thousands of requests through moto in one process; profiled, most of their CPU
was moto repeating work whose answer it already had. Each change below gives
the answer moto would give, and ``tests/unit/test_faster_moto.py`` checks
that, and that the change is in place:

* **Response serialisation.** For every attribute of every response, moto asks
  five alias providers which names the attribute may have on the object it
  serialises. The answer depends only on the object's class, the botocore
  shape (with its parent) and the attribute's name, so it is kept per those.
  A DynamoDB ``AttributeValue`` (ten members, looked up one by one, for every
  attribute of every item and stream record) is written straight from the
  plain dict moto holds, as the serializer would write it.
* **SQS queue scans.** A queue's attribute map holds three message counts, each
  a scan of every message that read the clock twice per message; SQS reads the
  map several times per message sent and once per message received (for its
  retention period), so the clock was read millions of times per run. Each scan
  now reads the clock once, and the retention check reads the one attribute it
  needs.
* **Transaction backups.** Before every ``TransactWriteItems`` moto deep-copies
  each table it touches, every item and stream record in it, to put the table
  back if the transaction is cancelled: quadratic over a run of writes. The
  backup now copies only what a transaction can change (``_backup``), and a
  cancelled transaction still leaves the table as it was.
"""

from __future__ import annotations

import copy
import threading
import types
from collections.abc import Iterator
from typing import Any

from tests.dependency_shortcuts import allowed

_deepcopy = copy.deepcopy


def cache_serializer_attribute_names() -> None:
    from moto.core.serialize import XFormedAttributePicker

    original = XFormedAttributePicker.get_possible_keys
    if getattr(original, "_cached", False):
        return
    names: dict[tuple[Any, ...], tuple[Any, Any, tuple[str, ...]]] = {}

    def get_possible_keys(self: Any, context: Any) -> Iterator[str]:
        obj, shape = context.obj, context.shape
        if "Meta" in getattr(obj, "__dict__", ()):  # an alias set on this object alone
            yield from original(self, context)
            return
        parent = getattr(shape, "parent", None)
        key = (type(obj), id(shape), id(parent), context.key, tuple(self.alias_providers))
        known = names.get(key)
        # The shapes are kept with the answer, so their ids cannot be reused.
        if known is None or known[0] is not shape or known[1] is not parent:
            known = (shape, parent, tuple(original(self, context)))
            names[key] = known
        yield from known[2]

    get_possible_keys._cached = True  # type: ignore[attr-defined]
    get_possible_keys.original = original  # type: ignore[attr-defined]
    XFormedAttributePicker.get_possible_keys = get_possible_keys  # type: ignore[method-assign]


_ATTRIBUTE_VALUE_MEMBERS = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")
_ATTRIBUTE_VALUE_KEYS = frozenset(_ATTRIBUTE_VALUE_MEMBERS)


def serialize_attribute_values_directly() -> None:
    from moto.core.serialize import BaseJSONSerializer

    original = BaseJSONSerializer._serialize_type_structure
    if getattr(original, "original", None) is not None:
        return

    def _serialize_type_structure(
        self: Any, serialized: Any, value: Any, shape: Any, key: str
    ) -> None:
        if (
            key
            and shape.name == "AttributeValue"
            and tuple(shape.members) == _ATTRIBUTE_VALUE_MEMBERS
            and not self._value_picker.response_transformers
        ):
            plain = _plain_attribute_value(value, self._base64)
            if plain is not None:
                serialized[self.get_serialized_name(shape, key)] = plain
                return
        original(self, serialized, value, shape, key)

    _serialize_type_structure.original = original  # type: ignore[attr-defined]
    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]


def _plain_attribute_value(value: Any, base64: Any) -> dict[str, Any] | None:
    """What moto's serializer makes of a DynamoDB AttributeValue dict, or None
    when the value is not a plain one (moto's own path then serialises it)."""
    if type(value) is not dict or not value.keys() <= _ATTRIBUTE_VALUE_KEYS:
        return None
    plain: dict[str, Any] = {}
    for member in _ATTRIBUTE_VALUE_MEMBERS:
        if member not in value or value[member] is None:
            continue
        item = value[member]
        if member in ("S", "N") and type(item) is str:
            plain[member] = item
        elif member == "B" and type(item) in (bytes, str):
            plain[member] = base64(item)
        elif member in ("SS", "NS") and type(item) is list and all(type(i) is str for i in item):
            plain[member] = list(item)
        elif member == "BS" and type(item) is list and all(type(i) in (bytes, str) for i in item):
            plain[member] = [base64(i) for i in item]
        elif member == "M" and type(item) is dict and all(item):  # moto mishandles "" keys
            entries = {name: _plain_attribute_value(entry, base64) for name, entry in item.items()}
            if any(entry is None for entry in entries.values()):
                return None
            plain[member] = entries
        elif member == "L" and type(item) is list:
            elements = [_plain_attribute_value(element, base64) for element in item]
            if any(element is None for element in elements):
                return None
            plain[member] = elements
        elif member in ("NULL", "BOOL") and type(item) is bool:
            plain[member] = item
        else:
            return None
    return plain


def read_the_clock_once_per_queue_scan() -> None:
    import moto.sqs.models as sqs_models

    queue = sqs_models.Queue
    if getattr(queue.messages.fget, "_one_clock_read", False):
        return

    def now_millis() -> float:
        # Looked up on each call, so a clock the tests patch into moto still applies.
        return float(sqs_models.unix_time_millis())

    def messages(self: Any) -> list[Any]:
        now = now_millis()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    def not_visible(self: Any) -> int:
        now = now_millis()
        return sum(1 for m in self._messages if not now > m.visible_at)

    def delayed(self: Any) -> int:
        now = now_millis()
        return sum(1 for m in self._messages if now < m.delayed_until)

    messages._one_clock_read = True  # type: ignore[attr-defined]
    queue.messages = property(messages)  # type: ignore[assignment,method-assign]
    queue.approximate_number_of_messages_not_visible = property(not_visible)  # type: ignore[assignment,method-assign]
    queue.approximate_number_of_messages_delayed = property(delayed)  # type: ignore[assignment,method-assign]

    def is_message_valid_based_on_retention_period(
        self: Any, queue_name: str, message: Any
    ) -> bool:
        retention_period = int(self.get_queue(queue_name).message_retention_period)
        retain_until = retention_period + message.sent_timestamp / 1000
        return bool(retain_until > sqs_models.unix_time())

    sqs_models.SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )


_transaction = threading.local()


def back_up_only_what_a_transaction_touches() -> None:
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.table import Table

    backend = dynamodb_models.DynamoDBBackend
    original = backend.transact_write_items
    if getattr(original, "_targeted_backup", False):
        return

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        _transaction.items = transact_items
        try:
            original(self, transact_items)
        finally:
            _transaction.items = None

    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        items = getattr(_transaction, "items", None)
        if items is None or not isinstance(value, Table):
            return _deepcopy(value, memo)
        return _backup(value, items)

    transact_write_items._targeted_backup = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    # The module's `copy` is the standard module; only its name in moto's
    # DynamoDB backend is pointed at this copy, which falls through to
    # copy.deepcopy for everything but a table being backed up.
    dynamodb_models.copy = types.SimpleNamespace(  # type: ignore[assignment]
        copy=copy.copy, deepcopy=deepcopy
    )


def _backup(table: Any, transact_items: list[dict[str, Any]]) -> Any:
    """The table as it is, for moto to put back if the transaction is cancelled.

    A transaction changes a table only through the partitions it names: it
    adds, replaces or removes items in them, changes the items it names in
    place, and appends stream records. So the backup is a new table object
    with its own dict of partitions (``dict.copy`` reuses the stored hashes),
    its own copy of each named partition with deep copies of the named items,
    and its own list of the same stream records; every other partition is
    shared, as nothing writes to it until the backup is either discarded or
    has become the table.
    """
    from moto.dynamodb.models.dynamo_type import DynamoType

    backup = copy.copy(table)
    backup.items = table.items.copy()
    for entry in transact_items:
        (operation,) = entry.values()
        if operation.get("TableName") != table.name:
            continue
        key = operation.get("Key") or operation.get("Item") or {}
        try:
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        except Exception:  # a key moto will refuse: copy everything, as moto does
            return _deepcopy(table)
        if hash_value not in table.items:
            continue
        if range_value is None:
            backup.items[hash_value] = _deepcopy(table.items[hash_value])
            continue
        partition = table.items[hash_value]
        if backup.items[hash_value] is partition:
            backup.items[hash_value] = partition.copy()
        if range_value in partition:
            backup.items[hash_value][range_value] = _deepcopy(partition[range_value])
    if table.stream_shard is not None:
        backup.stream_shard = copy.copy(table.stream_shard)
        backup.stream_shard.items = list(table.stream_shard.items)
        backup.stream_shard.table = backup
    return backup


def install() -> bool:
    """Install every shortcut, only on the moto release they were checked against."""
    if not allowed("moto", "tests/faster_moto.py"):
        return False
    cache_serializer_attribute_names()
    serialize_attribute_values_directly()
    read_the_clock_once_per_queue_scan()
    back_up_only_what_a_transaction_touches()
    return True
