"""scripts/tf_cli_config.py: finds the provider mirror by its layout and writes a CLI config.

These tests need neither terraform nor the real mirror: they build fake mirror
layouts in temporary directories.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.terraform.tfhelpers import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "tf_cli_config.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tf_cli_config", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tf_cli_config = _load_script()


def _fake_mirror(root: Path) -> Path:
    (root / "registry.terraform.io" / "hashicorp" / "aws" / "5.100.0" / "linux_amd64").mkdir(
        parents=True
    )
    return root


def test_mirror_named_by_tf_plugin_mirror_is_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = _fake_mirror(tmp_path / "mirror")
    monkeypatch.setenv("TF_PLUGIN_MIRROR", str(mirror))
    output = tmp_path / "out" / "terraformrc"

    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(output)], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(output)
    config = output.read_text()
    assert f'path    = "{mirror}"' in config
    assert 'include = ["registry.terraform.io/hashicorp/*"]' in config
    assert 'exclude = ["registry.terraform.io/hashicorp/*"]' in config


def test_directory_without_a_provider_version_is_not_a_mirror(tmp_path: Path) -> None:
    (tmp_path / "registry.terraform.io" / "hashicorp" / "aws").mkdir(parents=True)

    assert not tf_cli_config.is_mirror(tmp_path)
    assert tf_cli_config.is_mirror(_fake_mirror(tmp_path / "real"))


def test_walk_finds_a_mirror_a_few_levels_down(tmp_path: Path) -> None:
    mirror = _fake_mirror(tmp_path / "vendor" / "terraform" / "plugins")

    found = [d for d in tf_cli_config._walk(tmp_path, 4) if tf_cli_config.is_mirror(d)]

    assert found == [mirror]


def test_no_mirror_exits_3_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tf_cli_config, "candidate_dirs", lambda: iter([tmp_path]))
    output = tmp_path / "terraformrc"

    exit_code = tf_cli_config.main([str(output)])

    assert exit_code == 3
    assert "no Terraform provider mirror found" in capsys.readouterr().err
    assert not output.exists()
