"""Replay a fixture through its real driver into a fresh engine: the event stream a fixture must produce."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from common.inputs import CardRead, EngineInput
from drivers.fixtures import Fixture, strip_volatile
from drivers.replay import ReplayResult, replay_fixture

FIXTURE_TABLE_ID = "FIXTURE"
"""The table id a fixture's engine runs under (what a squeeze table's commitments are bound to)."""


def seeded_nonce(name: str, n: int) -> str:
    """The nonce of a squeeze fixture's ``n``-th card read: reproducible, where the daemon draws
    one from the OS (``daemon/service/card_nonces.py``)."""
    return hashlib.sha256(f"baccarat-edge fixture nonce\n{name}\n{n}".encode()).hexdigest()[:32]


def engine_events(
    fixture: Fixture,
    *,
    realtime: bool = False,
    speed: float = 1.0,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], ReplayResult]:
    """Events (``Event.to_dict()`` without volatile fields) of a new engine fed by replaying ``fixture``.

    The engine gets the fixture header's ``table`` settings and their variant; on a squeeze table
    each card read gets a seeded nonce (``seeded_nonce``). At a ``restart``
    step (an outage of the edge) the engine is restored from its own events through JSON, as the
    daemon restores it from its journal, and goes on from there.
    """
    from daemon.engine.events import Event
    from daemon.engine.settings import TableSettings
    from daemon.engine.table import Engine
    from daemon.rules.variants import load_variant_by_name

    settings = TableSettings.model_validate(fixture.header.table)
    variant = load_variant_by_name(settings.variant)
    engine = Engine(settings, variant, table_id=FIXTURE_TABLE_ID)
    reads = 0
    journal: list[Event] = []
    events: list[dict[str, Any]] = []
    lock = threading.Lock()

    def sink(item: EngineInput) -> None:
        nonlocal reads
        with lock:  # driver thread and replay thread (commands) never race the engine
            if isinstance(item, CardRead) and engine.emitter.squeeze:
                reads += 1
                item = item._replace(nonce=seeded_nonce(fixture.header.name, reads))
            for event in engine.handle(item):
                journal.append(event)
                record = strip_volatile(event.to_dict())
                events.append(record)
                if on_event is not None:
                    on_event(record)

    def restart(_at: float) -> None:
        nonlocal engine
        with lock:
            stored = [Event.from_dict(json.loads(json.dumps(e.to_dict(), allow_nan=False))) for e in journal]
            engine = Engine.restore(
                settings, variant, stored, load_variant_by_name, table_id=FIXTURE_TABLE_ID
            )

    result = replay_fixture(
        fixture, sink, realtime=realtime, speed=speed, on_progress=on_progress, on_restart=restart
    )
    return events, result
