"""Each measurement of ``make bench``, as a function returning plain data (JSON-ready)."""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import statistics
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks import emulator
from benchmarks.emulator import BUS_NAME, TABLE_NAME, CallCounter, Latency
from benchmarks.overlapped import AlwaysOverlaps, publish_stream_batch_sequential
from benchmarks.seed_publisher import publicar_outbox, published
from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, outbox_item
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, table_client
from dynamodb_outbox.sinks import EventBridgeSink, sink_client
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer._attribute_values import item_size, serialize_item
from tests.support.moto_tables import create_outbox_table

ROOT = Path(__file__).resolve().parent.parent
KB = 1024
ZIP_PATH = ROOT / "package" / "dynamodb_outbox.zip"
LAYER_ZIP_PATH = ROOT / "package" / "dynamodb_outbox_layer.zip"
HANDLER_MODULES = (
    "dynamodb_outbox.publisher",
    "dynamodb_outbox.sweeper",
    "dynamodb_outbox.reference_consumer",
    "dynamodb_outbox.consumer",
    "dynamodb_outbox.writer",
)
#: The module's own functions (the Lambda handlers Terraform deploys): the cold
#: start goal applies to them; the other modules are reported.
GOAL_MODULES = ("dynamodb_outbox.publisher", "dynamodb_outbox.sweeper")
#: Publisher CPU per 1,000 events over the seed's, canned answers (issue 28).
CPU_RATIO_GOAL = 0.15
#: Import time a handler may add to ``import boto3``, from the zip (issue 28).
COLD_START_GOAL_MS = 20.0
#: The deployment zip's ceiling: AWS Lambda's console edits a function's code
#: inline only up to a 3 MB package ("Lambda quotas", console limits); past that
#: an operator can no longer read the deployed handler in the console.
ZIP_GOAL_BYTES = 3 * 1000 * 1000
#: The aim the zip had before it carried bytecode, now for its sources alone:
#: reported against, not failed (docs/decisions.md, "Bytecode in the zip").
SOURCE_ZIP_AIM_BYTES = 100 * KB
BUILD_SCRIPT = ROOT / "scripts" / "build_package.py"


class _Stack:
    """Table and bus on the emulator; setup clients apart from the measured code's clients."""

    def __init__(self) -> None:
        self.setup_dynamodb, setup_events = emulator.clients()
        create_outbox_table(self.setup_dynamodb, TABLE_NAME)
        emulator.create_bus(setup_events)
        self.dynamodb, self.events = emulator.clients()
        self.counter = CallCounter().attach(self.dynamodb, self.events)
        self.latency = Latency(0.0).attach(self.dynamodb, self.events)
        self.sink = EventBridgeSink(self.events, BUS_NAME)

    def ours(self, records: list[dict[str, Any]]) -> int:
        deps = PublishDependencies(
            self.sink, TABLE_NAME, self.dynamodb, table_keys=DEFAULT_TABLE_KEYS
        )
        return publish_stream_batch(records, deps).published

    def sequential(self, records: list[dict[str, Any]]) -> int:
        return publish_stream_batch_sequential(
            records, sink=self.sink, table_name=TABLE_NAME, dynamodb_client=self.dynamodb
        ).published

    def baseline(self, records: list[dict[str, Any]]) -> int:
        response = publicar_outbox(
            records,
            events_client=self.events,
            dynamodb_client=self.dynamodb,
            event_bus_name=BUS_NAME,
            source=emulator.SOURCE,
            table_name=TABLE_NAME,
        )
        return published(records, response)

    def load(self, batch: emulator.OutboxBatch) -> None:
        emulator.put_items(self.setup_dynamodb, batch.items)

    def remaining(self) -> int:
        return emulator.table_count(self.setup_dynamodb)


# ------------------------------------------------------------------ calls/event


