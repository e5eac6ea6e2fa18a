"""The condition language: :class:`Condition` and the extra actions of a transaction.

Placeholders (``#name``, ``:value``) are the caller's; values are plain Python,
converted like entity attributes (:mod:`~dynamodb_outbox.writer._attribute_values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from dynamodb_outbox.outbox_item import ATTR_PK
from dynamodb_outbox.writer._attribute_values import serialize_item, serialize_value
from dynamodb_outbox.writer._errors import InvalidWrite

ACTION_KINDS: Final = ("ConditionCheck", "Put", "Delete", "Update")
_RETURN_OLD: Final = "ReturnValuesOnConditionCheckFailure"

# -------------------------------------------------------------- conditions, actions


class TransactItem(TypedDict, total=False):
    """One element of ``TransactItems`` in the low-level client's shape: exactly one key."""

    ConditionCheck: dict[str, Any]
    Put: dict[str, Any]
    Delete: dict[str, Any]
    Update: dict[str, Any]


@dataclass(frozen=True)
class Condition:
    """A condition expression with its placeholders.

    ``values`` hold plain Python values (``str``, ``int``, ``Decimal``, ``float``,
    ``bytes``, ``dict``...); they are converted like entity attributes.

    :meth:`item_absent` and :meth:`item_exists` test the ``PK`` attribute unless
    given another name: on a table keyed otherwise, pass its partition key
    (``Condition.item_absent("pk")``), or the writer refuses the condition
    rather than let it test an attribute the item never has.

    ``return_old_item=True`` asks DynamoDB for the item as it was when the
    condition failed (``ReturnValuesOnConditionCheckFailure=ALL_OLD``): it comes
    back in plain Python on the action's :class:`CancellationReason` ``item``,
    so "already paid" can answer with the current state without a second read
    (which could see a newer state than the one that failed the condition).
    """

    expression: str
    names: Mapping[str, str] | None = None
    values: Mapping[str, Any] | None = None
    return_old_item: bool = False

    @classmethod
    def item_absent(
        cls, key_attribute: str = ATTR_PK, *, return_old_item: bool = False
    ) -> Condition:
        """Create-only: the write fails if an item with this key already exists."""
        return cls(
            "attribute_not_exists(#absent_key)",
            {"#absent_key": key_attribute},
            return_old_item=return_old_item,
        )

    @classmethod
    def item_exists(cls, key_attribute: str = ATTR_PK) -> Condition:
        """Replace-only: the write fails if no item with this key exists."""
        return cls("attribute_exists(#present_key)", {"#present_key": key_attribute})

    def to_request(self) -> dict[str, Any]:
        """The ``ConditionExpression`` / ``ExpressionAttribute*`` parameters of one action."""
        if not self.expression or not isinstance(self.expression, str):
            raise InvalidWrite("a condition needs a non-empty expression")
        request: dict[str, Any] = {"ConditionExpression": self.expression}
        if self.names:
            request["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            request["ExpressionAttributeValues"] = {
                placeholder: serialize_value(value, f"condition value {placeholder}")
                for placeholder, value in self.values.items()
            }
        if self.return_old_item:
            request[_RETURN_OLD] = "ALL_OLD"
        return request


def condition_check_action(
    key: Mapping[str, Any], condition: Condition, *, table_name: str | None = None
) -> TransactItem:
    """A ``ConditionCheck`` that makes the write depend on another item (nothing is written).

    ``key`` holds plain Python values. Without ``table_name`` the writer's table
    is used.
    """
    body = {"Key": serialize_item(key), **condition.to_request()}
    return {"ConditionCheck": _with_table(body, table_name)}


def update_action(
    key: Mapping[str, Any],
    update_expression: str,
    *,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    condition: Condition | None = None,
    table_name: str | None = None,
) -> TransactItem:
    """An ``Update`` in the same transaction; placeholders are shared with ``condition``."""
    body: dict[str, Any] = {"Key": serialize_item(key), "UpdateExpression": update_expression}
    merged_names = dict(names or {})
    merged_values = {p: serialize_value(v, f"update value {p}") for p, v in (values or {}).items()}
    if condition is not None:
        cond = condition.to_request()
        body["ConditionExpression"] = cond["ConditionExpression"]
        if _RETURN_OLD in cond:
            body[_RETURN_OLD] = cond[_RETURN_OLD]
        _merge_placeholders(merged_names, cond.get("ExpressionAttributeNames", {}))
        _merge_placeholders(merged_values, cond.get("ExpressionAttributeValues", {}))
    if merged_names:
        body["ExpressionAttributeNames"] = merged_names
    if merged_values:
        body["ExpressionAttributeValues"] = merged_values
    return {"Update": _with_table(body, table_name)}


def delete_action(
    key: Mapping[str, Any], *, condition: Condition | None = None, table_name: str | None = None
) -> TransactItem:
    """A ``Delete`` in the same transaction."""
    body = {"Key": serialize_item(key), **(condition.to_request() if condition else {})}
    return {"Delete": _with_table(body, table_name)}


def put_action(
    item: Mapping[str, Any], *, condition: Condition | None = None, table_name: str | None = None
) -> TransactItem:
    """A ``Put`` of another item in the same transaction (``item`` holds plain Python values)."""
    body = {"Item": serialize_item(item), **(condition.to_request() if condition else {})}
    return {"Put": _with_table(body, table_name)}


def _with_table(body: dict[str, Any], table_name: str | None) -> dict[str, Any]:
    return {"TableName": table_name, **body} if table_name else body


def _merge_placeholders(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for placeholder, value in extra.items():
        if placeholder in into and into[placeholder] != value:
            raise InvalidWrite(
                f"placeholder {placeholder} means two different things in the update "
                "expression and its condition; rename one of them"
            )
        into[placeholder] = value
