"""The writer itself: an entity and the events it announces in one transaction.

Write an entity and the events it announces in one DynamoDB transaction.

The outbox only works if the entity and its outbox items commit together: an
event without its change is a lie, a change without its event is lost. So every
write here is ONE ``TransactWriteItems``: a Put of the entity, one Put per event
(partition key = the entity's, sort key = ``OUTBOX#<event id>``; the key
attributes are ``PK``/``SK`` unless the writer is told other names), and any
extra actions the caller needs in the same unit (a ``ConditionCheck`` on another
item, an ``Update`` of a counter...).

DynamoDB refuses a transaction with more than 100 actions, over 4 MB, with an
item over 400 KB or with two actions on the same item, and it does so with a
terse ``ValidationException`` after a network round trip. This module checks
those rules first and raises an :class:`InvalidWrite` that names the rule, the
action and the figure. When DynamoDB cancels a transaction, the per-action
cancellation reasons are mapped back to the actions that caused them
(:class:`TransactionCancelled`).

Every transaction item costs two underlying writes (prepare + commit), so an
entity plus one event costs 4 write units where a plain Put costs 1; a
cancelled transaction still consumes capacity.

An event the table's sink would never accept (too large for it, a field it
refuses) is refused too, by the sink's own rules (:mod:`dynamodb_outbox.sinks`,
chosen with ``publish_to``): committed, it could only be quarantined.

Which events reach consumers in order: with ``publish_to = "sns_fifo"`` (the
ordered path), the events of one envelope ``subject`` (the FIFO message group)
that carry a ``sequence`` go out in ``sequence`` order, and a consumer's
:class:`~dynamodb_outbox.sequence_check.SequenceTracker` reports a gap or a
reordering. Take the sequence from the aggregate's version, set in the same
transaction with a condition on the previous one, so sequence order is commit
order. Without a sequence, order is best effort: the stream's order for one
partition key (AWS orders stream records per item only, and every event is an
item of its own) and id order in the sweeper. Give every event of an aggregate
the aggregate's key as ``PK`` and its id as ``subject``. Nothing else is
ordered: not two subjects, and nothing on the ``eventbridge`` and ``sns`` paths
(README, "Guarantees"; docs/decisions.md, "What "in order per subject" means").

This module ships to application code (Lambda layer): it imports only the
standard library, boto3/botocore, python-ulid, the envelope and sink rules and
the trace context finder (which uses OpenTelemetry or the X-Ray SDK only when
the application has them).
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.exceptions import ClientError

from dynamodb_outbox import trace_context
from dynamodb_outbox._clock import iso_milliseconds
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import event_id_datetime, new_event_id
from dynamodb_outbox.outbox_item import (
    ATTR_PK,
    ATTR_SK,
    DEFAULT_PENDING_SHARDS,
    OUTBOX_SK_PREFIX,
    outbox_item,
    outbox_sk,
    writers_shard_count,
)
from dynamodb_outbox.payload_json import JsonDefault, PayloadNotEncodable, to_json_value
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.settings import (
    ENV_AWS_REGION,
    ENV_MULTI_REGION,
    ENV_TABLE_NAME,
    ConfigurationError,
    multi_region_from_environment,
    publish_to_from_environment,
    table_keys_from_environment,
)
from dynamodb_outbox.sinks import PUBLISH_TO_EVENTBRIDGE, OutboundEvent, SinkRules, rules_for
from dynamodb_outbox.table_keys import InvalidTableKeys, TableKeys
from dynamodb_outbox.trace_context import TraceContext
from dynamodb_outbox.writer._attribute_values import (
    attribute_value_size,
    item_size,
    serialize_item,
)
from dynamodb_outbox.writer._conditions import ACTION_KINDS, Condition, update_action
from dynamodb_outbox.writer._errors import (
    EventTooLarge,
    InvalidWrite,
    NoEvents,
    UnpublishableEvent,
    translate_client_error,
)
from dynamodb_outbox.writer._limits import (
    MAX_EVENT_ID_LEAD_SECONDS,
    Action,
    check_limits,
    check_token,
    item_identity,
)

if TYPE_CHECKING:
    # boto3-stubs[dynamodb] (dev only): a Table resource or an async client
    # passed as ``client`` fails type checking. Without the stubs it is Any.
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class WriteResult:
    """What was committed: the event ids (the end-to-end idempotency keys) and outbox SKs."""

    pk: str
    event_ids: tuple[str, ...]
    outbox_sks: tuple[str, ...]
    action_count: int


class OutboxWriter:
    """Writes entities and their events atomically to the outbox table.

    ``client`` is a low-level boto3 DynamoDB client (``boto3.client("dynamodb")``,
    not a ``Table`` resource); inject one in tests or to share a configured
    client. Without it, a default client is created on first use, not at
    construction, so building a writer at import time costs nothing and needs
    no credentials; threads sharing the writer share that one client.
    ``pending_shards`` is not a setting: the pending index has
    :data:`~dynamodb_outbox.outbox_item.DEFAULT_PENDING_SHARDS` shards, which the
    sweeper reads, and any other value is refused (kept for callers that pass it).
    ``partition_key`` and ``sort_key`` name the table's key attributes (both
    strings), ``PK`` and ``SK`` by default: the module's ``table.partition_key``
    and ``table.sort_key``, which the publisher and sweeper get too. Outbox
    items carry ``OUTBOX#<event id>`` under the sort key, whatever its name.
    ``key_schemas`` names the key attributes of OTHER tables touched by extra
    Puts, so duplicate actions on them are caught before calling AWS.
    ``publish_to`` is the module's setting of the same name (``eventbridge``,
    the default, ``sns``, or ``sns_fifo`` for a FIFO topic): events are checked
    against that sink's rules (size, field limits), so an event it would never
    accept is refused here instead of being committed and quarantined.
    ``region`` (multi-region deployments on a global table, see
    :mod:`dynamodb_outbox.regions`) is the region this writer writes in: it is
    stamped on every outbox item, so that only that region's publisher and
    sweeper publish it. It must be the region of the client's endpoint (the
    region whose replica takes the write); :meth:`from_environment` reads it
    from ``AWS_REGION``. None (the default): a single-region deployment, no stamp.
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        pending_shards: int = DEFAULT_PENDING_SHARDS,
        source: str | None = None,
        key_schemas: Mapping[str, Sequence[str]] | None = None,
        publish_to: str = PUBLISH_TO_EVENTBRIDGE,
        partition_key: str = ATTR_PK,
        sort_key: str = ATTR_SK,
        region: str | None = None,
    ) -> None:
        if not table_name or not isinstance(table_name, str):
            raise InvalidWrite("table_name must be a non-empty string")
        if region is not None:
            try:
                RegionScope(region)
            except ValueError as exc:
                raise InvalidWrite(f"region: {exc}") from None
        self.region = region
        try:
            pending_shards = writers_shard_count(pending_shards, "pending_shards")
        except ValueError as exc:
            raise InvalidWrite(str(exc)) from None
        try:
            self.table_keys = TableKeys(partition_key, sort_key)
        except InvalidTableKeys as exc:
            arguments = " and ".join(f"{role}_key" for role in exc.roles)
            raise InvalidWrite(f"{arguments}: {exc}") from None
        self.table_name = table_name
        self.pending_shards = pending_shards
        self.source = source
        try:
            self.sink_rules: SinkRules = rules_for(publish_to)
        except ValueError as exc:
            raise InvalidWrite(str(exc)) from None
        self._client = client
        self._client_lock = threading.Lock()
        self._key_schemas: dict[str, tuple[str, ...]] = {
            name: tuple(attrs) for name, attrs in (key_schemas or {}).items()
        }
        self._key_schemas[table_name] = self.table_keys.names

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        client: DynamoDBClient | None = None,
        *,
        source: str | None = None,
        key_schemas: Mapping[str, Sequence[str]] | None = None,
    ) -> OutboxWriter:
        """A writer configured the way the module configured its publisher and sweeper.

        Reads the variables of the module's ``writer_environment`` output
        (``OUTBOX_TABLE_NAME``, ``OUTBOX_PUBLISH_TO``, ``OUTBOX_PARTITION_KEY``,
        ``OUTBOX_SORT_KEY``): set that map on the producer function and the
        table, its keys and its sink have one source, the module's inputs.
        With ``OUTBOX_MULTI_REGION=true`` (the output sets it when the module is
        deployed per region on a global table) the writer stamps its items with
        the runtime's region, ``AWS_REGION`` (Lambda sets it; elsewhere set it to
        the region of the client's endpoint).
        Raises :class:`InvalidWrite` naming a missing or bad variable.
        """
        environ = os.environ if environ is None else environ
        table_name = environ.get(ENV_TABLE_NAME, "").strip()
        if not table_name:
            raise InvalidWrite(f"environment variable {ENV_TABLE_NAME} is not set")
        try:
            keys = table_keys_from_environment(environ)
            publish_to = publish_to_from_environment(environ)
        except ConfigurationError as exc:
            raise InvalidWrite(str(exc)) from None
        region = _writing_region(environ)
        client_region = getattr(getattr(client, "meta", None), "region_name", None)
        if region is not None and isinstance(client_region, str) and client_region != region:
            # The stamp must name the replica that takes the write: a stamp of a region
            # without an outbox instance is published by no region (no filter admits it,
            # no sweeper reads its shards).
            raise InvalidWrite(
                f"{ENV_AWS_REGION} is {region} but the client writes to {client_region}: "
                "a multi-region writer stamps the region whose replica takes its writes; "
                f"give it a client of {region}, or set {ENV_AWS_REGION} to {client_region}"
            )
        return cls(
            table_name,
            client,
            source=source,
            key_schemas=key_schemas,
            publish_to=publish_to,
            partition_key=keys.partition,
            sort_key=keys.sort,
            region=region,
        )

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client, created once on first use when none was injected."""
        client = self._client
        if client is None:
            # boto3's default session is not thread-safe to create clients from,
            # and each client holds its own connection pool: make exactly one.
            with self._client_lock:
                client = self._client
                if client is None:
                    # Multi-region: the replica of the region it stamps (botocore reads
                    # AWS_DEFAULT_REGION, not AWS_REGION, where the stamp comes from).
                    client = self._client = boto3.client("dynamodb", region_name=self.region)
        return client

    def new_event(
        self,
        entity: Mapping[str, Any] | str,
        event_type: str,
        data: Mapping[str, Any],
        *,
        subject: str | None = None,
        source: str | None = None,
        correlation_id: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        dataschema: str | None = None,
        default: JsonDefault | None = None,
        event_id: str | None = None,
        time: datetime | str | None = None,
        sequence: int | None = None,
    ) -> Envelope:
        """An envelope about ``entity`` (an entity item or its partition key), with a fresh ULID.

        ``subject`` defaults to the entity's partition key and ``source`` to the writer's.
        Build events once and reuse the same envelopes when retrying with a
        ``client_request_token``: the id and time are part of the request.

        The envelope is a CloudEvents 1.0 event (:mod:`dynamodb_outbox.envelope`):
        ``data`` is its body, ``correlation_id`` its ``correlationid`` extension,
        ``dataschema`` an optional URI of the data's schema.

        ``traceparent`` (and ``tracestate``) record the trace the event belongs
        to, so the publisher and consumers continue it. Left out, the caller's
        own trace is recorded (OpenTelemetry's current span, the X-Ray SDK's
        segment or Lambda's X-Ray header, see :mod:`dynamodb_outbox.trace_context`),
        except with ``event_id``: a retried request runs in another trace, and a
        different envelope under the same ``client_request_token`` would be
        refused by DynamoDB (``IdempotentParameterMismatch``).

        ``data`` may hold what DynamoDB and Python hand you: ``Decimal``
        (written with its exact digits), aware ``datetime`` and ``date`` (ISO
        8601), ``UUID`` (string); see :mod:`dynamodb_outbox.payload_json` for
        the whole rule. ``default`` converts anything else, like
        :func:`json.dumps`'s (``default=bytes.hex``...).

        ``event_id`` (a canonical ULID, at most :data:`MAX_EVENT_ID_LEAD_SECONDS`
        ahead of now) replaces the fresh id, for a request a client may retry:
        derive it from the request's key with
        :func:`dynamodb_outbox.event_ids.event_id_for` and every retry builds the
        same event. ``time`` (an aware ``datetime`` or ISO 8601 text) defaults
        to the id's own time when ``event_id`` is given, so a retry is the same
        request byte for byte (what ``client_request_token`` needs).

        ``sequence`` (an integer from 1) is the event's place among its
        subject's events, carried as the envelope's ``sequence`` extension: on
        the ordered path the sweeper sends a subject's events in that order and
        the consumer toolkit can tell a gap or a reordering
        (:mod:`dynamodb_outbox.sequence_check`). Take it from the aggregate's
        version in the same transaction (the new version, with a ``condition``
        on the old one), so that sequence order is commit order.
        """
        partition_key = self.table_keys.partition
        pk = entity if isinstance(entity, str) else entity.get(partition_key)
        if subject is None:
            if not isinstance(pk, str) or not pk:
                raise InvalidWrite(
                    f"the entity has no string {partition_key} (the table's partition key); "
                    "pass subject= explicitly"
                )
            subject = pk
        source = source if source is not None else self.source
        if not source:
            raise InvalidWrite("an event needs a source: pass source= or OutboxWriter(source=...)")
        explicit_id = event_id
        if event_id is None:
            event_id = new_event_id()
        elif time is None:
            time = event_id_datetime(_checked_event_id(event_id))
        else:
            _checked_event_id(event_id)
        time_text = _event_time_text(datetime.now(UTC) if time is None else time)
        trace = _event_trace(traceparent, tracestate, captured=explicit_id is None)
        try:
            if default is not None:
                data = to_json_value(data, default=default)
            return Envelope(
                type=event_type,
                source=source,
                subject=subject,
                data=data,
                dataschema=dataschema,
                correlation_id=correlation_id,
                traceparent=trace.traceparent if trace else None,
                tracestate=trace.tracestate if trace else None,
                id=event_id,
                time=time_text,
                sequence=sequence,
            )
        except (InvalidEnvelope, PayloadNotEncodable) as exc:
            raise InvalidWrite(str(exc)) from exc

    def write(
        self,
        entity: Mapping[str, Any],
        events: Envelope | Iterable[Envelope],
        *,
        condition: Condition | None = None,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
        allow_no_events: bool = False,
    ) -> WriteResult:
        """Put ``entity`` and one outbox item per event, plus ``extra_actions``, all or nothing.

        ``entity`` holds plain Python values and must carry the table's string
        key attributes (``PK`` and ``SK`` by default); every event's outbox
        item goes into the entity's partition.
        ``condition`` guards the entity Put (``Condition.item_absent()`` for
        create-only). ``extra_actions`` are ``TransactItems`` elements (see the
        ``*_action`` builders); a missing ``TableName`` means this table.
        Actions are sent as: entity (0), events (1..n), extra actions; error
        messages and cancellation reasons use those indexes.

        Writing no event is refused (:class:`NoEvents`) unless
        ``allow_no_events``: a code path that forgot its event would otherwise
        lose it silently. ``client_request_token`` (≤ 36 characters) makes a
        retry of the same request idempotent for 10 minutes; botocore already
        sets one per call for its own retries, pass yours to cover your retries.

        Raises :class:`InvalidWrite` (nothing sent), :class:`TransactionCancelled`,
        :class:`IdempotentParameterMismatch` or :class:`TransactionInProgress`;
        other AWS errors propagate as botocore ``ClientError``.
        """
        pk, entity_action = self._entity_action(entity, condition)
        return self._transact(
            pk, [entity_action], events, extra_actions, client_request_token, allow_no_events
        )

    def update(
        self,
        key: Mapping[str, Any],
        update_expression: str,
        events: Envelope | Iterable[Envelope],
        *,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        condition: Condition | None = None,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
    ) -> WriteResult:
        """Update the entity at ``key`` and put one outbox item per event, all or nothing.

        The counterpart of :meth:`write` for a change rather than a whole item:
        ``key`` holds the entity's string key attributes (``PK`` and ``SK`` by
        default), ``update_expression`` its ``UpdateExpression`` with
        ``names``/``values`` placeholders, shared with ``condition`` (e.g.
        ``Condition("#status = :placed", ...)``; with ``return_old_item=True``
        the item that failed it comes back on the :class:`CancellationReason`).
        The Update is action 0 with role ``"entity"``, the events follow, then
        ``extra_actions``.

        Raises like :meth:`write`.
        """
        pk, entity_action = self._entity_update_action(
            key, update_expression, names, values, condition
        )
        return self._transact(
            pk, [entity_action], events, extra_actions, client_request_token, False
        )

    def write_events(
        self,
        pk: str,
        events: Envelope | Iterable[Envelope],
        *,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
    ) -> WriteResult:
        """Write events into the partition ``pk`` without putting an entity.

        For changes expressed as extra actions instead of a full Put, e.g. an
        ``update_action`` on the entity plus its event, still in one transaction.
        """
        if not isinstance(pk, str) or not pk:
            raise InvalidWrite("pk must be a non-empty string")
        return self._transact(pk, [], events, extra_actions, client_request_token, False)

    # -- building the transaction

    def _transact(
        self,
        pk: str,
        actions: list[Action],
        events: Envelope | Iterable[Envelope],
        extra_actions: Iterable[Mapping[str, Any]],
        client_request_token: str | None,
        allow_no_events: bool,
    ) -> WriteResult:
        envelopes = [events] if isinstance(events, Envelope) else list(events)
        if not envelopes and not allow_no_events:
            raise NoEvents(
                "no event to write: an outbox write without an event is almost always a "
                "forgotten event; pass allow_no_events=True if this write really has none"
            )
        for position, envelope in enumerate(envelopes):
            actions.append(self._event_action(pk, envelope, len(actions), position))
        _check_sequences(envelopes, pk, self.table_keys.partition)
        for position, raw in enumerate(extra_actions):
            actions.append(self._extra_action(raw, len(actions), position))
        check_limits(actions)

        request: dict[str, Any] = {"TransactItems": [action.request for action in actions]}
        if client_request_token is not None:
            check_token(client_request_token)
            request["ClientRequestToken"] = client_request_token
        try:
            self.client.transact_write_items(**request)
        except ClientError as error:
            translated = translate_client_error(error, actions)
            if translated is error:
                raise
            raise translated from error
        return WriteResult(
            pk=pk,
            event_ids=tuple(envelope.id for envelope in envelopes),
            outbox_sks=tuple(outbox_sk(envelope.id) for envelope in envelopes),
            action_count=len(actions),
        )

    def _entity_action(
        self, entity: Mapping[str, Any], condition: Condition | None
    ) -> tuple[str, Action]:
        if not isinstance(entity, Mapping):
            raise InvalidWrite(f"the entity must be a mapping, got {type(entity).__name__}")
        pk = _checked_entity_key(entity, self.table_keys)
        item = serialize_item(entity)
        body = {"TableName": self.table_name, "Item": item}
        if condition is not None:
            self._check_key_condition(condition)
            body.update(condition.to_request())
        key = self.table_keys.key_of(item)
        return pk, Action(
            request={"Put": body},
            label=f"Put entity {self._describe_key(key)}",
            role="entity",
            identity=item_identity(self.table_name, key),
            size=item_size(item),
        )

    def _entity_update_action(
        self,
        key: Mapping[str, Any],
        update_expression: str,
        names: Mapping[str, str] | None,
        values: Mapping[str, Any] | None,
        condition: Condition | None,
    ) -> tuple[str, Action]:
        partition_key, sort_key = self.table_keys.names
        if not isinstance(key, Mapping) or set(key) != {partition_key, sort_key}:
            raise InvalidWrite(
                f"the key must be a mapping of exactly {partition_key} and {sort_key} "
                f"(the table's keys), got {key!r:.120}"
            )
        pk = _checked_entity_key(key, self.table_keys)
        if condition is not None:
            self._check_key_condition(condition)
        if not isinstance(update_expression, str) or not update_expression.strip():
            raise InvalidWrite("an update needs a non-empty update_expression")
        request = update_action(
            key,
            update_expression,
            names=names,
            values=values,
            condition=condition,
            table_name=self.table_name,
        )
        body = request["Update"]
        values_size = sum(
            attribute_value_size(v) for v in body.get("ExpressionAttributeValues", {}).values()
        )
        return pk, Action(
            request=dict(request),
            label=f"Update entity {self._describe_key(body['Key'])}",
            role="entity",
            identity=item_identity(self.table_name, body["Key"]),
            size=item_size(body["Key"]) + values_size,
        )

    def _event_action(self, pk: str, envelope: Envelope, index: int, position: int) -> Action:
        if not isinstance(envelope, Envelope):
            raise InvalidWrite(
                f"event #{position} must be an Envelope (see OutboxWriter.new_event), "
                f"got {type(envelope).__name__}"
            )
        partition_key, sort_key = self.table_keys.names
        item = outbox_item(
            pk,
            envelope,
            self.pending_shards,
            partition_key=partition_key,
            sort_key=sort_key,
            region=self.region,
        )
        label = f"Put outbox event {envelope.type} {self._describe_key(item)}"
        self._check_sink_rules(envelope, index, label)
        return Action(
            request={
                "Put": {
                    "TableName": self.table_name,
                    "Item": item,
                    # Event ids are ULIDs, so a clash means the same envelope was
                    # written twice: fail rather than overwrite a published event.
                    "ConditionExpression": "attribute_not_exists(#outbox_sk)",
                    "ExpressionAttributeNames": {"#outbox_sk": sort_key},
                }
            },
            label=label,
            role="event",
            identity=item_identity(self.table_name, item),
            size=item_size(item),
        )

    def _check_key_condition(self, condition: Condition) -> None:
        """Refuse ``Condition.item_absent()``/``item_exists()`` on a key this table lacks."""
        for placeholder in ("#absent_key", "#present_key"):
            name = (condition.names or {}).get(placeholder)
            if name is not None and name not in self.table_keys.names:
                raise InvalidWrite(
                    f"the condition tests {name!r}, which is not a key of table "
                    f"{self.table_name!r} ({self.table_keys.partition}/{self.table_keys.sort}): "
                    "every item would pass it; pass the partition key, e.g. "
                    f"Condition.item_absent({self.table_keys.partition!r})"
                )

    def _describe_key(self, key: Mapping[str, Any]) -> str:
        """``PK=ORDER#1 SK=META``: this table's key, or every key attribute of another table."""
        names = [name for name in self.table_keys.names if name in key] or sorted(key)
        return " ".join(f"{name}={_short(key[name])}" for name in names)

    def _check_sink_rules(self, envelope: Envelope, index: int, label: str) -> None:
        rules = self.sink_rules
        event = OutboundEvent.of(envelope)
        size = rules.entry_size(event)
        if size > rules.max_request_bytes:
            raise EventTooLarge(
                f"action {index} ({label}): the event is {size} bytes for {rules.name}, over its "
                f"limit of {rules.max_request_bytes} bytes; it could never be published "
                "(store the data in the entity and publish a reference instead)",
                limit=rules.max_request_bytes,
                actual=size,
                index=index,
            )
        delivered = rules.delivery_size(event)
        if delivered > rules.max_delivery_bytes:
            # PutEvents/Publish would take it, the consumer queue (or its DLQ) would not:
            # on AWS a silent loss once the outbox item is deleted (dynamodb_outbox.sizes).
            raise EventTooLarge(
                f"action {index} ({label}): the event becomes a queue message of up to "
                f"{delivered} bytes after {rules.name}, over the {rules.max_delivery_bytes} "
                "bytes every consumer queue and DLQ can take; it could never be delivered "
                "(store the data in the entity and publish a reference instead)",
                limit=rules.max_delivery_bytes,
                actual=delivered,
                index=index,
            )
        refusal = rules.refusal(event)
        if refusal is not None:
            raise UnpublishableEvent(
                f"action {index} ({label}): {rules.name} would never accept this event: {refusal}",
                index=index,
            )

    def _extra_action(self, raw: Mapping[str, Any], index: int, position: int) -> Action:
        where = f"extra action #{position} (action {index})"
        if not isinstance(raw, Mapping) or len(raw) != 1:
            raise InvalidWrite(
                f"{where} must be a mapping with exactly one of {', '.join(ACTION_KINDS)}"
            )
        ((kind, body),) = raw.items()
        if kind not in ACTION_KINDS or not isinstance(body, Mapping):
            raise InvalidWrite(
                f"{where}: {kind!r} is not one of {', '.join(ACTION_KINDS)} with a mapping body"
            )
        body = dict(body)
        table = body.setdefault("TableName", self.table_name)
        if not isinstance(table, str) or not table:
            raise InvalidWrite(f"{where}: TableName must be a non-empty string")
        on_other_table = "" if table == self.table_name else f" on {table}"

        if kind == "Put":
            item = body.get("Item")
            if not isinstance(item, Mapping):
                raise InvalidWrite(f"{where}: a Put needs an Item mapping")
            schema = self._key_schemas.get(table)
            key = {name: item[name] for name in schema if name in item} if schema else None
            size = item_size(item)
            label = f"Put{on_other_table} {self._describe_key(key) if key else '(key unknown)'}"
            identity = item_identity(table, key) if key else None
        else:
            key = body.get("Key")
            if not isinstance(key, Mapping) or not key:
                raise InvalidWrite(f"{where}: a {kind} needs a Key mapping")
            if kind == "Update" and not body.get("UpdateExpression"):
                raise InvalidWrite(f"{where}: an Update needs an UpdateExpression")
            values = body.get("ExpressionAttributeValues") or {}
            size = item_size(key) + sum(attribute_value_size(v) for v in values.values())
            label = f"{kind}{on_other_table} {self._describe_key(key)}"
            identity = item_identity(table, key)
        return Action(request={kind: body}, label=label, role="extra", identity=identity, size=size)


