"""A command still in the engine's queue when SIGHUP swaps the publisher is answered through
the new connection (the old one is stopped: a reply on it would be lost). Real mosquitto."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.journal.records import JournaledEvent
from daemon.mqtt.secrets import Secret
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.mqtt.ack_support import publish
from tests.mqtt.support import Subscriber, signed_command
from tests.service.harness import TABLE_ID, dealt_shoe, write_config
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto


def _command(key: Secret, command_id: str) -> dict[str, Any]:
    return signed_command(key, TABLE_ID, "void_shoe", {}, command_id=command_id)


def test_a_command_queued_across_a_reload_is_answered_through_the_new_connection(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=3, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    key = Secret(command_key, "test")
    hold, held = threading.Event(), threading.Event()

    def on_events(events: list[JournaledEvent]) -> None:
        """Engine thread: after the first command, wait (the next one stays queued)."""
        if any(e.data.get("command_id") == "first" for e in events):
            held.set()
            assert hold.wait(30)

    daemon = Daemon(
        load_config(config, environ={}), SystemdNotifier({}), config_path=config, on_events=on_events
    )
    replies = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE_ID}/cmd/reply"])
    daemon.start()
    try:
        assert daemon.publisher.subscribed.wait(10)
        cmd = f"baccarat/v1/{TABLE_ID}/cmd"
        publish(mosquitto.port, cmd, _command(key, "first"))
        assert held.wait(10), "the engine did not take the first command"
        publish(mosquitto.port, cmd, _command(key, "queued"))
        deadline = time.monotonic() + 10
        while daemon.queue.qsize() == 0:  # the old connection handed it to the engine's queue
            assert time.monotonic() < deadline, "the second command never reached the queue"
            time.sleep(0.02)
        data = json.loads(config.read_text())
        data["broker"]["keepalive_s"] = 20  # a broker change: the publisher is swapped
        config.write_text(json.dumps(data))
        old = daemon.publisher
        daemon.reload()
        assert daemon.publisher is not old
        hold.set()
        messages = replies.wait_for(lambda ms: any(m.json().get("command_id") == "queued" for m in ms))
    finally:
        hold.set()
        daemon.stop()
        replies.close()
        shoe.close()
    [answer] = [m.json() for m in messages if m.json().get("command_id") == "queued"]
    assert answer["action"] == "void_shoe"
    assert answer["status"] == "refused"  # no shoe to void: the engine's answer, not lost
