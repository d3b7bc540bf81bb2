"""Helpers for the server acknowledgement tests: keyring settings, signed acks, a one-shot
publisher standing in for the game server."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import Secret, SecretSource
from daemon.mqtt.settings import (
    BrokerSettings,
    CommandKeySettings,
    DeliverySettings,
    ServerAckSettings,
    SigningSettings,
    TlsSettings,
)
from daemon.mqtt.signing import sign
from tests.support.secrets import write_secret

KEY_ROLES = {"gs-1": Role.GAME_SERVER, "sup-anna": Role.SUPERVISOR}


def key_files(tmp_path: Path) -> dict[str, Path]:
    """Secret files of the events key and of the keyring's keys."""
    files = {"events": write_secret(tmp_path / "events.key", "events-key-of-table-T1\n")}
    for key_id in KEY_ROLES:
        files[key_id] = write_secret(tmp_path / f"{key_id}.key", f"the key of {key_id}, long enough\n")
    return files


def load_key(files: dict[str, Path], name: str) -> Secret:
    return SecretSource(file=files[name]).load()


def ack_settings(port: int, files: dict[str, Path], table: str = "T1", **server_ack: Any) -> BrokerSettings:
    """Broker settings of a table with the keyring and the server acknowledgement on."""
    return BrokerSettings(
        host="127.0.0.1",
        port=port,
        client_id=f"edge-{table}-{port}",
        tls=TlsSettings(enabled=False),
        signing=SigningSettings(
            events_key=SecretSource(file=files["events"]),
            command_keys=tuple(
                CommandKeySettings(key_id=key_id, role=role, secret=SecretSource(file=files[key_id]))
                for key_id, role in KEY_ROLES.items()
            ),
        ),
        delivery=DeliverySettings(
            health_interval_s=0.2,
            backoff_initial_s=0.05,
            backoff_max_s=0.4,
            server_ack=ServerAckSettings(**{"enabled": True, **server_ack}),
        ),
    )


def signed_ack(
    key: Secret,
    key_id: str | None,
    seq: float,
    event_id: str,
    table: str = "T1",
    chain: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """A server acknowledgement as the game server signs it (``chain``: the event's hash and
    epoch as received, sent when given)."""
    message: dict[str, Any] = {
        "schema_version": 1,
        "table_id": table,
        "seq": seq,
        "event_id": event_id,
        "ts": time.time(),
    }
    if chain[0] is not None:
        message["hash"] = chain[0]
    if chain[1] is not None:
        message["epoch"] = chain[1]
    if key_id is not None:
        message["key_id"] = key_id
    message["sig"] = sign(message, key)
    return message


def publish(port: int, topic: str, payload: dict[str, Any] | bytes, retain: bool = False) -> None:
    """Publish one QoS 1 message and wait for its PUBACK."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        info = client.publish(topic, data, qos=1, retain=retain)
        info.wait_for_publish(10)
        assert info.is_published(), f"{topic}: not acknowledged by the broker"
    finally:
        client.disconnect()
        client.loop_stop()


def wait_until(predicate: Any, timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true (a positive marker, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    done = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        done.wait(0.02)
