"""``outbox-ops``: the operator's console for an outbox table.

Global options may come before or after the command::

    outbox-ops --table orders pending
    outbox-ops replay-failures --table orders --queue-url https://... --bus-name orders --dry-run
    outbox-ops replay --name orders --consumer billing --from 2026-12-01T08:00Z --to 2026-12-01T09Z

Exit codes: 0 done (or nothing to do), 1 AWS refused or failed (missing table,
queue, permission...), 2 bad input, 3 ran but left work for a re-run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, Any, NoReturn

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox._clock import utc_now
from dynamodb_outbox.ops import adopt, pending, redrive, release, replay, replay_archive
from dynamodb_outbox.ops._context import ClientFactory, Context, Report
from dynamodb_outbox.ops._errors import (
    EXIT_AWS_ERROR,
    EXIT_BAD_INPUT,
    OpsError,
    error_code,
    explain,
)
from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, writers_shard_count
from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX
from dynamodb_outbox.settings import (
    ENV_PARTITION_KEY,
    ENV_PENDING_INDEX,
    ENV_PENDING_SHARDS,
    ENV_SORT_KEY,
    ENV_TABLE_NAME,
    ConfigurationError,
    pending_index_from_environment,
    pending_shards_from_environment,
    table_key_names_from_environment,
)
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS, InvalidTableKeys, TableKeys

# The `outbox-ops` console script and its in-process form; the rest is private.
__all__ = ["console_main", "main"]

PROG = "outbox-ops"


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit 2, no usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _pending_shards_from_environment() -> int:
    return pending_shards_from_environment(os.environ)


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    def default(value: object) -> object:
        # On the subcommands the defaults are suppressed, so an option given
        # before the command is not overwritten by the subcommand's default.
        return argparse.SUPPRESS if suppress else value

    environ = os.environ
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--table",
        default=default(environ.get(ENV_TABLE_NAME)),
        help=f"the outbox table (default: ${ENV_TABLE_NAME})",
    )
    group.add_argument(
        "--region", default=default(None), help="AWS region (default: the AWS SDK's)"
    )
    group.add_argument(
        "--endpoint-url",
        default=default(None),
        help="AWS endpoint, e.g. http://localhost:5000 for the emulator",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        default=default(False),
        help="read and report, write nothing",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print one JSON document instead of text",
    )
    group.add_argument(
        "--pending-index",
        default=default(pending_index_from_environment(environ)),
        help=f"the sparse pending index (default: ${ENV_PENDING_INDEX} or {DEFAULT_PENDING_INDEX})",
    )
    group.add_argument(
        "--pending-shards",
        type=int,
        default=default(_pending_shards_from_environment()),
        help=f"pending-index shards: only {DEFAULT_PENDING_SHARDS}, the writers' (kept for "
        f"scripts that pass it; ${ENV_PENDING_SHARDS} likewise)",
    )
    group.add_argument(
        "--written-in",
        action="append",
        metavar="REGION",
        default=default(None),
        help="multi-region: read the pending items written in REGION (repeat for several; "
        "default: a single-region outbox's)",
    )
    partition_key, sort_key = table_key_names_from_environment(environ)
    group.add_argument(
        "--partition-key",
        default=default(partition_key),
        help=f"the table's partition key attribute (default: ${ENV_PARTITION_KEY} or "
        f"{DEFAULT_TABLE_KEYS.partition})",
    )
    group.add_argument(
        "--sort-key",
        default=default(sort_key),
        help=f"the table's sort key attribute (default: ${ENV_SORT_KEY} or "
        f"{DEFAULT_TABLE_KEYS.sort})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Operate a DynamoDB outbox: inspect, replay, redrive, release.",
        epilog="Exit codes: 0 done or nothing to do, 1 AWS error (not found, access denied), "
        "2 bad input, 3 work left for a re-run. Every command is safe to re-run.",
    )
    _global_options(parser, suppress=False)
    common = _Parser(add_help=False)
    _global_options(common, suppress=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (pending, replay, replay_archive, redrive, release, adopt):
        module.add_parser(subparsers, [common])
    return parser


def _default_client_factory(region: str | None, endpoint_url: str | None) -> ClientFactory:
    session = boto3.session.Session(region_name=region)

    def make(service: str) -> Any:
        kwargs: dict[str, Any] = {"region_name": region}
        if endpoint_url:
            kwargs["endpoint_url"] = endpoint_url
        return session.client(service, **kwargs)  # type: ignore[call-overload]

    return make


def _region(args: argparse.Namespace) -> str:
    # botocore reads AWS_DEFAULT_REGION (and the profile); Lambda and many shells set AWS_REGION.
    region = args.region or boto3.session.Session().region_name or os.environ.get("AWS_REGION")
    if not region:
        raise OpsError("no AWS region: pass --region or set AWS_REGION", EXIT_BAD_INPUT)
    return str(region)


def _table_keys(args: argparse.Namespace) -> TableKeys:
    try:
        return TableKeys(args.partition_key, args.sort_key)
    except InvalidTableKeys as exc:
        flags = " and ".join(f"--{role}-key" for role in exc.roles)
        raise OpsError(f"{flags}: {exc}", EXIT_BAD_INPUT) from None


def _explain_missing_index(exc: BaseException, ctx: Context | None) -> str | None:
    """Tell "no such index" from "no such table": some emulators answer both alike."""
    if ctx is None or not isinstance(exc, ClientError) or exc.operation_name != "Query":
        return None
    if error_code(exc) != "ResourceNotFoundException":
        return None
    try:
        table = ctx.client("dynamodb").describe_table(TableName=ctx.table)["Table"]
    except (ClientError, BotoCoreError):
        return None  # the table is what is missing (or cannot be described)
    indexes = [index["IndexName"] for index in table.get("GlobalSecondaryIndexes") or []]
    return (
        f"index {ctx.pending_index} not found on table {ctx.table} in region {ctx.region} "
        f"(indexes: {', '.join(indexes) or 'none'}; pass --pending-index)"
    )


def _progress(line: str, err: IO[str]) -> None:
    # While a command waits (a replay): the report itself comes at the end, on stdout.
    err.write(line + "\n")
    err.flush()


def _emit(report: Report, as_json: bool, out: IO[str]) -> None:
    if as_json:
        out.write(json.dumps(report.data, indent=2, sort_keys=True, default=str) + "\n")
    else:
        for line in report.lines:
            out.write(line + "\n")


def main(
    argv: Sequence[str] | None = None,
    *,
    client_factory: ClientFactory | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    now: Callable[[], datetime] = utc_now,
) -> int:
    """Run one command; returns the exit code (``client_factory`` replaces boto3 in tests)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        # The environment feeds the options' defaults, so it is read first: a bad
        # variable is one line even for --help, as the functions report it.
        parser = build_parser()
    except ConfigurationError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_BAD_INPUT
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or bad arguments (2), already printed
        return int(exc.code or 0)
    ctx: Context | None = None
    resource = getattr(args, "queue_url", None) or getattr(args, "dlq_arn", None)
    try:
        if not args.table and getattr(args, "needs_table", True):
            raise OpsError(f"pass --table or set {ENV_TABLE_NAME}", EXIT_BAD_INPUT)
        try:
            writers_shard_count(args.pending_shards, "--pending-shards")
        except ValueError as exc:
            raise OpsError(str(exc), EXIT_BAD_INPUT) from None
        table_keys = _table_keys(args)
        if client_factory is None:
            region = _region(args)
            factory = _default_client_factory(region, args.endpoint_url)
        else:
            factory = client_factory
            region = args.region or str(factory("dynamodb").meta.region_name)
        ctx = Context(
            table=args.table or "",
            region=region,
            dry_run=args.dry_run,
            pending_index=args.pending_index,
            pending_shards=args.pending_shards,
            make_client=factory,
            now=now(),
            table_keys=table_keys,
            written_in=tuple(args.written_in) if args.written_in else (None,),
            progress=lambda line: _progress(line, err),
        )
        report: Report = args.run(ctx, args)
    except OpsError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return exc.exit_code
    except (ClientError, BotoCoreError) as exc:
        err.write(
            f"{PROG}: error: {_explain_missing_index(exc, ctx) or explain(exc, ctx, resource)}\n"
        )
        return EXIT_AWS_ERROR
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted; every command is safe to re-run\n")
        return 130
    _emit(report, args.json, out)
    return report.exit_code


def console_main() -> None:
    """The ``outbox-ops`` console script."""
    raise SystemExit(main())