def count_calls(batch_sizes: tuple[int, ...] = (10, 100, 1000)) -> list[dict[str, Any]]:
    """API calls per published event, ours and baseline, on the same records, nothing failing."""
    rows = []
    with emulator.emulator():
        stack = _Stack()
        for size in batch_sizes:
            batch = emulator.outbox_batch(size)
            row: dict[str, Any] = {"batch_size": size}
            for name, publish in (("ours", stack.ours), ("baseline", stack.baseline)):
                stack.load(batch)
                stack.counter.reset()
                done = publish(batch.records)
                left = stack.remaining()
                if done != size or left:
                    raise RuntimeError(
                        f"{name} at batch size {size}: published {done}, {left} items left"
                    )
                row[name] = {
                    "calls": stack.counter.total,
                    "events": done,
                    "calls_per_event": stack.counter.total / done,
                    "by_operation": dict(sorted(stack.counter.calls.items())),
                }
            rows.append(row)
    return rows


def calls_goal(batch_size: int) -> float:
    """The goal: at most 10 entries per PutEvents and 25 deletes per BatchWriteItem.

    0.15 from batch size 100 on (the issue's goal; the exact bound is 0.14); below
    that the fixed cost of the two calls shows, so the bound is the exact count.
    """
    exact = (math.ceil(batch_size / 10) + math.ceil(batch_size / 25)) / batch_size
    return max(exact, 0.15) if batch_size >= 100 else exact


# --------------------------------------------------------------------- CPU time


def cpu_per_1000(repetitions: int = 5, batch_size: int = 100) -> dict[str, Any]:
    """Process CPU seconds around the publish calls only, per 1,000 events, median of runs."""
    batches_per_run = 1000 // batch_size
    samples: dict[str, list[float]] = {"ours": [], "baseline": []}
    with emulator.emulator():
        stack = _Stack()
        for _ in range(repetitions):
            for name, publish in (("ours", stack.ours), ("baseline", stack.baseline)):
                batches = [emulator.outbox_batch(batch_size) for _ in range(batches_per_run)]
                for batch in batches:
                    stack.load(batch)
                spent = 0.0
                for batch in batches:
                    start = time.process_time()
                    publish(batch.records)
                    spent += time.process_time() - start
                samples[name].append(spent)
    ours, base = statistics.median(samples["ours"]), statistics.median(samples["baseline"])
    return {
        "batch_size": batch_size,
        "repetitions": repetitions,
        "ours_seconds": ours,
        "baseline_seconds": base,
        "ratio": ours / base,
        "samples": samples,
        "note": "CPU of moto (in-process emulator) is included in both figures",
    }


def floor_publisher(records: Sequence[dict[str, Any]], *, events: Any, dynamodb: Any) -> int:
    """The calls ours makes and nothing else: the floor of the CPU figure.

    The stored text as ``Detail`` with the event's ``Time``, 10 entries per
    ``PutEvents`` and 25 keys per ``BatchWriteItem``; no check of any kind, no
    failure handling (every answer is a success here).
    """
    entries, keys = [], []
    for record in records:
        image = record["dynamodb"]["NewImage"]
        body = image["envelope"]["S"]
        time_text = body[body.index('"time":"') + 8 :].split('"', 1)[0]
        entries.append(
            {
                "Source": emulator.SOURCE,
                "DetailType": image["event_type"]["S"],
                "Detail": body,
                "EventBusName": BUS_NAME,
                "Time": datetime.fromisoformat(time_text),
            }
        )
        keys.append(record["dynamodb"]["Keys"])
    for start in range(0, len(entries), 10):
        events.put_events(Entries=entries[start : start + 10])
    for start in range(0, len(keys), 25):
        chunk = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
        dynamodb.batch_write_item(RequestItems={TABLE_NAME: chunk})
    return len(entries)


