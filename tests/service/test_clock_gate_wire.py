"""The clock gate on the wire: a running daemon whose clock status source is faked, a real
mosquitto, signed game server commands. While the source says the clock is unsynchronised, a
signed ``open_betting`` is refused with its reason and ``clock_gate_closed``; health names the
sync state and the measured command skew; once synchronised, betting opens and both alerts clear.
The main loop's poll is called by the test (one line of ``run_until_stopped``). Every payload is
checked against the published contract."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from daemon.mqtt.secrets import Secret
from daemon.service.clock_status import ClockReading
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


class FakeSource:
    """A clock status source the test flips."""

    name = "fake"

    def __init__(self) -> None:
        self.reading = ClockReading(False, "kernel clock unsynchronised (test)")

    def read(self) -> ClockReading:
        return self.reading


@pytest.fixture
def table(tmp_path: Path, mosquitto: MosquittoBroker) -> Iterator[tuple[Daemon, FakeSource, Secret]]:
    deal, _plan, _steps = dealt_shoe(seed=5, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    settings = json.loads(config.read_text())
    settings["table"]["game_flow"] = "betting_window"
    config.write_text(json.dumps(settings, indent=1))
    daemon = Daemon(load_config(config, environ={}), SystemdNotifier({}), config_path=config)
    source = FakeSource()
    daemon.clock_watch.source = source
    daemon.start()
    try:
        assert daemon.publisher.subscribed.wait(10)
        yield daemon, source, Secret(command_key, "test")
    finally:
        daemon.stop()
        shoe.close()


def _reply(messages: list[Any], command_id: str) -> dict[str, Any] | None:
    for m in messages:
        if m.topic.endswith("/cmd/reply") and m.json().get("command_id") == command_id:
            reply: dict[str, Any] = m.json()
            return reply
    return None


def _answered(messages: list[Any], *, command_id: str) -> bool:
    return _reply(messages, command_id) is not None


def _clock(message: Any) -> dict[str, Any] | None:
    engine = message.json().get("devices", {}).get("engine", {})
    clock: dict[str, Any] | None = engine.get("clock")
    return clock


def test_betting_waits_for_a_synchronised_clock(
    table: tuple[Daemon, FakeSource, Secret], mosquitto: MosquittoBroker
) -> None:
    daemon, source, command_key = table
    seen = Subscriber(mosquitto.port, [f"{BASE}/events", f"{BASE}/health", f"{BASE}/cmd/reply"])
    try:
        daemon.clock_watch.poll(time.monotonic())  # the main loop's turn
        for command_id, action, args in (
            ("shoe", "new_shoe", {"shoe_id": "S1"}),
            ("open-1", "open_betting", {"round_id": "T7-1001"}),
        ):
            publish(
                mosquitto.port,
                f"{BASE}/cmd",
                signed_command(command_key, TABLE_ID, action, args, command_id=command_id),
            )
            seen.wait_for(partial(_answered, command_id=command_id))
        seen.wait_for(
            lambda ms: any(
                m.topic.endswith("/health") and (_clock(m) or {}).get("command_skew_s") is not None
                for m in ms
            )
        )
        source.reading = ClockReading(True, "maxerror 1 ms")
        daemon.clock_watch.poll(time.monotonic() + 3600)  # the next poll interval
        command = signed_command(
            command_key, TABLE_ID, "open_betting", {"round_id": "T7-1001"}, command_id="open-2"
        )
        publish(mosquitto.port, f"{BASE}/cmd", command)
        messages = seen.wait_for(
            lambda ms: (
                _reply(ms, "open-2") is not None
                and any(
                    m.topic.endswith("/health") and (_clock(m) or {}).get("synchronised") is True for m in ms
                )
            )
        )
    finally:
        seen.close()
    for message in messages:
        validate_payload(message.topic, message.payload)
    refused = _reply(messages, "open-1")
    assert refused is not None
    assert refused["status"] == "refused"
    assert refused["reason"] == "betting cannot open: the table's clock is not synchronised " + (
        "(kernel clock unsynchronised (test))"
    )
    accepted = _reply(messages, "open-2")
    assert accepted is not None
    assert accepted["status"] == "accepted"
    events = [m.json() for m in messages if m.topic.endswith("/events")]
    said = [
        (e["kind"], e["data"].get("code") or e["data"].get("synchronised"))
        for e in events
        if e["kind"] in ("clock_status", "alert_raised", "alert_cleared", "betting_opened")
    ]
    assert said == [
        ("clock_status", False),
        ("alert_raised", "clock_unsynchronised"),
        ("alert_raised", "clock_gate_closed"),
        ("clock_status", True),
        ("alert_cleared", "clock_unsynchronised"),
        ("betting_opened", None),
        ("alert_cleared", "clock_gate_closed"),
    ]
    clocks = [c for m in messages if m.topic.endswith("/health") and (c := _clock(m)) is not None]
    unsynced = next(c for c in clocks if c["synchronised"] is False and c["command_skew_s"] is not None)
    assert unsynced["source"] == "none"  # the configured source; the test injected its own reader
    assert abs(unsynced["command_skew_s"]) < 5
    assert unsynced["max_skew_s"] == 1.0
    assert clocks[-1]["synchronised"] is True
