"""``Publisher.last_progress()``: the drain loop's heartbeat for the watchdog probe. It keeps
advancing while the broker is unreachable and stops while the loop is blocked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from daemon.journal import Journal, JournaledEvent
from daemon.mqtt.publisher import Publisher
from tests.mqtt.conftest import TABLE, card_event, make_settings
from tests.support.broker import MosquittoBroker, free_port


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def advanced_past(publisher: Publisher, mark: float) -> bool:
    progress = publisher.last_progress()
    return progress is not None and progress > mark


@pytest.mark.mosquitto
def test_progress_advances_without_a_broker_and_stops_while_the_drain_loop_is_blocked(
    keys: dict[str, Path], journal: Journal, tmp_path: Path
) -> None:
    port = free_port()
    publisher = Publisher(make_settings(port, keys), TABLE, journal)
    assert publisher.last_progress() is None  # not started

    # Once connected, the drain loop reads undelivered events from the journal; armed, that
    # read blocks until released.
    armed, entered, release = threading.Event(), threading.Event(), threading.Event()
    pending = journal.pending

    def blocking_pending(after_seq: int = 0, limit: int = 100) -> list[JournaledEvent]:
        if armed.is_set() and threading.current_thread().name.startswith("mqtt-drain"):
            entered.set()
            release.wait()
        return pending(after_seq, limit)

    journal.pending = blocking_pending  # type: ignore[method-assign]
    broker = MosquittoBroker(tmp_path / "broker", port=port)  # started later: away at first
    publisher.start()
    try:
        wait_until(lambda: publisher.last_progress() is not None, "a first turn")
        first = publisher.last_progress()
        assert first is not None
        wait_until(lambda: advanced_past(publisher, first), "a later turn with no broker")
        assert not publisher.connected
        assert publisher.counters.connection_failures >= 1

        armed.set()
        broker.start()
        journal.append([], [card_event(0)])
        publisher.notify()
        assert entered.wait(20), "the drain loop never read the journal"
        stuck = publisher.last_progress()
        assert stuck is not None
        # Several turn periods (at most 0.5 s each) pass with the loop blocked ...
        wait_until(lambda: time.monotonic() - stuck > 2.0, "time to pass")
        assert publisher.last_progress() == stuck
        assert publisher.running  # ... while the threads are alive: only progress tells
        armed.clear()
        release.set()
        wait_until(lambda: advanced_past(publisher, stuck), "the loop turning again")
        wait_until(lambda: not journal.pending(), "the event delivered")
    finally:
        release.set()
        publisher.stop(timeout=2.0)
        broker.stop()
    assert publisher.last_progress() is None  # stopped
