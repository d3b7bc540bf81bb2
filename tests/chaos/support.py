"""The chaos rig: the shipped broker config (TLS, client certificates, ACL, persistence with its
autosave) on a real mosquitto that tests SIGKILL, a table publishing through it with the
server acknowledgement on, and the reference consumer as the game server."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.journal import Journal
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer_client import ConsumerClient
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import (
    BrokerSettings,
    CommandKeySettings,
    DeliverySettings,
    ServerAckSettings,
    SigningSettings,
    TlsSettings,
)
from tests.conftest import REPO_ROOT
from tests.mqtt.test_production_config import localised_config
from tests.support.broker import free_port, mosquitto_binary
from tests.support.secrets import write_secret

TABLE = "T1"
GS_KEY_ID = "gs-main"


class ShippedBroker:
    """``config/mosquitto/mosquitto.conf`` localised to a temporary PKI, store and port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pki = workdir / "pki"
        subprocess.run(
            [
                "bash",
                str(REPO_ROOT / "config" / "mosquitto" / "make-pki.sh"),
                str(self.pki),
                "127.0.0.1",
                TABLE,
                "game-server",
            ],
            check=True,
            capture_output=True,
        )
        self.port = free_port()
        self.config = localised_config(workdir, self.pki, self.port)
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        self.proc = subprocess.Popen([mosquitto_binary(), "-c", str(self.config)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            assert self.proc.poll() is None, (
                self.proc.stderr.read().decode() if self.proc.stderr else "exited"
            )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the shipped config did not listen"
                time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no clean stop, no final save (what the store holds is its last autosave)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None
        self.kills += 1

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None


def table_settings(broker: ShippedBroker, keys: dict[str, Path], **server_ack: Any) -> BrokerSettings:
    """The table T1 with its client certificate, the events key, the game server's key."""
    return BrokerSettings(
        host="127.0.0.1",
        port=broker.port,
        client_id=f"baccarat-edge-{TABLE}",
        tls=TlsSettings(
            ca_file=broker.pki / "ca.crt",
            cert_file=broker.pki / f"{TABLE}.crt",
            key_file=broker.pki / f"{TABLE}.key",
        ),
        signing=SigningSettings(
            events_key=SecretSource(file=keys["events"]),
            command_keys=(
                CommandKeySettings(
                    key_id=GS_KEY_ID, role=Role.GAME_SERVER, secret=SecretSource(file=keys["gs"])
                ),
            ),
        ),
        delivery=DeliverySettings(
            backoff_initial_s=0.05,
            backoff_max_s=0.4,
            health_interval_s=0.5,
            server_ack=ServerAckSettings(**{"enabled": True, **server_ack}),
        ),
    )


def chaos_keys(tmp_path: Path) -> dict[str, Path]:
    return {
        "events": write_secret(tmp_path / "events.key", "the events key of table T1, long\n"),
        "gs": write_secret(tmp_path / "gs-main.key", "the game server's key, long enough\n"),
    }


@dataclass
class GameServer:
    """The reference consumer, connected with the game server's certificate."""

    runner: ConsumerClient
    consumer: OrderedConsumer
    processed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seqs(self) -> list[int]:
        with self.runner.lock:
            return [e["seq"] for e in self.processed]

    def stop(self) -> None:
        self.runner.stop()
        self.consumer.checkpoint.close()


def game_server(broker: ShippedBroker, keys: dict[str, Path], checkpoint: Path) -> GameServer:
    """Start the reference consumer (persistent session) and wait for its subscription."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="game-server-consumer", protocol=mqtt.MQTTv5)
    client.tls_set(
        ca_certs=str(broker.pki / "ca.crt"),
        certfile=str(broker.pki / "game-server.crt"),
        keyfile=str(broker.pki / "game-server.key"),
    )
    events_key = SecretSource(file=keys["events"]).load()
    consumer = OrderedConsumer(
        TABLE, Checkpoint(checkpoint, TABLE), events_key, gap_grace_s=0.5, gap_retry_s=2.0
    )
    server = GameServer(runner=None, consumer=consumer)  # type: ignore[arg-type]
    server.runner = ConsumerClient(
        client,
        consumer,
        GS_KEY_ID,
        SecretSource(file=keys["gs"]).load(),
        on_processed=server.processed.append,
        interval_s=0.1,
    )
    server.runner.connect("127.0.0.1", broker.port)
    assert server.runner.subscribed.wait(10), "the game server did not subscribe"
    return server


def wait_until(predicate: Any, timeout: float, what: str, poll: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def started(publisher: Publisher) -> Iterator[Publisher]:
    publisher.start()
    try:
        yield publisher
    finally:
        publisher.stop(timeout=2.0)


def journal_seqs(journal: Journal) -> list[int]:
    return [e.seq for e in journal.events(origin=None)]
