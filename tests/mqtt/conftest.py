"""Fixtures shared by the MQTT tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret, SecretSource
from daemon.mqtt.settings import BrokerSettings, DeliverySettings, SigningSettings, TlsSettings
from tests.support.secrets import write_secret

TABLE = "T1"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    events = tmp_path / "events.key"
    write_secret(events, "events-key-of-table-T1\n")
    command = tmp_path / "command.key"
    write_secret(command, "command-key-of-table-T1\n")
    return {"events": events, "command": command}


@pytest.fixture
def events_key(keys: dict[str, Path]) -> Secret:
    return SecretSource(file=keys["events"]).load()


@pytest.fixture
def command_key(keys: dict[str, Path]) -> Secret:
    return SecretSource(file=keys["command"]).load()


def make_settings(
    port: int, keys: dict[str, Path], protocol: str = "mqtt5", **delivery: Any
) -> BrokerSettings:
    return BrokerSettings(
        host="127.0.0.1",
        port=port,
        protocol=protocol,  # type: ignore[arg-type]
        client_id=f"edge-{TABLE}-{port}",
        tls=TlsSettings(enabled=False),
        signing=SigningSettings(
            events_key=SecretSource(file=keys["events"]), command_key=SecretSource(file=keys["command"])
        ),
        delivery=DeliverySettings(
            **{"health_interval_s": 0.2, "backoff_initial_s": 0.05, "backoff_max_s": 0.4, **delivery}
        ),
    )


def card_event(n: int, shoe: str = "S1") -> DeliveryEvent:
    """A stand-in engine event (same fields as daemon.engine.events.Event)."""
    return DeliveryEvent(
        kind="card_dealt",
        at=1_764_400_000.0 + n,
        data={"card": "8s", "slot": "P1", "n": n},
        shoe_id=shoe,
        hand=1 + n // 6,
        source="reader",
    )


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), TABLE)
    yield j
    j.close()


@pytest.fixture
def make_publisher() -> Iterator[Callable[..., Publisher]]:
    started: list[Publisher] = []

    def factory(*args: Any, **kwargs: Any) -> Publisher:
        publisher = Publisher(*args, **kwargs)
        publisher.start()
        started.append(publisher)
        return publisher

    yield factory
    for publisher in started:
        publisher.stop(timeout=2.0)