def cpu_per_1000_without_emulator(repetitions: int = 5, batch_size: int = 100) -> dict[str, Any]:
    """Like :func:`cpu_per_1000`, but every call is answered at once with success, no moto.

    botocore still serialises, signs and parses, so this is the handler's own CPU.
    ``ours`` runs on the clients the handlers make (:func:`sinks.sink_client`,
    :func:`publishing.table_client`: no parameter validation);
    ``ours_default_client`` on default ones, as the seed does;
    ``ours_overlapped`` forces the delete overlap on, which the handler starts
    only once a call waits on the network (canned answers never do): what the
    overlap costs in CPU. ``floor`` runs on the handlers' clients, like for like
    with ``ours``; ``floor_default_client`` on default ones, like for like with
    the seed and ``ours_default_client``.

    Every row starts from a collected heap and runs with the garbage collector
    off while it is timed: otherwise a collection the previous row's garbage
    triggers lands in whichever row comes next (``ours_default_client`` read
    0.24 s instead of about 0.17 s).
    """
    batches_per_run = 1000 // batch_size
    names = (
        "ours",
        "ours_default_client",
        "ours_overlapped",
        "baseline",
        "floor",
        "floor_default_client",
    )
    samples: dict[str, list[float]] = {name: [] for name in names}
    with emulator.fake_aws_environment():
        dynamodb, events = emulator.clients()
        # The handlers' own clients (region from the environment).
        handler_events, handler_dynamodb = sink_client("events"), table_client()
        emulator.CannedAws().attach(dynamodb, events, handler_events, handler_dynamodb)
        # On every client, so that each implementation pays for the counting hook alike.
        counter = CallCounter().attach(dynamodb, events, handler_events, handler_dynamodb)
        sink = EventBridgeSink(handler_events, BUS_NAME)
        default_sink = EventBridgeSink(events, BUS_NAME)

        def ours(records: list[dict[str, Any]]) -> int:
            deps = PublishDependencies(
                sink, TABLE_NAME, handler_dynamodb, table_keys=DEFAULT_TABLE_KEYS
            )
            return publish_stream_batch(records, deps).published

        def ours_default_client(records: list[dict[str, Any]]) -> int:
            deps = PublishDependencies(
                default_sink, TABLE_NAME, dynamodb, table_keys=DEFAULT_TABLE_KEYS
            )
            return publish_stream_batch(records, deps).published

        def ours_overlapped(records: list[dict[str, Any]]) -> int:
            return publish_stream_batch_sequential(
                records,
                sink=sink,
                table_name=TABLE_NAME,
                dynamodb_client=handler_dynamodb,
                publication=AlwaysOverlaps,
            ).published

        def baseline(records: list[dict[str, Any]]) -> int:
            response = publicar_outbox(
                records,
                events_client=events,
                dynamodb_client=dynamodb,
                event_bus_name=BUS_NAME,
                source=emulator.SOURCE,
                table_name=TABLE_NAME,
            )
            return published(records, response)

        def floor(records: list[dict[str, Any]]) -> int:
            return floor_publisher(records, events=handler_events, dynamodb=handler_dynamodb)

        def floor_default_client(records: list[dict[str, Any]]) -> int:
            return floor_publisher(records, events=events, dynamodb=dynamodb)

        runs = {
            "ours": ours,
            "ours_default_client": ours_default_client,
            "ours_overlapped": ours_overlapped,
            "baseline": baseline,
            "floor": floor,
            "floor_default_client": floor_default_client,
        }
        calls = 0
        for _ in range(repetitions):
            for name, publish in runs.items():
                batches = [emulator.outbox_batch(batch_size) for _ in range(batches_per_run)]
                spent, done = 0.0, 0
                counter.reset()
                gc.collect()
                gc.disable()
                try:
                    for batch in batches:
                        start = time.process_time()
                        done += publish(batch.records)
                        spent += time.process_time() - start
                finally:
                    gc.enable()
                if done != 1000:
                    raise RuntimeError(f"canned {name}: published {done}")
                if name == "ours":
                    calls = counter.total
                samples[name].append(spent)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base_s = medians["baseline"]
    return {
        "batch_size": batch_size,
        "repetitions": repetitions,
        "ours_seconds": medians["ours"],
        "baseline_seconds": base_s,
        "ratio": medians["ours"] / base_s,
        "ratio_of_minima": min(samples["ours"]) / min(samples["baseline"]),
        "ours_default_client_seconds": medians["ours_default_client"],
        "ours_default_client_ratio": medians["ours_default_client"] / base_s,
        "ours_overlapped_seconds": medians["ours_overlapped"],
        "ours_overlapped_ratio": medians["ours_overlapped"] / base_s,
        "floor_seconds": medians["floor"],
        "floor_ratio": medians["floor"] / base_s,
        "floor_default_client_seconds": medians["floor_default_client"],
        "floor_default_client_ratio": medians["floor_default_client"] / base_s,
        "samples": samples,
        "calls": calls,
        "goal_ratio": CPU_RATIO_GOAL,
        "note": "no emulator: answered by a before-send hook (sign, serialise, parse kept; "
        "ours on the handlers' clients, without parameter validation)",
    }


