"""A secret file that others may read or change, or that is not a regular file, is refused
with its mode and the fix, by the loader itself, by ``load_config`` (every error at once),
by ``check-config`` (exit 1) and by ``run`` (exit 78, before the state directory exists).
Group read is allowed only for the process's own group (the install guide's
``root:baccarat-edge`` mode 0640)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.yamlfile import format_key_path
from daemon.mqtt.secrets import SecretError, SecretSource, SigningKeySource
from daemon.service.config import load_config
from daemon.service.configfile import ConfigError
from tests.support.secrets import write_secret

KEY = "k" * 32 + "\n"


@pytest.mark.parametrize(
    ("mode", "who"),
    [
        (0o644, "every user"),
        (0o604, "every user"),
        (0o602, "every user"),
        (0o660, "its group"),
        (0o620, "its group"),
        (0o666, "its group and every user"),
    ],
)
def test_a_secret_open_to_others_is_refused_with_its_mode_and_the_fix(
    tmp_path: Path, mode: int, who: str
) -> None:
    path = write_secret(tmp_path / "events.key", KEY)
    path.chmod(mode)
    with pytest.raises(SecretError) as info:
        SigningKeySource(file=path).load()
    message = str(info.value)
    assert message.startswith(f"secret file {path} has mode {mode:04o}, open to {who}: ")
    assert f"run `chmod 600 {path}`" in message
    assert KEY.strip() not in message


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o440])
def test_owner_only_and_own_group_read_are_accepted(tmp_path: Path, mode: int) -> None:
    path = write_secret(tmp_path / "password", "a password\n")
    path.chmod(mode)
    assert os.stat(path).st_gid == os.getegid()  # a new file takes the creator's group
    assert SecretSource(file=path).load().reveal() == b"a password"


def test_group_read_for_a_group_that_is_not_the_services_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_secret(tmp_path / "password", "a password\n")
    path.chmod(0o640)
    # the daemon runs with another group than the file's: that group's members could read it
    monkeypatch.setattr(os, "getegid", lambda: os.stat(path).st_gid + 1)
    with pytest.raises(SecretError, match=r"has mode 0640, open to its group: run `chmod 600 "):
        SecretSource(file=path).load()


def test_a_secret_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "password"
    os.mkfifo(fifo, 0o600)  # reading it would block the daemon's start forever
    with pytest.raises(SecretError, match=f"secret file {fifo} is not a regular file"):
        SecretSource(file=fifo).load()
    with pytest.raises(SecretError, match=f"secret file {tmp_path} is not a regular file"):
        SecretSource(file=tmp_path).load()


def _config(tmp_path: Path) -> Path:
    password = write_secret(tmp_path / "password", "a password\n")
    events = write_secret(tmp_path / "events.key", KEY)
    command = write_secret(tmp_path / "command.key", KEY)
    password.chmod(0o644)
    command.chmod(0o664)
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        "broker:\n  host: 127.0.0.1\n  tls: {enabled: false}\n"
        f"  auth: {{username: t7, password: {{file: {password}}}}}\n"
        f"  signing:\n    events_key: {{file: {events}}}\n    command_key: {{file: {command}}}\n"
    )
    return path


def test_load_config_names_every_open_secret_with_line_and_key(tmp_path: Path) -> None:
    path = _config(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    found = {format_key_path(p.path): p for p in info.value.problems}
    assert sorted(found) == ["broker.auth.password", "broker.signing.command_key"]
    assert found["broker.auth.password"].line == 9
    assert "has mode 0644, open to every user" in found["broker.auth.password"].message
    assert "has mode 0664, open to its group and every user" in found["broker.signing.command_key"].message


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_check_config_reports_open_secrets_and_run_refuses_them(tmp_path: Path) -> None:
    path = _config(tmp_path)
    checked = _cli("check-config", str(path), "--json")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    problems = json.loads(checked.stdout)["problems"]
    assert len(problems) == 2
    assert all("chmod 600" in p for p in problems)
    ran = _cli("run", "--config", str(path))
    assert ran.returncode == 78, ran.stderr
    assert f"broker.auth.password: secret file {tmp_path / 'password'} has mode 0644" in ran.stderr
    assert not (tmp_path / "state").exists()


def test_an_open_secret_is_reported_beside_an_invalid_key_of_the_broker_section(tmp_path: Path) -> None:
    path = _config(tmp_path)
    path.write_text(path.read_text() + "  keepalive_s: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert sorted(format_key_path(p.path) for p in info.value.problems) == [
        "broker.auth.password",
        "broker.keepalive_s",
        "broker.signing.command_key",
    ]
