"""The table's pace for its health report: rounds per hour, the split of a round and dealing
mistakes per dealer and for the table (:mod:`daemon.journal.pace`), from the journal.

Cheap by construction: the journal is read once when the daemon starts (the events it keeps),
then every journaled event is added as the engine thread stores it (a constant-time step); the
report is rebuilt only after an event that changes a figure, never by a journal scan per health
report. The health publisher reads :meth:`TablePace.report` from its own thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Protocol

from daemon.journal.pace import PaceTracker
from daemon.journal.records import JournaledEvent

PACE_KINDS = frozenset(
    {
        "dealer_changed",
        "shoe_started",
        "shoe_ended",
        "betting_opened",
        "betting_closed",
        "round_opened",
        "round_completed",
        "round_held",
        "alert_raised",
    }
)
"""The event kinds the pace fold reads (every other kind changes no figure)."""


class EventSource(Protocol):
    """What the pace is read from at start: the journal's engine events in order."""

    def events(self) -> Iterable[JournaledEvent]: ...


class TablePace:
    """The pace fold of one table, fed in journal order, reported as JSON."""

    def __init__(self) -> None:
        self._tracker = PaceTracker()
        self._lock = threading.Lock()
        self._report: dict[str, Any] | None = None

    @classmethod
    def from_journal(cls, journal: EventSource) -> TablePace:
        """The pace of every event the journal keeps (read once, at start)."""
        pace = cls()
        pace.observe(journal.events())
        return pace

    def observe(self, events: Iterable[JournaledEvent]) -> None:
        """Add journaled events (the engine thread, after each store)."""
        with self._lock:
            for event in events:
                if event.kind in PACE_KINDS:
                    self._tracker.add(event.kind, event.at, event.hand, event.data)
                    self._report = None

    def report(self) -> dict[str, Any]:
        """``{"table": figures, "dealers": {dealer_id: figures}, "dealer": id or None}``
        (:meth:`daemon.journal.pace.PaceTracker.report`), rebuilt only after a change."""
        with self._lock:
            if self._report is None:
                self._report = self._tracker.report()
            return self._report
