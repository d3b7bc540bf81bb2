"""The table's retained ``state`` snapshot: built by the engine thread, read by the publisher."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog

from daemon.engine.table import Engine
from daemon.journal.errors import JournalError
from daemon.journal.recall import ROUND_KINDS, RoundRecall, load_recall
from daemon.journal.records import JournaledEvent

log = structlog.get_logger("baccarat_edge.runner")


class StateSnapshot:
    """The engine's latest snapshot, rebuilt only when the publisher may send it.

    A snapshot costs far more than a card (0.4 ms mid-shoe), and the publisher sends state
    at most every ``interval_s`` (``broker.delivery.state_interval_s``) or after a round
    boundary, so the engine thread marks it stale after events and rebuilds it only then
    rather than after every input. Only the engine thread writes; any thread reads.
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        """How often a stale snapshot is rebuilt (changed by a SIGHUP that changes the broker)."""
        self._snapshot: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stale = False
        self._due_at = 0.0
        self.recall = RoundRecall()
        """The last rounds (the snapshot's ``recent_rounds``): the journal's tail at start, then
        every journaled event (engine thread only)."""

    def get(self) -> dict[str, Any]:
        """The latest snapshot (what the publisher retains)."""
        with self._lock:
            return self._snapshot

    def reset(self, engine: Engine) -> None:
        """A freshly restored engine: its snapshot now, without touching the refresh schedule.

        A snapshot that fails (an engine bug) keeps the previous one and is logged: the
        retained state may lag, but the engine thread, and so dealing, goes on."""
        try:
            snapshot = engine.snapshot()
            snapshot["recent_rounds"] = self.recall.rounds()
        except Exception:
            log.exception("state_snapshot_failed")
            return
        with self._lock:
            self._snapshot = snapshot

    def seed_rounds(self, journal_path: Path) -> None:
        """At start: the last rounds from the journal's tail (a journal that cannot be read for
        them is logged; the recall then starts empty and dealing goes on)."""
        try:
            self.recall = load_recall(journal_path)
        except JournalError as exc:
            log.warning("recent_rounds_not_read", error=str(exc))
            self.recall = RoundRecall()

    def observe(self, events: Iterable[JournaledEvent]) -> None:
        """Journaled events (the engine thread, after each store, before the snapshot is rebuilt).
        A recall that fails (a bug) is logged: the retained rounds may lag, dealing goes on."""
        try:
            for event in events:
                if event.kind in ROUND_KINDS:
                    body = {"kind": event.kind, "at": event.at, "shoe_id": event.shoe_id, "hand": event.hand}
                    self.recall.add({**body, "data": event.data})
        except Exception:
            log.exception("recent_rounds_failed")

    def mark_stale(self) -> None:
        """The engine produced events: the snapshot is out of date."""
        self._stale = True

    def refresh(self, engine: Engine) -> None:
        """Rebuild now (after a round boundary the publisher sends state at once)."""
        self.reset(engine)
        self._stale = False
        self._due_at = time.monotonic() + self.interval_s

    def refresh_if_due(self, engine: Engine) -> None:
        """Rebuild a stale snapshot once ``interval_s`` passed since the last rebuild."""
        if self._stale and time.monotonic() >= self._due_at:
            self.refresh(engine)

    def refresh_if_stale(self, engine: Engine) -> None:
        """The engine thread stops: the publisher's final state."""
        if self._stale:
            self.refresh(engine)