# ------------------------------------------------------------------------- checks


def _writing_region(environ: Mapping[str, str]) -> str | None:
    """``AWS_REGION`` when ``OUTBOX_MULTI_REGION`` is true; None when it is unset or false."""
    try:
        multi_region = multi_region_from_environment(environ)
    except ConfigurationError as exc:
        raise InvalidWrite(str(exc)) from None
    if not multi_region:
        return None
    region = environ.get(ENV_AWS_REGION, "").strip()
    if not region:
        raise InvalidWrite(
            f"{ENV_MULTI_REGION} is true but {ENV_AWS_REGION} is not set: the writer must "
            "stamp its items with the region it writes in"
        )
    return region


def _check_sequences(envelopes: Sequence[Envelope], pk: str, partition_key: str) -> None:
    """A sequenced event's subject is its partition key; two never share a ``sequence``.

    The publishers find a subject's pending sequences with one Query of the
    event's partition: a subject spread over partitions could not be ordered
    (docs/decisions.md, "What "in order per subject" means on the ordered path").
    """
    seen: dict[tuple[str, int], int] = {}
    for position, envelope in enumerate(envelopes):
        if envelope.sequence is None:
            continue
        if envelope.subject != pk:
            raise InvalidWrite(
                f"event #{position} carries sequence {envelope.sequence} but its subject "
                f"{_short(envelope.subject)} is not the {partition_key} it is written under "
                f"({_short(pk)}): a sequenced event's subject must be its partition key value, "
                "the unit its order is kept in; drop subject= or write it under that partition"
            )
        earlier = seen.setdefault((envelope.subject, envelope.sequence), position)
        if earlier != position:
            raise InvalidWrite(
                f"events #{earlier} and #{position} of subject {_short(envelope.subject)} both "
                f"carry sequence {envelope.sequence}: a subject's sequence numbers must differ"
            )