# ---------------------------------------------------------------------- sweeper


#: DynamoDB bills reads in units of 4 KB: a strongly consistent read of up to 4 KB
#: is one read unit, an eventually consistent one half ("DynamoDB read and write
#: operations", capacity unit consumption for reads). GetItem and BatchGetItem
#: round each item up to 4 KB; Query and Scan round the total size of the items
#: they read (before any filter) up to 4 KB per call. Reads of a global
#: secondary index are always eventually consistent ("DynamoDB read consistency").
READ_UNIT_BYTES = 4096


def _read_units(size: int, consistent: bool) -> float:
    """Read units for ``size`` bytes read in one unit of account (an item, or a call)."""
    return max(1, math.ceil(size / READ_UNIT_BYTES)) * (1.0 if consistent else 0.5)


class _ReadMeter:
    """Items DynamoDB evaluated per read call, and the read units they cost (botocore hooks).

    Scans are charged by :func:`sweeper_reads` from the table's contents: a
    filtered Scan's answer does not hold the items it read.
    """

    def __init__(self, client: Any) -> None:
        self.evaluated: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.read_units: dict[str, float] = {}
        self.consistent: dict[str, list[bool]] = {}
        self._request: dict[str, Any] = {}
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._request = params

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        name = model.name
        if name in ("Query", "Scan"):
            count = int(parsed.get("ScannedCount", parsed.get("Count", 0)))
            consistent = bool(self._request.get("ConsistentRead")) and not self._request.get(
                "IndexName"
            )
            if name == "Query":
                size = sum(item_size(item) for item in parsed.get("Items") or [])
                self._charge(name, _read_units(size, consistent), consistent)
        elif name == "BatchGetItem":
            count = 0
            for table, items in (parsed.get("Responses") or {}).items():
                consistent = bool(self._request["RequestItems"][table].get("ConsistentRead"))
                count += len(items)
                for item in items:
                    self._charge(name, _read_units(item_size(item), consistent), consistent)
        else:
            return
        self.evaluated[name] = self.evaluated.get(name, 0) + count
        self.calls[name] = self.calls.get(name, 0) + 1

    def _charge(self, name: str, units: float, consistent: bool) -> None:
        self.read_units[name] = self.read_units.get(name, 0.0) + units
        if consistent not in self.consistent.setdefault(name, []):
            self.consistent[name].append(consistent)


