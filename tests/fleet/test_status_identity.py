"""The retained status names the daemon's version and config digest (the fleet view's
VERSION and CONFIG columns), on connect and in the Last Will; check-config prints the digest."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from daemon import __version__
from daemon.cli import main
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import BrokerSettings, DeliverySettings, SigningSettings, TlsSettings
from daemon.service.config import config_digest, load_config
from tests.mqtt.support import Received, Subscriber, validate_payload
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto


def _config(tmp_path: Path, variant: str = "standard") -> Path:
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        f"table: {{variant: {variant}}}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        "broker:\n  host: 127.0.0.1\n  port: 1883\n  tls: {enabled: false}\n"
    )
    return path


def test_config_digest_is_stable_and_follows_the_config(tmp_path: Path) -> None:
    path = _config(tmp_path)
    first = config_digest(load_config(path).config, load_config(path).variant)
    assert len(first) == 64
    assert int(first, 16) >= 0
    assert config_digest(load_config(path).config, load_config(path).variant) == first
    other = _config(tmp_path, variant="ez")
    assert config_digest(load_config(other).config, load_config(other).variant) != first


def test_check_config_prints_the_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(tmp_path)
    loaded = load_config(path)
    main(["check-config", str(path), "--no-probe", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["config_digest"] == config_digest(loaded.config, loaded.variant)


def test_status_and_last_will_carry_version_and_digest(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    key = tmp_path / "events.key"
    write_secret(key, "events-key-of-T7\n")
    settings = BrokerSettings(
        host="127.0.0.1",
        port=mosquitto.port,
        protocol="mqtt5",  # type: ignore[arg-type]
        client_id="edge-T7",
        tls=TlsSettings(enabled=False),
        signing=SigningSettings(events_key=SecretSource(file=key)),
        delivery=DeliverySettings(backoff_initial_s=0.05, backoff_max_s=0.2),
    )
    identity = {"version": __version__, "config_digest": "cd" * 32}
    journal = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), "T7")
    subscriber = Subscriber(mosquitto.port, ["baccarat/v1/T7/status"])
    publisher = Publisher(settings, "T7", journal, identity=identity)
    publisher.start()
    try:
        online = _first(subscriber, "online")
        message = validate_payload(online.topic, online.payload)
        assert message["version"] == __version__
        assert message["config_digest"] == "cd" * 32
        # the Last Will: the broker publishes it when the connection dies without DISCONNECT
        sock = publisher.connection.client.socket()
        assert isinstance(sock, socket.socket)
        sock.shutdown(socket.SHUT_RDWR)
        offline = _first(subscriber, "offline")
        will = validate_payload(offline.topic, offline.payload)
        assert will["version"] == __version__
        assert will["config_digest"] == "cd" * 32
    finally:
        publisher.stop(timeout=2.0)
        subscriber.close()
        journal.close()


def _first(subscriber: Subscriber, status: str) -> Received:
    found = subscriber.wait_for(lambda ms: any(m.json()["status"] == status for m in ms), timeout=30)
    return next(m for m in found if m.json()["status"] == status)
