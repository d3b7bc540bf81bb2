"""A secret file that others may read or change, or that is not a regular file, is refused
with its mode and a fix that keeps the daemon able to read it, by the loader itself, by
``load_config`` (every error at once), by ``check-config`` (exit 2: the file is valid, a file
it points at is not) and by ``run`` (exit 78, before the state directory exists).

The rule does not depend on who reads: the install guide's ``root:<service group>`` mode 0640
is accepted when root reads it (``check-config``, ``monitor``, ``fleet`` run with sudo) and
when the daemon's user reads it through its group. The service group here is ``nogroup``
(``secrets.SERVICE_GROUP``; the package's ``baccarat-edge`` group does not exist on a
development machine) and the daemon's user ``nobody``: the tests run as root and start the
non-root reader with ``setpriv``."""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.yamlfile import format_key_path
from daemon.mqtt import secrets
from daemon.mqtt.secrets import SecretError, SecretSource, SigningKeySource
from daemon.service.config import load_config
from daemon.service.configfile import ConfigError
from tests.support.secrets import write_secret

KEY = "k" * 32 + "\n"
REPO = Path(__file__).resolve().parents[2]
SERVICE_USER = "nobody"
SERVICE_GROUP = "nogroup"


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
    # the file's group is this process's own (no service group on this machine): keep it
    assert f"run `chmod 640 {path}`" in message
    assert KEY.strip() not in message


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o440])
def test_owner_only_and_own_group_read_are_accepted(tmp_path: Path, mode: int) -> None:
    path = write_secret(tmp_path / "password", "a password\n")
    path.chmod(mode)
    assert os.stat(path).st_gid == os.getegid()  # a new file takes the creator's group
    assert SecretSource(file=path).load().reveal() == b"a password"


@pytest.fixture
def service_group(monkeypatch: pytest.MonkeyPatch) -> int:
    """``nogroup`` stands for the package's ``baccarat-edge`` group; its gid."""
    monkeypatch.setattr(secrets, "SERVICE_GROUP", SERVICE_GROUP)
    return grp.getgrnam(SERVICE_GROUP).gr_gid


@pytest.fixture
def secrets_dir() -> Iterator[Path]:
    """``/etc/baccarat-edge/secrets`` in small: root:<service group> 0750, in a folder the
    service user can reach (pytest's own temporary folder is root's only)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"secret-files-{os.getpid()}"
    folder = base / "secrets"
    folder.mkdir(parents=True)
    try:
        base.chmod(0o755)
        os.chown(folder, 0, grp.getgrnam(SERVICE_GROUP).gr_gid)
        folder.chmod(0o750)
        yield folder
    finally:
        shutil.rmtree(base)


def _install(path: Path, *, mode: int, owner: str = "root", group: str = SERVICE_GROUP) -> Path:
    """The guide's ``install -m MODE -g GROUP``: a secret with its owner, group and mode."""
    path.write_text(KEY)
    os.chown(path, pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid)
    path.chmod(mode)
    return path


def _load_as_service_user(path: Path) -> subprocess.CompletedProcess[str]:
    """Load the secret the way the daemon does, as the service user with its groups."""
    code = (
        "import sys\n"
        "from daemon.mqtt.secrets import SecretError, SigningKeySource\n"
        "try:\n"
        f"    print(SigningKeySource(file={str(path)!r}).load())\n"
        "except SecretError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(78)\n"
    )
    argv = [
        "setpriv",
        f"--reuid={SERVICE_USER}",
        f"--regid={SERVICE_GROUP}",
        "--init-groups",
        "--",
        sys.executable,
        "-c",
        code,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.mark.usefixtures("service_group")
@pytest.mark.parametrize(("mode", "owner"), [(0o640, "root"), (0o440, "root"), (0o640, SERVICE_USER)])
def test_the_guides_secret_is_accepted_by_root_and_by_the_service_user(
    secrets_dir: Path, mode: int, owner: str
) -> None:
    path = _install(secrets_dir / "events.key", mode=mode, owner=owner)
    assert os.getegid() != os.stat(path).st_gid  # root reads through no group of its own
    assert SigningKeySource(file=path).load().reveal() == KEY.strip().encode()
    as_daemon = _load_as_service_user(path)
    assert as_daemon.returncode == 0, as_daemon.stdout + as_daemon.stderr
    assert as_daemon.stdout.strip() == f"Secret(from file {path}, 32 bytes)"


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o600])
def test_the_printed_fix_makes_the_secret_readable_by_the_daemon(
    service_group: int, secrets_dir: Path, mode: int
) -> None:
    """A secret root wrote with the wrong group or mode: the fix root is told to run leaves a
    file the daemon (the service user) reads, and root still accepts."""
    path = _install(secrets_dir / "mqtt-password", mode=mode, group="root")
    if mode == 0o600:
        # owner only is safe, but the daemon cannot read root's file: it says so
        refused = _load_as_service_user(path)
        assert refused.returncode == 78
        assert "Permission denied" in refused.stdout
        return
    with pytest.raises(SecretError) as info:
        SecretSource(file=path).load()
    message = str(info.value)
    assert f"open to {'every user' if mode & 0o004 else 'its group'}: " in message
    fix = re.search(r"run `([^`]+)`", message)
    assert fix is not None, message
    assert fix.group(1) == f"chgrp {SERVICE_GROUP} {path} && chmod 640 {path}"
    subprocess.run(["sh", "-c", fix.group(1)], check=True)
    assert (os.stat(path).st_gid, os.stat(path).st_mode & 0o777) == (service_group, 0o640)
    assert SecretSource(file=path).load().reveal() == KEY.strip().encode()
    assert _load_as_service_user(path).returncode == 0


@pytest.mark.usefixtures("service_group")
def test_group_read_for_a_group_that_is_neither_the_services_nor_the_readers_is_refused(
    secrets_dir: Path,
) -> None:
    other = next(g for g in ("adm", "daemon", "sys") if _group_exists(g))
    path = _install(secrets_dir / "password", mode=0o640, group=other)
    for reader in ("root", "service user"):
        message = str(_refusal(path)) if reader == "root" else _load_as_service_user(path).stdout
        assert f"has mode 0640, open to its group {other}: run `chgrp {SERVICE_GROUP} " in message, reader


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def _refusal(path: Path) -> SecretError:
    with pytest.raises(SecretError) as info:
        SecretSource(file=path).load()
    return info.value


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
    assert checked.returncode == 2, checked.stdout + checked.stderr
    problems = json.loads(checked.stdout)["problems"]
    assert len(problems) == 2
    assert all(f"chmod 640 {tmp_path}" in p for p in problems)
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
