"""Run the stages of ``make test`` in order and print how long each took.

Usage: ``timed_stages.py NAME=COMMAND [NAME=COMMAND ...]``. Each command runs
in a shell with its output passed through; the first one that fails stops the
run. The table of stage times is printed at the end either way, and the exit
code is the failing stage's (0 when all passed).
"""

from __future__ import annotations

import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    stages: list[tuple[str, str]] = []
    for argument in argv:
        name, separator, command = argument.partition("=")
        if not separator or not name or not command:
            print(f"timed_stages: expected NAME=COMMAND, got {argument!r}", file=sys.stderr)
            return 2
        stages.append((name, command))

    timings: list[tuple[str, float, int]] = []
    started = time.monotonic()
    code = 0
    for name, command in stages:
        print(f"==> {name}: {command}", flush=True)
        begin = time.monotonic()
        code = subprocess.run(command, shell=True, check=False).returncode
        timings.append((name, time.monotonic() - begin, code))
        if code != 0:
            break

    width = max(len(name) for name, _, _ in timings)
    print("\nstage times")
    for name, seconds, stage_code in timings:
        status = "ok" if stage_code == 0 else f"FAILED (exit {stage_code})"
        print(f"  {name:<{width}}  {seconds:7.1f} s  {status}")
    skipped = [name for name, _ in stages[len(timings) :]]
    if skipped:
        print(f"  not run: {', '.join(skipped)}")
    print(f"  {'total':<{width}}  {time.monotonic() - started:7.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
