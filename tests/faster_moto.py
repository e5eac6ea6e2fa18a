"""moto (5.2.5) without the work that makes the long in-process runs slow.

The fault campaign, the ordered-path run and the generated-input campaign send
thousands of requests through moto in one process; profiled, most of their CPU
was moto repeating work whose answer it already had. Each change below gives
the answer moto would give, and ``tests/unit/test_faster_moto.py`` checks
that, and that the change is in place:

* **Response serialisation.** For every attribute of every response, moto asks
  five alias providers which names the attribute may have on the object it
  serialises. The answer depends only on the object's class, the botocore
  shape (with its parent) and the attribute's name, so it is kept per those.
* **SQS queue scans.** A queue's attribute map holds three message counts, each
  a scan of every message that read the clock twice per message; SQS reads the
  map several times per message sent and once per message received (for its
  retention period), so the clock was read millions of times per run. Each scan
  now reads the clock once, and the retention check reads the one attribute it
  needs.
* **Transaction backups.** Before every ``TransactWriteItems`` moto deep-copies
  each table it touches, every item and stream record in it, to put the table
  back if the transaction is cancelled: quadratic over a run of writes. The
  copy now shares the items the transaction does not name and the stream
  records (neither is changed by the transaction, and a cancelled one still
  restores the table as it was); the items it names are copied as before.
"""

from __future__ import annotations

import copy
import threading
import types
from collections.abc import Iterator
from typing import Any

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
        return _deepcopy(value, {**(memo or {}), **_untouched(value, items)})

    transact_write_items._targeted_backup = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    # The module's `copy` is the standard module; only its name in moto's
    # DynamoDB backend is pointed at this copy, which falls through to
    # copy.deepcopy for everything but a table being backed up.
    dynamodb_models.copy = types.SimpleNamespace(  # type: ignore[assignment]
        copy=copy.copy, deepcopy=deepcopy
    )


def _untouched(table: Any, transact_items: list[dict[str, Any]]) -> dict[int, Any]:
    """deepcopy's memo: the table's items the transaction does not name, and its stream records."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    named: set[int] = set()
    for entry in transact_items:
        (operation,) = entry.values()
        if operation.get("TableName") != table.name:
            continue
        key = operation.get("Key") or operation.get("Item") or {}
        try:
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            item = table.get_item(hash_value, range_value)
        except Exception:  # a key moto will refuse: copy everything, as moto does
            return {}
        if item is not None:
            named.add(id(item))
    # The keys of table.items (hash, then range values) are never changed either.
    shared: dict[int, Any] = {}
    for hash_value, stored in table.items.items():
        shared[id(hash_value)] = hash_value
        if table.range_key_attr:
            for range_value, item in stored.items():
                shared[id(range_value)] = range_value
                if id(item) not in named:
                    shared[id(item)] = item
        elif id(stored) not in named:
            shared[id(stored)] = stored
    if table.stream_shard is not None:
        shared.update({id(record): record for record in table.stream_shard.items})
    return shared


def install() -> None:
    cache_serializer_attribute_names()
    read_the_clock_once_per_queue_scan()
    back_up_only_what_a_transaction_touches()
