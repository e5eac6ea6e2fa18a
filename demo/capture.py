"""What the functions print goes to a log file, and their EMF metrics are added up.

On Lambda, a function's stdout is its CloudWatch log, and Powertools writes
metrics there too, as embedded metric format (EMF) lines. In the demo the
handlers run in this process, so their output would bury the progress lines.
:class:`FunctionOutput` replaces ``sys.stdout`` with a router: what is written
while a function runs (:meth:`FunctionOutput.invocation`) goes to the log file;
everything else goes to the terminal. The EMF lines are also read back and
summed per function, the way CloudWatch would, so the report can quote what
the functions themselves counted (``PublishedEvents``, ``DuplicateEvents``...).

Powertools' Logger keeps the stream it was created with, so the router must be
installed before the handler modules are imported (or :meth:`adopt_loggers`
re-points the loggers created before).
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

_current_function: ContextVar[str | None] = ContextVar("demo_function_output", default=None)


class _Router(io.TextIOBase):
    """A text stream that writes to the log while a function runs, else to the terminal."""

    def __init__(self, owner: FunctionOutput) -> None:
        super().__init__()
        self._owner = owner

    def write(self, text: str) -> int:
        function = _current_function.get()
        if function is None:
            return self._owner.terminal.write(text)
        self._owner.record(function, text)
        return len(text)

    def flush(self) -> None:
        self._owner.terminal.flush()
        self._owner.log.flush()

    def isatty(self) -> bool:
        return self._owner.terminal.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._owner.terminal, "encoding", None) or "utf-8"


class FunctionOutput:
    """Routes the functions' stdout to ``log_path`` and sums their EMF metrics."""

    def __init__(self, log_path: Path, terminal: TextIO) -> None:
        self.log_path = log_path
        self.terminal = terminal
        self.log: TextIO = log_path.open("w", encoding="utf-8")
        self.metrics: dict[str, dict[str, float]] = {}
        self.lines: Counter[str] = Counter()
        self._partial: dict[str, str] = {}
        self._router = _Router(self)
        self._saved_stdout: TextIO | None = None

    # -------------------------------------------------------------- lifecycle

    def install(self) -> None:
        """Make ``sys.stdout`` the router."""
        self._saved_stdout = sys.stdout
        sys.stdout = self._router
        self.adopt_loggers()

    def adopt_loggers(self) -> None:
        """Re-point logging handlers that write to the terminal at the router."""
        loggers = [logging.getLogger()] + [
            logger
            for logger in logging.Logger.manager.loggerDict.values()
            if isinstance(logger, logging.Logger)
        ]
        for logger in loggers:
            for handler in logger.handlers:
                if (
                    isinstance(handler, logging.StreamHandler)
                    and handler.stream in (self.terminal, sys.__stdout__)
                    and handler.stream is not self._router
                ):
                    handler.setStream(self._router)

    def close(self) -> None:
        """Restore ``sys.stdout`` and close the log."""
        if self._saved_stdout is not None:
            sys.stdout = self._saved_stdout
            self._saved_stdout = None
        for function, rest in self._partial.items():
            if rest:
                self._line(function, rest)
        self._partial.clear()
        self.log.close()

    @contextmanager
    def invocation(self, function_name: str) -> Iterator[None]:
        """Within the block, stdout belongs to ``function_name``."""
        token = _current_function.set(function_name)
        try:
            yield
        finally:
            _current_function.reset(token)

    # -------------------------------------------------------------- recording

    def note(self, function: str, text: str) -> None:
        """A line about ``function`` that the runtime, not the function, writes."""
        self._line(function, text)

    def record(self, function: str, text: str) -> None:
        buffered = self._partial.get(function, "") + text
        *complete, rest = buffered.split("\n")
        self._partial[function] = rest
        for line in complete:
            self._line(function, line)

    def _line(self, function: str, line: str) -> None:
        self.log.write(f"{function}\t{line}\n")
        self.lines[function] += 1
        if '"_aws"' in line:
            self._read_emf(function, line)

    def _read_emf(self, function: str, line: str) -> None:
        try:
            document: Any = json.loads(line)
            definitions = document["_aws"]["CloudWatchMetrics"]
        except (ValueError, KeyError, TypeError):
            return
        sums = self.metrics.setdefault(function, {})
        for definition in definitions:
            for metric in definition.get("Metrics", []):
                name = metric.get("Name")
                value = document.get(name)
                values = value if isinstance(value, list) else [value]
                total = sum(v for v in values if isinstance(v, int | float))
                sums[name] = sums.get(name, 0.0) + total

    def metric(self, function: str, name: str) -> int:
        """The sum of metric ``name`` over every EMF line ``function`` printed."""
        return int(self.metrics.get(function, {}).get(name, 0.0))
