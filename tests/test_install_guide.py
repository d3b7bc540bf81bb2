"""The install guide and the example config name the same files, and the guide's commands are
the ones that work for the technician: secrets installed with the mode and group the daemon
accepts whoever reads them, ``check-config`` and ``monitor`` run as the daemon's user (the
config directory is readable only by root and the daemon's group). The package test runs the
same lines in a fresh Debian 12 root (tests/packaging/test_deb.py)."""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from typing import Any

import yaml

from tests.packaging.guide import REPO, install_steps, installed_files

EXAMPLE = REPO / "config" / "table.example.yaml"
SECRETS = PurePosixPath("/etc/baccarat-edge/secrets")


def _files_named(config: dict[str, Any]) -> set[PurePosixPath]:
    """Every file the example config's broker section names (TLS files and secrets), and the
    build key's public half (attestation)."""
    broker = config["broker"]
    named = [broker["tls"][key] for key in ("ca_file", "cert_file", "key_file")]
    named.append(broker["auth"]["password"]["file"])
    named.append(broker["signing"]["events_key"]["file"])
    named += [key["secret"]["file"] for key in broker["signing"]["command_keys"]]
    named.append(config["attestation"]["public_key_file"])
    return {PurePosixPath(path) for path in named}


def test_the_guide_installs_every_file_the_example_config_names_and_no_other() -> None:
    steps = install_steps()
    assert [s.number for s in steps] == [1, 2, 3, 4, 5]
    [config_step] = [s for s in steps if s.title == "Write the table's config and secrets"]
    installed = [f for block in config_step.blocks for f in installed_files(block)]
    named = _files_named(yaml.safe_load(EXAMPLE.read_text()))
    assert {f.path for f in installed} == named
    for item in installed:
        if item.path.parent == SECRETS:
            assert (item.mode, item.group) == ("0640", "baccarat-edge"), item
        else:
            assert item.mode == "0644", item  # certificates: no secret, readable by all


def test_the_guide_installs_no_file_the_daemon_never_reads() -> None:
    guide = (REPO / "systemd" / "README.md").read_text()
    assert "command.key" not in guide  # the legacy single key: the example uses the keyring


def test_tools_that_read_the_config_run_as_the_daemons_user() -> None:
    """/etc/baccarat-edge is 0750 root:baccarat-edge: a technician's own account cannot read
    the config, so every command reading it runs with ``sudo -u baccarat-edge``."""
    readme = (REPO / "README.md").read_text()
    lines = [line for step in install_steps() for block in step.blocks for line in block]
    start = readme.index("### On a real table, with a real broker")
    quick = readme[start : readme.index("```\n", readme.index("```sh", start) + 5)]
    lines += quick.splitlines()
    readers = [line for line in lines if "--config /etc/baccarat-edge" in line or "check-config /etc" in line]
    assert len(readers) >= 4, readers
    for line in readers:
        assert shlex.split(line, comments=True)[:3] == ["sudo", "-u", "baccarat-edge"], line
