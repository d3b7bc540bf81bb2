"""SIGHUP applies a broker password or signing key rotated in place (same file, new content),
and command keys added to, revoked from or rotated in the keyring."""

from __future__ import annotations

import getpass
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.cli import main
from daemon.service.config import changed_sections, load_config, rotated_secrets
from daemon.service.logging import reset_logging
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.service.harness import TABLE_ID, dealt_shoe, write_config
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret


def _with_password(config: Path, password_file: Path) -> None:
    data = json.loads(config.read_text())
    data["broker"]["auth"] = {"username": TABLE_ID, "password": {"file": str(password_file)}}
    config.write_text(json.dumps(data, indent=1))


def _config(tmp_path: Path, port: int) -> tuple[Path, Path, PtyDevice]:
    deal, _plan, _steps = dealt_shoe(seed=3, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, port, deal)
    password = tmp_path / "broker.password"
    write_secret(password, "old password\n")
    _with_password(config, password)
    return config, password, shoe


def test_a_secret_rotated_in_place_marks_the_broker_changed(tmp_path: Path) -> None:
    config, password, shoe = _config(tmp_path, 1883)
    try:
        first = load_config(config, environ={})
        same = load_config(config, environ={})
        assert changed_sections(first.config, same.config, first.secret_digests, same.secret_digests) == []
        password.write_text("new password\n")
        (tmp_path / "events.key").write_bytes(b"a fresh events key of enough length\n")
        rotated = load_config(config, environ={})
        # the settings name the same files: without the digests nothing looks changed
        assert changed_sections(first.config, rotated.config) == []
        assert changed_sections(
            first.config, rotated.config, first.secret_digests, rotated.secret_digests
        ) == ["broker"]
        assert rotated_secrets(first.secret_digests, rotated.secret_digests) == [
            "broker.auth.password",
            "broker.signing.events_key",
        ]
        # a digest is keyed and short: neither the secret nor its plain hash
        for digest in rotated.secret_digests.values():
            assert "password" not in digest
            assert len(digest) == 32
    finally:
        shoe.close()


@pytest.fixture
def auth_broker(tmp_path: Path) -> Iterator[tuple[MosquittoBroker, Path]]:
    passwords = tmp_path / "mosquitto.passwd"
    subprocess.run(
        ["mosquitto_passwd", "-c", "-b", str(passwords), TABLE_ID, "old password"],
        check=True,
        capture_output=True,
    )
    broker = MosquittoBroker(
        tmp_path / "broker",
        extra_config=f"allow_anonymous false\npassword_file {passwords}\nuser {getpass.getuser()}",
    )
    broker.start()
    yield broker, passwords
    broker.stop()


@pytest.mark.mosquitto
def test_sighup_logs_in_with_a_password_rotated_in_place(
    tmp_path: Path, auth_broker: tuple[MosquittoBroker, Path]
) -> None:
    broker, passwords = auth_broker
    config, password, shoe = _config(tmp_path, broker.port)
    daemon = Daemon(load_config(config, environ={}), notifier=SystemdNotifier({}), config_path=config)
    daemon.start()
    try:
        assert _wait(lambda: bool(daemon.publisher.connected))
        # the broker's password changes; the old one is refused from now on
        subprocess.run(
            ["mosquitto_passwd", "-b", str(passwords), TABLE_ID, "new password"],
            check=True,
            capture_output=True,
        )
        broker.restart()
        password.write_text("new password\n")
        old = daemon.publisher
        with structlog.testing.capture_logs() as logs:
            daemon.reload()  # what the main loop does on SIGHUP
        reloaded = next(line for line in logs if line["event"] == "config_reloaded")
        assert reloaded["applied"] == ["broker"]
        assert reloaded["needs_restart"] == []
        assert reloaded["rotated_in_place"] == ["broker.auth.password"]
        assert "new password" not in repr(logs)
        assert daemon.publisher is not old
        assert _wait(lambda: bool(daemon.publisher.connected))
        # a second SIGHUP with nothing changed keeps the publisher
        current = daemon.publisher
        with structlog.testing.capture_logs() as logs:
            daemon.reload()
        reloaded = next(line for line in logs if line["event"] == "config_reloaded")
        assert reloaded["applied"] == []
        assert reloaded["rotated_in_place"] == []
        assert daemon.publisher is current
    finally:
        daemon.stop()
        shoe.close()
        reset_logging()


def _wait(predicate: object, timeout: float = 20.0) -> bool:
    """Poll ``predicate`` until true or ``timeout``."""
    assert callable(predicate)
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        done.wait(0.05)
    return bool(predicate())


def _keyring(config: Path, keys: dict[str, tuple[str, Path]]) -> None:
    """Set ``broker.signing.command_keys`` (key id -> role, key file); no legacy command key."""
    data = json.loads(config.read_text())
    signing = data["broker"]["signing"]
    signing.pop("command_key", None)
    signing["command_keys"] = [
        {"key_id": key_id, "role": role, "secret": {"file": str(path)}}
        for key_id, (role, path) in keys.items()
    ]
    config.write_text(json.dumps(data, indent=1))