def sweeper_reads(entities: int = 5000, pending: int = 100) -> dict[str, Any]:
    """Items read per pending item: the sweep (pending index + BatchGetItem) vs a filtered Scan."""
    with emulator.emulator():
        stack = _Stack()
        entity_items = [
            serialize_item(
                {
                    "PK": f"CUSTOMER#{n}",
                    "SK": "PROFILE",
                    "name": f"customer {n}",
                    "email": f"c{n}@example.com",
                    "orders": n % 17,
                }
            )
            for n in range(entities)
        ]
        emulator.put_items(stack.setup_dynamodb, entity_items)
        outbox = emulator.outbox_batch(pending)
        stack.load(outbox)
        time.sleep(0.01)  # the items' ULIDs are now older than the boundary's millisecond

        scan_meter = _ReadMeter(stack.setup_dynamodb)
        # A Scan reads every item (the filter applies after), in pages of at most
        # 1 MB, each rounded up to 4 KB; eventually consistent, the default.
        table_items = [*entity_items, *outbox.items]
        scan_units = sum(
            _read_units(page, consistent=False) for page in _pages(map(item_size, table_items))
        )
        found = 0
        for page in stack.setup_dynamodb.get_paginator("scan").paginate(
            TableName=TABLE_NAME,
            FilterExpression="begins_with(SK, :outbox) AND outbox_status = :pending",
            ExpressionAttributeValues={":outbox": {"S": "OUTBOX#"}, ":pending": {"S": "PENDING"}},
        ):
            found += int(page["Count"])

        sweep_meter = _ReadMeter(stack.dynamodb)
        result = sweep(
            PublishDependencies(
                sink=stack.sink,
                table_name=TABLE_NAME,
                dynamodb_client=stack.dynamodb,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
            min_age_seconds=0,
            shards=DEFAULT_PENDING_SHARDS,
        )
        if result.swept != pending or found != pending:
            raise RuntimeError(f"sweeper bench: swept {result.swept}, scan found {found}")
    ours_read = sum(sweep_meter.evaluated.values())
    scan_read = sum(scan_meter.evaluated.values())
    ours_units = sum(sweep_meter.read_units.values())
    return {
        "entity_items": entities,
        "pending_items": pending,
        "ours": {
            "items_read": ours_read,
            "per_pending_item": ours_read / pending,
            "by_operation": sweep_meter.evaluated,
            "calls": sweep_meter.calls,
            "read_units": ours_units,
            "read_units_by_operation": sweep_meter.read_units,
            "consistent_by_operation": sweep_meter.consistent,
        },
        "baseline_scan": {
            "items_read": scan_read,
            "per_pending_item": scan_read / pending,
            "by_operation": scan_meter.evaluated,
            "calls": scan_meter.calls,
            "read_units": scan_units,
            "table_bytes": sum(item_size(item) for item in table_items),
        },
    }


def _pages(sizes: Iterable[int], page_bytes: int = 1024 * KB) -> list[int]:
    """Item sizes cut into Scan pages of at most 1 MB, as the bytes of each page."""
    pages = [0]
    for size in sizes:
        if pages[-1] and pages[-1] + size > page_bytes:
            pages.append(0)
        pages[-1] += size
    return pages


# ------------------------------------------------------------------- cold start

# Times ``import boto3`` (bare, in the fresh interpreter), then the module on top of it:
# their sum is the module's own import time in a fresh interpreter (it imports boto3
# itself), and the second figure is what it adds to a bare ``import boto3``, measured
# in the same interpreter so that the noise of a busy machine does not add up twice.
_IMPORT_PROBE = (
    "import importlib, sys, time\n"
    "start = time.perf_counter()\n"
    "import boto3\n"
    "middle = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "end = time.perf_counter()\n"
    "print(middle - start, end - middle)\n"
)


def _import_once(python: str, module: str, extracted: str) -> tuple[float, float]:
    # -B, like Lambda's read-only task directory: nothing compiled is written back.
    # The package's modules load from the .pyc the zip ships for this Python (or
    # are compiled, at every start, on a Python it has none for); boto3 and
    # Powertools keep their cached bytecode, as the runtime and the layer ship it.
    env = {**os.environ, **emulator.FAKE_ENV, "PYTHONPATH": extracted}
    done = subprocess.run(
        [python, "-B", "-c", _IMPORT_PROBE, module],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
    )
    boto3_seconds, module_seconds = done.stdout.strip().splitlines()[-1].split()
    return float(boto3_seconds), float(module_seconds)


def python_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def cold_start(pythons: Sequence[str], runs: int = 3) -> dict[str, Any]:
    """Import time of each handler module above a bare ``import boto3``, per Python.

    Each sample is a fresh interpreter importing the package from the extracted
    deployment zip (``package/dynamodb_outbox.zip``), with boto3 and Powertools
    from that interpreter's environment. The runs go round-robin over the
    interpreters and modules so that a busy machine slows all of them alike;
    the first round is a warm-up.
    """
    versions = {python: python_version(python) for python in pythons}
    with tempfile.TemporaryDirectory() as extracted:
        with zipfile.ZipFile(ZIP_PATH) as archive:
            archive.extractall(extracted)
        configs = [(python, module) for python in pythons for module in HANDLER_MODULES]
        boto3_samples: dict[str, list[float]] = {python: [] for python in pythons}
        samples: dict[tuple[str, str], list[float]] = {config: [] for config in configs}
        for round_ in range(runs + 1):
            for python, module in configs:
                boto3_seconds, module_seconds = _import_once(python, module, extracted)
                if round_:
                    boto3_samples[python].append(boto3_seconds)
                    samples[(python, module)].append(module_seconds)
    by_python = {
        versions[python]: {
            "executable": python,
            "boto3_import_seconds": statistics.median(boto3_samples[python]),
            "modules": {
                module: {
                    "added_ms": statistics.median(samples[(python, module)]) * 1000,
                    "added_ms_min": min(samples[(python, module)]) * 1000,
                }
                for module in HANDLER_MODULES
            },
        }
        for python in pythons
    }
    return {
        "runs": runs,
        "pythons": by_python,
        "goal_added_ms": COLD_START_GOAL_MS,
        "goal_modules": list(GOAL_MODULES),
    }


# ---------------------------------------------------------------------- zip size


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("build_package", BUILD_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def zip_size() -> dict[str, Any]:
    """The committed zip, and the same zip without its bytecode (built here)."""
    size = ZIP_PATH.stat().st_size
    builder = _builder()
    with zipfile.ZipFile(ZIP_PATH) as archive:
        bytecode = sorted(
            {
                name.rsplit(".", 2)[-2]
                for name in archive.namelist()
                if name.endswith(".pyc") and "/__pycache__/" in name
            }
        )
    with tempfile.TemporaryDirectory() as scratch:
        baseline_zip = Path(scratch) / "baseline.zip"
        with zipfile.ZipFile(baseline_zip, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(Path(__file__).with_name("seed_publisher.py"), "seed_publisher.py")
        baseline_size = baseline_zip.stat().st_size
    return {
        "path": str(ZIP_PATH.relative_to(ROOT)),
        "bytes": size,
        "layer_path": str(LAYER_ZIP_PATH.relative_to(ROOT)),
        "layer_bytes": LAYER_ZIP_PATH.stat().st_size,
        "baseline_bytes": baseline_size,
        "goal_bytes": ZIP_GOAL_BYTES,
        "source_only_bytes": len(builder.build(with_bytecode=False)),
        "source_aim_bytes": SOURCE_ZIP_AIM_BYTES,
        "bytecode_for": bytecode,
    }


# ------------------------------------------------------------------- write cost


def _wcu(size: int) -> int:
    return max(1, math.ceil(size / KB))


def write_cost() -> dict[str, Any]:
    """WCU per order as AWS bills it, from the item sizes (writer._attribute_values.item_size)."""
    entity = serialize_item(
        {
            "PK": "ORDER#1001",
            "SK": "META",
            "status": "PLACED",
            "customer_id": "CUSTOMER#42",
            "total": 42.5,
            "currency": "EUR",
            "lines": [{"sku": "SKU-1", "qty": 1}, {"sku": "SKU-2", "qty": 2}],
        }
    )
    outbox = outbox_item("ORDER#1001", emulator.make_envelope(1001))
    entity_bytes, outbox_bytes = item_size(entity), item_size(outbox)
    # KEYS_ONLY index entry: table keys + index key (the write unit is the entry's size).
    gsi_bytes = item_size({name: outbox[name] for name in ("PK", "SK", "outbox_pending_shard")})
    lines = [
        (
            "entity put, transactional (x2)",
            2 * _wcu(entity_bytes),
            f"2 x ceil({entity_bytes} B / 1 KB)",
        ),
        (
            "outbox put, transactional (x2)",
            2 * _wcu(outbox_bytes),
            f"2 x ceil({outbox_bytes} B / 1 KB)",
        ),
        ("pending index put (KEYS_ONLY)", _wcu(gsi_bytes), f"ceil({gsi_bytes} B / 1 KB)"),
        ("delete of the outbox item", _wcu(outbox_bytes), f"ceil({outbox_bytes} B / 1 KB)"),
        ("pending index delete", _wcu(gsi_bytes), f"ceil({gsi_bytes} B / 1 KB)"),
        ("quarantine (normal path)", 0, "none"),
    ]
    ours = sum(wcu for _, wcu, _ in lines)
    plain = _wcu(entity_bytes)
    return {
        "entity_bytes": entity_bytes,
        "outbox_item_bytes": outbox_bytes,
        "pending_index_entry_bytes": gsi_bytes,
        "lines": [{"what": what, "wcu": wcu, "arithmetic": how} for what, wcu, how in lines],
        "ours_wcu": ours,
        "plain_put_wcu": plain,
        "plain_put_arithmetic": f"ceil({entity_bytes} B / 1 KB)",
        "ratio": ours / plain,
    }


# --------------------------------------------------------------------- latency


def latency(latency_seconds: float = 0.02, batch_size: int = 100) -> dict[str, Any]:
    """Wall time per 1,000 events with a fixed delay added to every call.

    Ours with the delete overlap off vs as shipped (overlap on), on 1,000 events (batches of
    ``batch_size``); the baseline (2 calls per event) on ``batch_size`` events,
    scaled to 1,000, to keep the run short.
    """
    batches_per_run = 1000 // batch_size
    out: dict[str, Any] = {"latency_ms": latency_seconds * 1000, "batch_size": batch_size}
    with emulator.emulator():
        stack = _Stack()
        stack.latency.seconds = latency_seconds
        for name, publish in (
            ("ours_sequential", stack.sequential),
            ("ours_overlapped", stack.ours),
        ):
            batches = [emulator.outbox_batch(batch_size) for _ in range(batches_per_run)]
            for batch in batches:
                stack.load(batch)
            stack.counter.reset()
            stack.latency.on = True
            start = time.perf_counter()
            done = sum(publish(batch.records) for batch in batches)
            wall = time.perf_counter() - start
            stack.latency.on = False
            if done != 1000 or stack.remaining():
                raise RuntimeError(f"latency bench {name}: published {done}, items left")
            out[name] = {"seconds_per_1000": wall, "calls": stack.counter.total}
        batch = emulator.outbox_batch(batch_size)
        stack.load(batch)
        stack.counter.reset()
        stack.latency.on = True
        start = time.perf_counter()
        done = stack.baseline(batch.records)
        wall = time.perf_counter() - start
        stack.latency.on = False
        out["baseline"] = {
            "seconds_per_1000": wall * 1000 / done,
            "calls": stack.counter.total * 1000 // done,
            "measured_events": done,
        }
    # The latency alone, calls on the critical path x latency: every call when sequential;
    # with the overlap, the PutEvents calls plus the last delete chunk of each batch.
    puts = batches_per_run * math.ceil(batch_size / 10)
    out["ours_sequential"]["latency_floor_seconds"] = (
        out["ours_sequential"]["calls"] * latency_seconds
    )
    out["ours_overlapped"]["latency_floor_seconds"] = (puts + batches_per_run) * latency_seconds
    seq, over = (
        out["ours_sequential"]["seconds_per_1000"],
        out["ours_overlapped"]["seconds_per_1000"],
    )
    out["overlap_saving"] = 1 - over / seq
    out["overlap_helped"] = over < seq * 0.95
    return out
