"""Username/password login with the password from the environment or a file (never argv),
against a mosquitto with a password file; a wrong password is reported, not retried blindly
fast, and the password never appears in health or logs."""

from __future__ import annotations

import getpass
import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from daemon.journal import Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import AuthSettings, BrokerSettings, DeliverySettings, TlsSettings
from tests.mqtt.conftest import card_event
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

PASSWORD = "correct horse battery staple"


@pytest.fixture
def auth_broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    passwords = tmp_path / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-c", "-b", str(passwords), "T1", PASSWORD], check=True, capture_output=True
    )
    broker = MosquittoBroker(
        tmp_path / "broker",
        extra_config=f"allow_anonymous false\npassword_file {passwords}\nuser {getpass.getuser()}",
    )
    broker.start()
    yield broker
    broker.stop()


def settings(port: int, password: SecretSource) -> BrokerSettings:
    return BrokerSettings(
        host="127.0.0.1",
        port=port,
        tls=TlsSettings(enabled=False),
        auth=AuthSettings(username="T1", password=password),
        delivery=DeliverySettings(backoff_initial_s=0.05, backoff_max_s=0.2),
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_password_from_env_logs_in(
    auth_broker: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGE_BROKER_PASSWORD", PASSWORD)
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    journal.append([], [card_event(n) for n in range(3)])
    publisher = Publisher(settings(auth_broker.port, SecretSource(env="EDGE_BROKER_PASSWORD")), "T1", journal)
    publisher.start()
    try:
        wait_until(lambda: not journal.pending())
    finally:
        publisher.stop()
        journal.close()


def test_wrong_password_is_reported_and_never_logged(
    auth_broker: MosquittoBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = tmp_path / "wrong"
    write_secret(wrong, "not-the-password-1234\n")
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    caplog.set_level(logging.DEBUG)
    publisher = Publisher(settings(auth_broker.port, SecretSource(file=wrong)), "T1", journal)
    publisher.start()
    try:
        wait_until(lambda: publisher.counters.connection_failures >= 2)
        health = publisher.health()
    finally:
        publisher.stop()
        journal.close()
    assert not health["connected"]
    assert health["last_error"] == "broker refused the connection: Not authorized (0x87)"
    assert "not-the-password-1234" not in caplog.text
    assert "not-the-password-1234" not in repr(health)
