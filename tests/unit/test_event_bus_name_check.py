"""The EventBridge sink refuses a bus name PutEvents would refuse, before any event.

The handlers' events client sends without botocore's parameter validation, and
a call AWS refuses whole as malformed quarantines its entries: a bad
``OUTBOX_EVENT_BUS_NAME`` must stop the function at its configuration instead.
"""

from __future__ import annotations

import re

import botocore.session
import pytest

from dynamodb_outbox.settings import ConfigurationError, sink_from_environment
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sinks._eventbridge import _EVENT_BUS_NAME_MAX_LENGTH, _event_bus_name_pattern

NAMES = [
    "orders",
    "default",
    "a.b-c_d",
    "arn:aws:events:eu-west-1:123456789012:event-bus/orders",
    "arn:aws-us-gov:events:us-gov-west-1:123456789012:event-bus/orders",
    "x" * _EVENT_BUS_NAME_MAX_LENGTH,
    "x" * (_EVENT_BUS_NAME_MAX_LENGTH + 1),
    "",
    "orders bus",
    "orders/",
    "orders\n",
    "arn:aws:events:eu-west-1:12345:event-bus/orders",
    "arn:aws:sns:eu-west-1:123456789012:orders",
    "ordérs",
]


def _botocore_accepts(name: str) -> bool:
    shape = (
        botocore.session.get_session()
        .get_service_model("events")
        .shape_for("PutEventsRequestEntry")
        .members["EventBusName"]
    )
    meta = shape.metadata
    return (
        meta["min"] <= len(name) <= meta["max"] and re.fullmatch(meta["pattern"], name) is not None
    )


@pytest.mark.parametrize("name", NAMES, ids=[n[:40] or "empty" for n in NAMES])
def test_the_sink_accepts_exactly_the_names_putevents_accepts(name: str) -> None:
    accepted = _event_bus_name_pattern().fullmatch(name) is not None
    assert accepted == _botocore_accepts(name)
    if accepted:
        assert EventBridgeSink(object(), name).event_bus_name == name  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError, match="is not one PutEvents accepts"):
            EventBridgeSink(object(), name)  # type: ignore[arg-type]


def test_a_bad_bus_name_in_the_environment_is_a_configuration_error_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"OUTBOX_EVENT_BUS_NAME.*'orders bus'"):
        sink_from_environment(
            {"OUTBOX_EVENT_BUS_NAME": "orders bus"}, client_factory=lambda service: object()
        )
