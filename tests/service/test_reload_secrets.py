"""SIGHUP applies a broker password or signing key rotated in place (same file, new content)."""

from __future__ import annotations

import getpass
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

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