def _checked_entity_key(entity: Mapping[str, Any], keys: TableKeys) -> str:
    """The entity's partition key, once both keys are strings and the sort key no outbox key."""
    for attribute in keys.names:
        value = entity.get(attribute)
        if not isinstance(value, str) or not value:
            raise InvalidWrite(
                f"the entity needs a non-empty string {attribute} (the table's key), got {value!r}"
            )
    if entity[keys.sort].startswith(OUTBOX_SK_PREFIX):
        raise InvalidWrite(
            f"the entity's {keys.sort} {entity[keys.sort]!r} starts with {OUTBOX_SK_PREFIX!r}, "
            "which is reserved for outbox items: the publisher would take the entity for an event"
        )
    return cast(str, entity[keys.partition])


def _checked_event_id(event_id: Any) -> str:
    try:
        issued = event_id_datetime(event_id)
    except ValueError as exc:
        raise InvalidWrite(
            f"event_id {str(event_id)[:64]!r} is not a ULID ({exc}); the outbox sort key "
            "OUTBOX#<id> must sort by time: derive one with event_ids.event_id_for(key, at)"
        ) from None
    lead = (issued - datetime.now(UTC)).total_seconds()
    if lead > MAX_EVENT_ID_LEAD_SECONDS:
        raise InvalidWrite(
            f"event_id {event_id!r} is dated {issued.isoformat()}, {lead:.0f} s ahead of now "
            f"(at most {MAX_EVENT_ID_LEAD_SECONDS}): the sweeper would not see the event "
            "until then"
        )
    return cast(str, event_id)


def _event_trace(
    traceparent: str | None, tracestate: str | None, *, captured: bool
) -> TraceContext | None:
    if traceparent is None:
        return trace_context.current() if captured else None
    trace = TraceContext.parse(traceparent, tracestate)
    if trace is None:
        raise InvalidWrite(
            f"traceparent {str(traceparent)[:64]!r} is not a W3C traceparent "
            "(00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros)"
        )
    return trace


def _event_time_text(time: datetime | str) -> str:
    if isinstance(time, str):
        return time
    if not isinstance(time, datetime) or time.utcoffset() is None:
        raise InvalidWrite(f"time must be an aware datetime or RFC 3339 text, got {time!r:.64}")
    return iso_milliseconds(time, keep_offset=True)


def _short(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, data),) = value.items()
        if kind == "B" and not isinstance(data, str):
            data = base64.b64encode(bytes(data)).decode()
        text = str(data)
    else:
        text = str(value)
    return text if len(text) <= 64 else text[:61] + "..."
