"""How an event's data becomes JSON: one rule for the values Python and DynamoDB hand you.

=====================  ==============================================================
Python value           JSON
=====================  ==============================================================
``str``, ``bool``,     as :mod:`json` writes them
``None``, ``int``
``float``              a number; NaN and the infinities are refused (no JSON form)
``Decimal``            a number with exactly the Decimal's digits: ``Decimal("19.90")``
                       is written ``19.90``, never rounded through a float. NaN,
                       infinities and magnitudes beyond a float's range are refused:
                       a reader parsing numbers as floats (Python's default,
                       JavaScript) would get infinity
``datetime``           ISO 8601 with its UTC offset (``2024-05-01T12:00:00+02:00``).
                       A naive datetime is refused: it names no instant, and reading
                       it as local time gives one answer on a laptop and another on
                       Lambda (UTC). Attach a zone: ``datetime.now(UTC)``
``date``               ``YYYY-MM-DD``
``UUID``               its canonical string
``tuple``              an array
``Mapping``            an object; ``int``, ``float``, ``bool`` and ``None`` keys become
                       strings, as :mod:`json` makes them
=====================  ==============================================================

Anything else (``bytes``, ``set``, your own classes) is refused with the path of
the value, unless the caller's ``default`` turns it into one of the above (the
same contract as :func:`json.dumps`'s ``default``): bytes have no faithful JSON
form, and choosing base64 or hex is the caller's call.

Everything read back from DynamoDB (``Decimal`` numbers, ``str``, ``bool``,
``dict``, ``list``) therefore encodes as it is. Sets and ``Binary`` do not.

Reading the JSON back, numbers are floats by default; pass
``parse_float=Decimal`` (``Envelope.from_json``, ``parse_body``,
``OutboxConsumer``) to get the exact digits back. Datetimes, dates and UUIDs
come back as the strings they were written as.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final
from uuid import UUID

from dynamodb_outbox._public_names import present_as

__all__ = ["JsonDefault", "PayloadNotEncodable", "dumps", "to_json_value"]

JsonDefault = Callable[[Any], Any]
"""Like :func:`json.dumps`'s ``default``: returns an encodable stand-in or raises ``TypeError``."""

_KEY_SCALARS: Final = (int, float, bool, type(None))


class PayloadNotEncodable(ValueError):
    """A value has no JSON form under the rule above; the message names where it is."""


def to_json_value(value: Any, *, default: JsonDefault | None = None, path: str = "data") -> Any:
    """A copy of ``value`` made only of ``dict``, ``list``, ``str``, ``int``, ``float``,
    ``bool``, ``None`` and finite ``Decimal``, converted by the module's rule.

    The copy shares nothing mutable with ``value``. Raises
    :class:`PayloadNotEncodable` naming the first value that has no JSON form.
    """
    try:
        # Most event data holds JSON's own types only: the C codec copies them fastest.
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _convert(value, path, default)


def dumps(data: Any) -> str:
    """Compact JSON of a :func:`to_json_value` result, non-ASCII kept, Decimals exact."""
    try:
        return json.dumps(
            data,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            default=_decimal_found,
        )
    except _HoldsDecimal:
        # The standard encoder can only write a Decimal through a float; write
        # this value ourselves (rare, so the common case keeps the C encoder).
        return "".join(_encode(data))


def _convert(value: Any, path: str, default: JsonDefault | None) -> Any:
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadNotEncodable(f"{path} is {value!r}, which JSON cannot represent")
        return float(value)
    if isinstance(value, Decimal):
        return _checked_decimal(value, path)
    if isinstance(value, Mapping):
        converted: dict[str, Any] = {}
        for key, item in value.items():
            name = _key(key, path)
            converted[name] = _convert(item, f"{path}.{name}", default)
        return converted
    if isinstance(value, list | tuple):
        return [_convert(item, f"{path}[{index}]", default) for index, item in enumerate(value)]
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise PayloadNotEncodable(
                f"{path} is a naive datetime ({value.isoformat()}): it names no instant; "
                "give it a time zone (datetime.now(UTC), value.replace(tzinfo=...))"
            )
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return _convert_with_default(value, path, default)


def _convert_with_default(value: Any, path: str, default: JsonDefault | None) -> Any:
    kind = type(value).__name__
    if default is None:
        raise PayloadNotEncodable(
            f"{path} is a {kind}, which has no JSON form here; convert it first or pass "
            "default= (see dynamodb_outbox.payload_json)"
        )
    try:
        stand_in = default(value)
    except TypeError as exc:
        raise PayloadNotEncodable(f"{path} is a {kind} that default= refused: {exc}") from exc
    if type(stand_in) is type(value):
        raise PayloadNotEncodable(f"{path}: default= returned a {kind} for a {kind}")
    return _convert(stand_in, path, default)


def _checked_decimal(value: Decimal, path: str) -> Decimal:
    if not value.is_finite():
        raise PayloadNotEncodable(f"{path} is Decimal({str(value)!r}), which JSON cannot represent")
    if math.isinf(float(value)):
        raise PayloadNotEncodable(
            f"{path} is Decimal({str(value)[:40]!r}), beyond a float's range: readers that "
            "parse JSON numbers as floats would get infinity (send it as a string)"
        )
    return value


def _key(key: Any, path: str) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, _KEY_SCALARS):
        if isinstance(key, float) and not math.isfinite(key):
            raise PayloadNotEncodable(f"{path} has the key {key!r}, which JSON cannot represent")
        return json.dumps(key)
    raise PayloadNotEncodable(
        f"{path} has a {type(key).__name__} key {key!r:.40}; keys are strings"
    )


class _HoldsDecimal(Exception):
    pass


def _decimal_found(value: Any) -> Any:
    if isinstance(value, Decimal):
        raise _HoldsDecimal
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encode(data: Any) -> Iterator[str]:
    if isinstance(data, Decimal):
        yield str(data)  # finite: always a valid JSON number (-1.50, 2E+3, 1E-7)
    elif isinstance(data, dict):
        yield "{"
        for index, (key, value) in enumerate(data.items()):
            yield ("," if index else "") + _string(key) + ":"
            yield from _encode(value)
        yield "}"
    elif isinstance(data, list):
        yield "["
        for index, value in enumerate(data):
            if index:
                yield ","
            yield from _encode(value)
        yield "]"
    elif isinstance(data, str):
        yield _string(data)
    else:  # None, bool, int, finite float
        yield json.dumps(data, allow_nan=False)


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


# Documented as dynamodb_outbox.PayloadNotEncodable (docs/python.md).
present_as("dynamodb_outbox", PayloadNotEncodable)
