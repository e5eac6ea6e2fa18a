#!/usr/bin/env python3
"""Run a moto server that answers SQS queue attributes the way SQS does.

Three differences between moto (5.2.5, the pinned version) and AWS matter to the
module's consumer queues (the third, an EventBridge event delivered without its
``account``, is fixed by :func:`dynamodb_outbox.local.moto_events.deliver_event_account`,
which in-process runs and the testing kit use too, as they use
:func:`~dynamodb_outbox.local.moto_events.forward_events_as_aws`, an event forwarded
to another region's bus keeping its origin):

* moto accepts ``RedriveAllowPolicy`` in ``CreateQueue``/``SetQueueAttributes``
  but never returns it from ``GetQueueAttributes``. The module sets a
  redrive-allow policy on every consumer DLQ, and the aws provider waits after
  creating a queue until it reads back every attribute it set: against plain
  moto that wait times out (3 min) and the apply fails.
* moto returns ``RedrivePolicy`` as ``json.dumps`` writes it, with spaces; SQS
  returns compact JSON (``{"deadLetterTargetArn":"arn:...","maxReceiveCount":5}``,
  as in the AWS CLI reference). The provider compares it with the configured
  ``jsonencode(...)`` verbatim, so every plan against plain moto shows a
  "whitespace changes" update of each queue with a DLQ.

* moto ignores ``UpdateTable``'s ``ReplicaUpdates`` and never lists
  ``Replicas``: the provider's ``replica`` blocks (global tables version
  2019.11.21, ``multi_region.replica_regions``) wait for a replica that never
  becomes ACTIVE. :func:`emulate_global_table_replicas` creates a real replica
  table in the other region (same keys, indexes, stream), so that region's
  instance reads it as an existing table (moto 5.2.5 only).

This wrapper fixes them, then starts moto's own server with the same arguments::

    .venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p 5000

Only the server process started this way is changed; moto is not patched on
disk, and in-process ``mock_aws`` tests are not affected.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any, Final

from dynamodb_outbox.local.moto_events import deliver_event_account, forward_events_as_aws

#: The moto release :func:`emulate_global_table_replicas` was checked against
#: (tests/unit/test_moto_global_table_replicas.py compares it with the original).
REPLICAS_CHECKED_AGAINST: Final = "5.2.5"
GLOBAL_TABLE_VERSION: Final = "2019.11.21"
#: On each table of a global table: the replica group, region -> replica settings,
#: shared by every replica's Table object.
_GROUP: Final = "_outbox_replica_group"

REDRIVE_ALLOW_POLICY = "RedriveAllowPolicy"
REDRIVE_POLICY = "RedrivePolicy"


def keep_redrive_allow_policy() -> None:
    """Make moto's SQS queues store and return ``RedriveAllowPolicy``.

    moto's ``Queue`` already stores unknown attributes under their snake_case
    name (``redrive_allow_policy``); it only leaves them out of
    ``BASE_ATTRIBUTES``, the list it answers ``GetQueueAttributes`` from (and
    validates attribute names against). A class-level ``None`` default covers
    queues created without one: moto drops ``None`` values from its answers.
    """
    from moto.sqs.models import Queue

    if REDRIVE_ALLOW_POLICY not in Queue.BASE_ATTRIBUTES:
        Queue.BASE_ATTRIBUTES.append(REDRIVE_ALLOW_POLICY)
    if not hasattr(Queue, "redrive_allow_policy"):
        Queue.redrive_allow_policy = None


def compact_redrive_policy() -> None:
    """Make moto return ``RedrivePolicy`` as compact JSON, as SQS does."""
    from moto.sqs.models import Queue

    original = Queue.attributes
    if getattr(original.fget, "_compact_redrive_policy", False):
        return

    def attributes(self: Any) -> dict[str, Any]:
        result: dict[str, Any] = original.fget(self)  # type: ignore[misc]
        if isinstance(result.get(REDRIVE_POLICY), str):
            policy = json.loads(result[REDRIVE_POLICY])
            result[REDRIVE_POLICY] = json.dumps(policy, separators=(",", ":"))
        return result

    patched = property(attributes)
    patched.fget._compact_redrive_policy = True  # type: ignore[attr-defined]
    Queue.attributes = patched  # type: ignore[method-assign,assignment]


def _replicate_table(source: Any, region: str, kms_key: str | None) -> Any:
    """Create ``source``'s replica in ``region``: same keys, indexes, billing and stream."""
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[source.account_id][region]
    provisioned = source.billing_mode == "PROVISIONED"
    return backend.create_table(
        name=source.name,
        schema=source.schema,
        throughput=source.throughput if provisioned else None,
        attr=source.attr,
        global_indexes=[
            {
                "IndexName": index.name,
                "KeySchema": index.schema,
                "Projection": index.projection,
                **({"ProvisionedThroughput": index.throughput} if provisioned else {}),
            }
            for index in source.global_indexes
        ],
        indexes=[index.describe() for index in source.indexes],
        streams=source.stream_specification,
        billing_mode=source.billing_mode,
        sse_specification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": kms_key}
        if kms_key
        else None,
        tags=[],
        deletion_protection_enabled=False,
        warm_throughput=None,
    )


