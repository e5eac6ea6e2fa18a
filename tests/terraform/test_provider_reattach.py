"""The shared provider process (provider_reattach.py): used when it starts, said when not."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.terraform.provider_reattach import (
    ProviderNotShared,
    installed_aws_provider,
    mirrored_aws_provider,
    shared_aws_provider,
)

pytestmark = pytest.mark.terraform

#: The hashicorp/aws release the provider mirror holds and the suite is timed on.
PINNED_PROVIDER = "5.100.0"


def _fake_provider(data_dir: Path, script: str) -> Path:
    folder = data_dir / "providers/registry.terraform.io/hashicorp/aws/9.9.9/linux_amd64"
    folder.mkdir(parents=True)
    binary = folder / "terraform-provider-aws_v9.9.9_x5"
    binary.write_text(f"#!/bin/sh\n{script}\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def test_a_provider_without_debug_mode_is_not_shared_and_the_run_says_so(tmp_path: Path) -> None:
    _fake_provider(tmp_path / ".terraform", "echo 'flag provided but not defined: -debug'; exit 2")

    with (
        pytest.warns(ProviderNotShared, match="flag provided but not defined: -debug"),
        shared_aws_provider(
            tmp_path / ".terraform", tmp_path / "provider.log", cwd=tmp_path, env=os.environ
        ) as reattach,
    ):
        assert reattach == {}


def test_no_installed_provider_is_not_shared_and_the_run_says_so(tmp_path: Path) -> None:
    with (
        pytest.warns(ProviderNotShared, match="run terraform init"),
        shared_aws_provider(
            tmp_path / ".terraform", tmp_path / "provider.log", cwd=tmp_path, env=os.environ
        ) as reattach,
    ):
        assert reattach == {}


def test_the_provider_gets_the_commands_environment_but_the_ca_bundle(tmp_path: Path) -> None:
    """Started where the stack's commands run, with their environment (see the module)."""
    seen = tmp_path / "seen"
    _fake_provider(
        tmp_path / ".terraform",
        f"pwd > {seen}; env >> {seen}; "
        'echo "TF_REATTACH_PROVIDERS=\'{\\"fake\\": {}}\'"; sleep 30',
    )
    env = {"PATH": os.environ["PATH"], "AWS_CA_BUNDLE": "/ca.pem", "AWS_REGION": "eu-west-1"}
    work = tmp_path / "stack"
    work.mkdir()

    with shared_aws_provider(
        tmp_path / ".terraform", tmp_path / "provider.log", cwd=work, env=env
    ) as reattach:
        assert reattach == {"TF_REATTACH_PROVIDERS": '{"fake": {}}'}

    lines = seen.read_text().splitlines()
    assert lines[0] == str(work)
    assert "AWS_REGION=eu-west-1" in lines
    assert "TF_LOG_PROVIDER=OFF" in lines
    assert not [line for line in lines if line.startswith("AWS_CA_BUNDLE=")]


def test_the_pinned_provider_is_shared(terraform_test_env: dict[str, str]) -> None:
    """On the release the suite is budgeted for, sharing must not fall back unnoticed."""
    data_dir = Path(terraform_test_env["TF_DATA_DIR"])
    version = installed_aws_provider(data_dir).parent.parent.name
    if version != PINNED_PROVIDER:
        pytest.skip(
            f"hashicorp/aws {version} installed, the suite is timed on {PINNED_PROVIDER}: "
            "whether it can be shared is left to the ProviderNotShared warning"
        )

    assert terraform_test_env.get("TF_REATTACH_PROVIDERS"), (
        f"hashicorp/aws {PINNED_PROVIDER} was not started for reattaching (see the warnings)"
    )


def _mirror_config(tmp_path: Path, versions: tuple[str, ...]) -> Path:
    mirror = tmp_path / "mirror"
    for version in versions:
        folder = mirror / f"registry.terraform.io/hashicorp/aws/{version}/linux_amd64"
        folder.mkdir(parents=True)
        (folder / f"terraform-provider-aws_v{version}_x5").write_text("")
    config = tmp_path / "terraformrc"
    config.write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path    = "{mirror}"\n  }}\n}}\n'
    )
    return config


def test_a_stack_initialised_with_its_provider_started_gets_the_mirrors_one(
    tmp_path: Path,
) -> None:
    config = _mirror_config(tmp_path, ("5.100.0",))

    found = mirrored_aws_provider(config)

    assert found.name == "terraform-provider-aws_v5.100.0_x5"
    assert found.parent.parent.name == "5.100.0"


@pytest.mark.parametrize("versions", [(), ("5.99.0", "5.100.0")])
def test_a_mirror_without_exactly_one_release_is_not_guessed_from(
    versions: tuple[str, ...], tmp_path: Path
) -> None:
    config = _mirror_config(tmp_path, versions)

    with pytest.raises(FileNotFoundError, match="not exactly one"):
        mirrored_aws_provider(config)