def _send(
    config: Path, key_id: str, key_file: Path, action: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    """``baccarat-edge command`` in process: its exit status and the reply it printed."""
    status = main(
        ["command", "--config", str(config), "--key-id", key_id, "--command-key-file", str(key_file), action]
    )
    # the daemon in this process logs to stdout too: the reply is the line with a status
    [reply] = [
        body for body in map(_json_or_none, capsys.readouterr().out.splitlines()) if body and "status" in body
    ]
    return status, reply


def _json_or_none(line: str) -> dict[str, Any] | None:
    try:
        body = json.loads(line)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


@pytest.mark.mosquitto
def test_sighup_revokes_and_adds_command_keys(
    tmp_path: Path, mosquitto: MosquittoBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=3, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    old = write_secret(tmp_path / "sup-old.key", "the key of the supervisor who left\n")
    new = write_secret(tmp_path / "sup-new.key", "the key of the supervisor who came\n")
    tech = write_secret(tmp_path / "tech-bo.key", "the key of the technician, long enough\n")
    _keyring(config, {"sup-old": ("supervisor", old), "tech-bo": ("technician", tech)})
    daemon = Daemon(load_config(config, environ={}), notifier=SystemdNotifier({}), config_path=config)
    daemon.start()
    try:
        assert _wait(lambda: bool(daemon.publisher.connected))
        assert daemon.publisher.subscribed.wait(10)
        status, reply = _send(config, "sup-old", old, "void_shoe", capsys)
        # past every edge check: the engine decides (no shoe to void yet)
        assert (status, reply["status"], reply["code"]) == (1, "refused", "refused_by_table")
        status, reply = _send(config, "sup-new", new, "void_shoe", capsys)
        assert (status, reply["code"]) == (1, "bad_signature")
        status, reply = _send(config, "tech-bo", tech, "void_shoe", capsys)
        assert (status, reply["code"]) == (1, "forbidden")

        # sup-old leaves, sup-new and the game server gs-1 arrive; tech-bo's key is rotated in place
        game = write_secret(tmp_path / "gs-1.key", "the game server's key, long enough\n")
        _keyring(
            config,
            {"sup-new": ("supervisor", new), "tech-bo": ("technician", tech), "gs-1": ("game_server", game)},
        )
        stale_tech = write_secret(tmp_path / "tech-bo.old", tech.read_bytes())
        tech.write_text("the technician's fresh key, long enough\n")
        with structlog.testing.capture_logs() as logs:
            daemon.reload()  # what the main loop does on SIGHUP
        reloaded = next(line for line in logs if line["event"] == "config_reloaded")
        assert reloaded["applied"] == ["broker"]
        assert reloaded["needs_restart"] == []
        assert reloaded["rotated_in_place"] == ["broker.signing.command_keys.tech-bo"]
        assert _wait(lambda: bool(daemon.publisher.connected))
        assert daemon.publisher.subscribed.wait(10)

        status, reply = _send(config, "sup-old", old, "void_shoe", capsys)
        assert (status, reply["code"], reply["reason"]) == (1, "bad_signature", "unknown key_id 'sup-old'")
        status, reply = _send(config, "tech-bo", stale_tech, "lock", capsys)
        assert (status, reply["code"]) == (1, "bad_signature")
        status, reply = _send(config, "gs-1", game, "new_shoe", capsys)
        assert (status, reply["status"], reply["code"]) == (0, "accepted", None)
        # the rotated key passes the edge; this test's pty reader never answers the lock
        status, reply = _send(config, "tech-bo", tech, "lock", capsys)
        assert (status, reply["code"]) == (1, "refused_by_table")
        assert reply["reason"].startswith("reader: no answer")
        status, reply = _send(config, "sup-new", new, "void_shoe", capsys)
        assert (status, reply["status"], reply["code"]) == (0, "accepted", None)
        # the journal names who sent what: the actor comes from the key
        journal = daemon.journal
        assert journal is not None
        decided = [
            (e.data["action"], e.data["actor"], e.data.get("code"))
            for e in journal.events(origin=None)
            if e.kind in ("command_accepted", "command_refused")
        ]
        assert decided == [
            ("void_shoe", "supervisor:sup-old", None),
            ("void_shoe", None, "bad_signature"),
            ("void_shoe", "technician:tech-bo", "forbidden"),
            ("void_shoe", None, "bad_signature"),
            ("lock", None, "bad_signature"),
            ("new_shoe", "game_server:gs-1", None),
            ("lock", "technician:tech-bo", None),
            ("void_shoe", "supervisor:sup-new", None),
        ]
    finally:
        daemon.stop()
        shoe.close()
        reset_logging()
