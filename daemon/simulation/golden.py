"""Replay a fixture through its real driver into a fresh engine: the event stream a fixture must produce."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from common.inputs import EngineInput
from drivers.fixtures import Fixture, strip_volatile
from drivers.replay import ReplayResult, replay_fixture


def engine_events(
    fixture: Fixture,
    *,
    realtime: bool = False,
    speed: float = 1.0,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], ReplayResult]:
    """Events (``Event.to_dict()`` without volatile fields) of a new engine fed by replaying ``fixture``.

    The engine gets the fixture header's ``table`` settings and their variant. At a ``restart``
    step (an outage of the edge) the engine is restored from its own events through JSON, as the
    daemon restores it from its journal, and goes on from there.
    """
    from daemon.engine.events import Event
    from daemon.engine.settings import TableSettings
    from daemon.engine.table import Engine
    from daemon.rules.variants import load_variant_by_name

    settings = TableSettings.model_validate(fixture.header.table)
    variant = load_variant_by_name(settings.variant)
    engine = Engine(settings, variant)
    journal: list[Event] = []
    events: list[dict[str, Any]] = []
    lock = threading.Lock()

    def sink(item: EngineInput) -> None:
        with lock:  # driver thread and replay thread (commands) never race the engine
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
            engine = Engine.restore(settings, variant, stored, load_variant_by_name)

    result = replay_fixture(
        fixture, sink, realtime=realtime, speed=speed, on_progress=on_progress, on_restart=restart
    )
    return events, result
