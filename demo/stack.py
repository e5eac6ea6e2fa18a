"""Terraform for the demo: a throwaway copy of the example, applied with the provider mirror.

A demo must never leave state, lock files or ``.terraform`` in the repository.
The example's module source is ``../..``, so the throwaway copy reproduces
that layout: ``<work>/stack/`` holds a symlink to every top-level entry of the
repository (the module's ``*.tf``, ``package/``...) except ``examples/``, and
``<work>/stack/examples/<name>/`` holds a copy of the example's files. Terraform
runs in that copy; its state, lock file and ``.terraform`` stay in ``<work>``.

No registry is reachable: ``scripts/tf_cli_config.py`` writes a CLI config
that installs ``hashicorp/*`` from the machine's provider mirror, used through
``TF_CLI_CONFIG_FILE``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TF_CLI_CONFIG_SCRIPT = REPO_ROOT / "scripts" / "tf_cli_config.py"
EXIT_NO_MIRROR = 3  # scripts/tf_cli_config.py
TERRAFORM_TIMEOUT_SECONDS = 900
_APPLIED = re.compile(r"Apply complete! Resources: (\d+) added")
_DESTROYED = re.compile(r"Destroy complete! Resources: (\d+) destroyed")


class ToolingMissing(RuntimeError):
    """Terraform or the provider mirror is not on this machine."""


class TerraformFailed(RuntimeError):
    """A terraform command failed; the message ends with the tail of its output."""


@dataclass
class Stack:
    """The example's throwaway copy and how to run terraform in it."""

    example_dir: Path
    log_path: Path
    env: dict[str, str]
    terraform: str

    @classmethod
    def prepare(cls, work_dir: Path, example: str = "local") -> Stack:
        terraform = shutil.which("terraform")
        if terraform is None:
            raise ToolingMissing("no `terraform` binary on PATH")
        cli_config = _write_cli_config(work_dir / "terraformrc")
        root = work_dir / "stack"
        root.mkdir()
        for entry in sorted(REPO_ROOT.iterdir()):
            if entry.name.startswith(".") or entry.name == "examples":
                continue
            (root / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        source = REPO_ROOT / "examples" / example
        example_dir = root / "examples" / example
        example_dir.mkdir(parents=True)
        for file in sorted(source.iterdir()):
            if file.is_file() and not file.name.startswith(".") and file.suffix != ".json":
                shutil.copy2(file, example_dir / file.name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
        env.update(
            {
                "TF_CLI_CONFIG_FILE": str(cli_config),
                "TF_IN_AUTOMATION": "1",
                "TF_INPUT": "0",
                "CHECKPOINT_DISABLE": "1",
            }
        )
        return cls(
            example_dir=example_dir,
            log_path=work_dir / "terraform.log",
            env=env,
            terraform=terraform,
        )

    # ------------------------------------------------------------------ commands

    def init(self) -> str:
        """``terraform init`` from the mirror; returns the provider line (name and version)."""
        output = self._run(["init", "-input=false", "-no-color"])
        installed = re.findall(r"- Installed (hashicorp/aws v[\w.\-]+)", output)
        return installed[0] if installed else "hashicorp/aws"

    def apply(
        self, variables: Mapping[str, str], on_line: Callable[[str], None] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Apply; returns the number of resources added and the outputs' values."""
        output = self._run(
            ["apply", "-auto-approve", "-input=false", "-no-color", *_var_flags(variables)],
            on_line=on_line,
        )
        added = _APPLIED.search(output)
        raw = json.loads(self._run(["output", "-json", "-no-color"], log=False))
        outputs = {name: value["value"] for name, value in raw.items()}
        return (int(added.group(1)) if added else 0), outputs

    def destroy(self, variables: Mapping[str, str]) -> int:
        """Destroy what apply created; returns the number of resources destroyed.

        ``-refresh=false``: the state was written by this run's apply a minute
        ago and nothing else touched the emulator; re-reading every resource
        would only cost time.
        """
        output = self._run(
            [
                "destroy",
                "-auto-approve",
                "-input=false",
                "-no-color",
                "-refresh=false",
                *_var_flags(variables),
            ]
        )
        destroyed = _DESTROYED.search(output)
        return int(destroyed.group(1)) if destroyed else 0

    def _run(
        self,
        args: Sequence[str],
        *,
        on_line: Callable[[str], None] | None = None,
        log: bool = True,
    ) -> str:
        command = [self.terraform, *args]
        lines: list[str] = []
        with self.log_path.open("a", encoding="utf-8") as log_file:
            if log:
                log_file.write(f"$ terraform {' '.join(args)}\n")
            process = subprocess.Popen(
                command,
                cwd=self.example_dir,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert process.stdout is not None
            started = time.monotonic()
            for line in process.stdout:
                lines.append(line)
                if log:
                    log_file.write(f"{time.monotonic() - started:7.1f}  {line}")
                if on_line is not None:
                    on_line(line.rstrip("\n"))
            code = process.wait(timeout=TERRAFORM_TIMEOUT_SECONDS)
        output = "".join(lines)
        if code != 0:
            tail = "".join(lines[-40:])
            raise TerraformFailed(
                f"terraform {args[0]} exited with {code} (full log: {self.log_path}):\n{tail}"
            )
        return output


def _var_flags(variables: Mapping[str, str]) -> list[str]:
    return [f"-var={name}={value}" for name, value in variables.items()]


def _write_cli_config(target: Path) -> Path:
    result = subprocess.run(
        [sys.executable, str(TF_CLI_CONFIG_SCRIPT), str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == EXIT_NO_MIRROR:
        raise ToolingMissing(result.stderr.strip())
    if result.returncode != 0:
        raise RuntimeError(f"scripts/tf_cli_config.py failed:\n{result.stderr}")
    return Path(result.stdout.strip())
