"""``dealer_changed`` on the wire: a signed supervisor command through a real mosquitto into the
running daemon; the table publishes the signed ``dealer_changed`` event and its retained state
names the dealer; a hostile name is refused by the table with its reason and changes nothing.
Every payload is checked against the published contract."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, verify
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.mqtt.ack_support import publish
from tests.mqtt.support import Subscriber, signed_command, validate_payload
from tests.service.harness import TABLE_ID, dealt_shoe, write_config
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

BASE = f"baccarat/v1/{TABLE_ID}"


@pytest.fixture
def table(tmp_path: Path, mosquitto: MosquittoBroker) -> Iterator[tuple[Daemon, Secret, Secret]]:
    deal, _plan, _steps = dealt_shoe(seed=5, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    daemon = Daemon(load_config(config, environ={}), SystemdNotifier({}), config_path=config)
    daemon.start()
    try:
        assert daemon.publisher.subscribed.wait(10)
        yield daemon, Secret(events_key, "test"), Secret(command_key, "test")
    finally:
        daemon.stop()
        shoe.close()


def _replied(messages: list[Any], command_id: str) -> bool:
    return any(m.topic.endswith("/cmd/reply") and m.json().get("command_id") == command_id for m in messages)


def _dealer_id(state: dict[str, Any]) -> object:
    dealer = state["state"].get("dealer")
    return None if dealer is None else dealer["dealer_id"]


def test_a_signed_dealer_change_reaches_the_events_and_the_retained_state(
    table: tuple[Daemon, Secret, Secret], mosquitto: MosquittoBroker
) -> None:
    _daemon, events_key, command_key = table
    seen = Subscriber(mosquitto.port, [f"{BASE}/events", f"{BASE}/state", f"{BASE}/cmd/reply"])
    try:
        hostile = {"dealer_id": "D-17", "name": "Eve\u202e<img src=x>"}
        bad = signed_command(command_key, TABLE_ID, "dealer_changed", hostile, command_id="bad")
        publish(mosquitto.port, f"{BASE}/cmd", bad)
        seen.wait_for(lambda ms: _replied(ms, "bad"))
        args = {"dealer_id": "D-17", "name": "Zoë Ng"}
        command = signed_command(command_key, TABLE_ID, "dealer_changed", args, command_id="good")
        publish(mosquitto.port, f"{BASE}/cmd", command)
        messages = seen.wait_for(
            lambda ms: (
                _replied(ms, "good")
                and any(m.topic.endswith("/state") and _dealer_id(m.json()) == "D-17" for m in ms)
            )
        )
    finally:
        seen.close()
    for message in messages:
        validate_payload(message.topic, message.payload)
    replies = {m.json()["command_id"]: m.json() for m in messages if m.topic.endswith("/cmd/reply")}
    assert replies["bad"]["status"] == "refused"
    assert replies["bad"]["code"] == "refused_by_table"
    assert replies["bad"]["reason"].startswith("argument 'name' must be")
    assert replies["good"]["status"] == "accepted"

    events = [m.json() for m in messages if m.topic.endswith("/events")]
    changed = [e for e in events if e["kind"] == "dealer_changed"]
    assert len(changed) == 1
    assert changed[0]["data"] == {"dealer_id": "D-17", "name": "Zoë Ng", "actor": "supervisor:test"}
    assert changed[0]["source"] == "supervisor"
    assert verify(changed[0], events_key, UNSIGNED_EVENT_FIELDS)
    # the refused name went nowhere
    assert not any("\u202e" in json.dumps(e, ensure_ascii=False) for e in events)

    [state] = [m.json() for m in messages if m.topic.endswith("/state")][-1:]
    assert verify(state, events_key)
    assert state["state"]["dealer"] == {"dealer_id": "D-17", "name": "Zoë Ng", "since": changed[0]["ts"]}
