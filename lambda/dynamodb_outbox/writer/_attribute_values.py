"""Plain Python values to DynamoDB attribute values, and their sizes by AWS's rules."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal, DecimalException, InvalidOperation
from typing import Any, Final, cast
from uuid import UUID

from boto3.dynamodb.types import TypeSerializer

from dynamodb_outbox.payload_json import PayloadNotEncodable, to_json_value
from dynamodb_outbox.writer._errors import InvalidWrite

MAX_NESTING_LEVELS: Final = 32
"""DynamoDB "supports nested attributes up to 32 levels deep"."""

# ------------------------------------------------------------------ serialization

_SERIALIZER: Final = TypeSerializer()


def serialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Plain Python attributes to low-level attribute values.

    Floats are accepted and stored as ``Decimal(repr(x))``: the shortest decimal
    that reads back as the same float, i.e. the number Python prints (``0.1``
    stays ``0.1``, not ``0.1000000000000000055...``). NaN and infinities are
    refused (DynamoDB numbers have none), as are empty sets (DynamoDB has no
    empty set) and numbers beyond DynamoDB's 38 digits or 1E-130..1E+126 range.
    """
    if not isinstance(item, Mapping):
        raise InvalidWrite(f"an item must be a mapping of attributes, got {type(item).__name__}")
    result: dict[str, Any] = {}
    for name, value in item.items():
        if not isinstance(name, str) or not name:
            raise InvalidWrite(f"attribute names must be non-empty strings, got {name!r}")
        result[name] = serialize_value(value, name)
    return result


def serialize_value(value: Any, path: str) -> dict[str, Any]:
    prepared = _prepare(value, path)
    try:
        serialized = cast(dict[str, Any], _SERIALIZER.serialize(prepared))
    except DecimalException as exc:
        raise InvalidWrite(
            f"attribute {path!r}: a number does not fit DynamoDB "
            f"(38 significant digits, magnitude from 1E-130 to below 1E+126): "
            f"{type(exc).__name__}"
        ) from exc
    except TypeError as exc:
        raise InvalidWrite(
            f"attribute {path!r} cannot be stored in DynamoDB: {exc}; convert it first to "
            "str, int, Decimal, bool, bytes, None, a list, a dict or a set (datetime, date "
            "and UUID are stored as their ISO 8601 / canonical text)"
        ) from exc
    return serialized


def _prepare(value: Any, path: str, depth: int = 1) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidWrite(
                f"attribute {path!r} is {value!r}; DynamoDB numbers have no NaN or Infinity"
            )
        return Decimal(repr(value))
    if isinstance(value, Mapping | list | tuple) and depth > MAX_NESTING_LEVELS:
        raise InvalidWrite(
            f"attribute {path[:200]!r} nests deeper than DynamoDB's {MAX_NESTING_LEVELS} levels"
        )
    if isinstance(value, Mapping):
        prepared = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidWrite(f"attribute {path!r} has a non-string map key {key!r}")
            prepared[key] = _prepare(item, f"{path}.{key}", depth + 1)
        return prepared
    if isinstance(value, list | tuple):
        return [_prepare(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, datetime | date | UUID):
        # Stored as the text event data gets (dynamodb_outbox.payload_json): one
        # rule for both halves of a write; read back, it is that string.
        try:
            return to_json_value(value, path=path)
        except PayloadNotEncodable as exc:
            raise InvalidWrite(f"attribute {exc}") from exc
    if isinstance(value, set | frozenset):
        if not value:
            raise InvalidWrite(
                f"attribute {path!r} is an empty set; DynamoDB cannot store one, omit the attribute"
            )
        return {_prepare(item, path, depth) for item in value}
    return value


# --------------------------------------------------------------------------- sizes


def item_size(item: Mapping[str, Any]) -> int:
    """Size in bytes of a low-level item per AWS's rules, rounded up where AWS says "approximately".

    Attribute name (UTF-8 bytes) + value, for every attribute. See
    :func:`attribute_value_size` for the values. The estimate never undercounts,
    so the writer may refuse an item a few bytes under the real limit but never
    sends one that DynamoDB would reject for its size.
    """
    return sum(_utf8_len(name) + attribute_value_size(value) for name, value in item.items())


def attribute_value_size(value: Mapping[str, Any]) -> int:
    """Size of one low-level attribute value (``{"S": ...}``, ``{"N": ...}``, ``{"M": ...}``...).

    Strings: UTF-8 bytes. Binary: raw bytes. Boolean/null: 1. Numbers: AWS says
    "about 1 byte per two significant digits + 1"; counted here as
    ``ceil((digits + 2) / 2) + 1`` plus 1 for a minus sign, an upper bound that
    covers digit pairs aligned on the decimal point. Map/list: 3 bytes + 1 byte
    per element + the elements (map keys count like attribute names). Sets: sum
    of their elements.
    """
    if not isinstance(value, Mapping) or len(value) != 1:
        raise InvalidWrite(f"not a low-level attribute value: {value!r:.80}")
    ((kind, data),) = value.items()
    if kind == "S":
        return _utf8_len(data)
    if kind == "N":
        return _number_size(data)
    if kind == "B":
        return _binary_len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_utf8_len(s) for s in data)
    if kind == "NS":
        return sum(_number_size(n) for n in data)
    if kind == "BS":
        return sum(_binary_len(b) for b in data)
    if kind == "L":
        return 3 + sum(1 + attribute_value_size(element) for element in data)
    if kind == "M":
        return 3 + sum(1 + _utf8_len(k) + attribute_value_size(v) for k, v in data.items())
    raise InvalidWrite(f"unknown attribute value type {kind!r}")


def _utf8_len(text: Any) -> int:
    if not isinstance(text, str):
        raise InvalidWrite(f"expected a string, got {type(text).__name__}")
    return len(text.encode("utf-8"))


def _binary_len(data: Any) -> int:
    if isinstance(data, bytes | bytearray | memoryview):
        return len(data)
    if isinstance(data, str):  # botocore sends a str blob as its UTF-8 bytes
        return _utf8_len(data)
    raise InvalidWrite(f"expected bytes for a binary value, got {type(data).__name__}")


def _number_size(text: Any) -> int:
    if not isinstance(text, str):
        raise InvalidWrite(f"a low-level number must be a string, got {type(text).__name__}")
    try:
        digits = Decimal(text).as_tuple().digits
    except InvalidOperation as exc:
        raise InvalidWrite(f"{text!r} is not a number") from exc
    significant = "".join(map(str, digits)).strip("0") or "0"
    negative = text.lstrip().startswith("-")
    return math.ceil((len(significant) + 2) / 2) + 1 + (1 if negative else 0)
