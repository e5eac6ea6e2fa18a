"""moto's EventBridge delivers events to targets the way AWS does.

Used by the moto server the Terraform tests apply to (``scripts/moto_server.py``),
by the project's in-process tests and by the testing kit
(:mod:`dynamodb_outbox.testing`), so a consumer's sender checks
(:mod:`dynamodb_outbox.sender_checks`) see what they would see on AWS.
"""

from __future__ import annotations

__all__ = ["deliver_event_account"]

#: What moto (5.2.5) writes into an event it delivers to a target with no input
#: transformer; AWS delivers the whole event, whose ``account`` moto leaves out.
_MOTO_EVENT_TEMPLATE = (
    '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
    '"source": "<source>", "region": "<region>", "resources": <resources>, "detail": <detail>}'
)


def deliver_event_account() -> None:
    """Make moto's EventBridge targets receive the event's ``account``, as AWS's do.

    An event delivered to an SQS target carries version, id, detail-type,
    source, account, time, region, resources and detail (EventBridge User
    Guide, "Amazon EventBridge events"); consumers check ``account``
    (dynamodb_outbox.sender_checks). moto builds the delivered event from a
    template without it. Only that exact template is changed, so a later moto
    that fixed it is left alone.
    """
    from moto.events.utils import EventTemplateParser

    if EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE == _MOTO_EVENT_TEMPLATE:
        EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = _MOTO_EVENT_TEMPLATE.replace(
            '"source": "<source>", ', '"source": "<source>", "account": "<account>", '
        )
