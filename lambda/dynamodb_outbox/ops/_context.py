"""What every command gets: the global options, one client per service, and its report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dynamodb_outbox.ops._errors import EXIT_OK
from dynamodb_outbox.stream_types import string_attribute
from dynamodb_outbox.table_keys import TableKeys

AttributeMap = dict[str, dict[str, Any]]


ClientFactory = Callable[[str], Any]


@dataclass
class Report:
    """What a command did: ``data`` for ``--json``, ``lines`` for people."""

    data: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK

    def say(self, line: str) -> None:
        self.lines.append(line)


@dataclass
class Context:
    """Global options and the client factory, as every command gets them."""

    table: str
    region: str
    dry_run: bool
    pending_index: str
    pending_shards: int
    make_client: ClientFactory
    now: datetime
    #: The table's key names (``--partition-key``/``--sort-key`` or the environment).
    table_keys: TableKeys
    #: Whose pending shards the pending index is read in (multi-region,
    #: ``--written-in``): None stands for the unprefixed shards of a single region.
    written_in: tuple[str | None, ...] = (None,)
    #: Where a command that waits reports how far it got (stderr; the report is stdout).
    progress: Callable[[str], None] = field(default=lambda line: None)
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.make_client(service)
        return self._clients[service]


def s(item: Mapping[str, Any], name: str) -> str:
    return string_attribute(item, name) or ""


def key_of(item: Mapping[str, Any], ctx: Context) -> AttributeMap:
    return ctx.table_keys.key_of(item)