def apply_replica_updates(table: Any, updates: list[dict[str, Any]]) -> None:
    """``UpdateTable``'s ``ReplicaUpdates`` (Create, Update, Delete), as version 2019.11.21 does."""
    from moto.dynamodb.exceptions import MockValidationException
    from moto.dynamodb.models import dynamodb_backends

    group: dict[str, dict[str, Any]] = getattr(table, _GROUP, None) or {
        table.region_name: {"table": table, "kms": None}
    }
    setattr(table, _GROUP, group)
    for update in updates:
        if "Create" in update:
            region = update["Create"]["RegionName"]
            if region in group:
                raise MockValidationException(
                    f"Failed to create a replica of table {table.name}: it has one in {region}"
                )
            if not (table.stream_specification or {}).get("StreamEnabled") or (
                table.stream_specification.get("StreamViewType") != "NEW_AND_OLD_IMAGES"
            ):
                raise MockValidationException(
                    "Table must have streams enabled with NEW_AND_OLD_IMAGES to be replicated"
                )
            kms = update["Create"].get("KMSMasterKeyId")
            replica = _replicate_table(table, region, kms)
            group[region] = {"table": replica, "kms": kms}
            setattr(replica, _GROUP, group)
        elif "Delete" in update:
            region = update["Delete"]["RegionName"]
            if region not in group or region == table.region_name:
                raise MockValidationException(
                    f"Cannot delete a replica in {region}: no such replica"
                )
            dynamodb_backends[table.account_id][region].delete_table(table.name)
            del group[region]
        elif "Update" in update:
            region = update["Update"]["RegionName"]
            if region not in group:
                raise MockValidationException(
                    f"Cannot update a replica in {region}: no such replica"
                )
            if "KMSMasterKeyId" in update["Update"]:
                group[region]["kms"] = update["Update"]["KMSMasterKeyId"]
    if len(group) == 1:
        delattr(table, _GROUP)


def emulate_global_table_replicas() -> bool:
    """Make moto's DynamoDB take ``ReplicaUpdates`` and describe ``Replicas`` (True when on).

    ``UpdateTable`` with ``ReplicaUpdates`` creates (or deletes) a table of the
    same name in the replica's region, with the source's keys, indexes, billing
    and stream, as DynamoDB does; ``DescribeTable`` on any replica then lists
    the *other* replicas, ACTIVE, and ``GlobalTableVersion``. Items are not
    replicated by moto (the local runtime's ``GlobalTableReplication`` does that
    where a test needs it). Installed only on moto 5.2.5, the release whose
    ``DynamoHandler.update_table`` and ``Table.describe`` it wraps.
    """
    try:
        installed = metadata.version("moto")
    except metadata.PackageNotFoundError:
        return False
    if installed != REPLICAS_CHECKED_AGAINST:
        return False
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler

    original_update = DynamoHandler.update_table
    if getattr(original_update, "__wrapped__", None) is not None:
        return True
    original_describe = Table.describe

    def update_table(self: Any) -> Any:
        updates = self.body.get("ReplicaUpdates")
        if updates:
            table = self.dynamodb_backend.get_table(self.body["TableName"])
            apply_replica_updates(table, updates)
        return original_update(self)

    def describe(self: Any, base_key: str = "TableDescription") -> dict[str, Any]:
        result: dict[str, Any] = original_describe(self, base_key=base_key)
        group = getattr(self, _GROUP, None)
        if group:
            result[base_key]["GlobalTableVersion"] = GLOBAL_TABLE_VERSION
            result[base_key]["Replicas"] = [
                {
                    "RegionName": region,
                    "ReplicaStatus": "ACTIVE",
                    **({"KMSMasterKeyId": replica["kms"]} if replica["kms"] else {}),
                }
                for region, replica in sorted(group.items())
                if region != self.region_name
            ]
        return result

    update_table.__wrapped__ = original_update  # type: ignore[attr-defined]
    describe.__wrapped__ = original_describe  # type: ignore[attr-defined]
    DynamoHandler.update_table = update_table  # type: ignore[method-assign]
    Table.describe = describe  # type: ignore[method-assign]
    return True


def patch_moto() -> None:
    """Every fix above; idempotent, for a server started in this process."""
    keep_redrive_allow_policy()
    compact_redrive_policy()
    deliver_event_account()
    forward_events_as_aws()
    emulate_global_table_replicas()


def main(argv: list[str] | None = None) -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
