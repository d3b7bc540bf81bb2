"""The retained ``state`` and ``health`` topics.

The retained state is published at most every ``delivery.state_interval_s`` when the
snapshot provider hands a new object, at once (same condition) after a round or shoe
boundary event was published, and unconditionally on every connect and at stop. The
provider returns a new object when the state changes (the runner does), so the state is
compared by identity, never deep-compared."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from daemon.journal.store import Journal
from daemon.mqtt.connection import Connection
from daemon.mqtt.counters import Counters
from daemon.mqtt.delivery import Delivery
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret

log = logging.getLogger(__name__)

SnapshotFn = Callable[[], dict[str, Any] | None]
HealthExtraFn = Callable[[], dict[str, Any]]
HealthPaceFn = Callable[[], dict[str, Any]]
"""The table's pace (``health.pace``): a cheap read of figures kept up to date elsewhere."""


class StatePublisher:
    """Publishes the retained ``state`` (drain thread, and the stopping thread at stop)."""

    def __init__(
        self,
        connection: Connection,
        journal: Journal,
        snapshot: SnapshotFn | None,
        events_key: Secret | None,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._connection = connection
        self._journal = journal
        self._snapshot = snapshot
        self._events_key = events_key
        self._clock = clock
        self._interval = connection.settings.delivery.state_interval_s
        self._due = threading.Event()
        self._last: object = None
        self._next_at = 0.0

    def request(self) -> None:
        """Publish at the next :meth:`publish_requested` whatever changed (a new connection)."""
        self._due.set()

    def boundary_published(self) -> None:
        """A round or shoe boundary event went out: a new snapshot may go at once."""
        self._next_at = 0.0

    def publish_requested(self) -> None:
        """Publish the state if :meth:`request` asked for it."""
        if self._due.is_set():
            self.publish(force=True)

    def publish_if_changed(self, now: float) -> None:
        """Publish a new snapshot object once the interval passed (``now``: monotonic)."""
        if now >= self._next_at:
            self.publish()

    def wait(self, now: float) -> float | None:
        """Seconds until a changed snapshot is due; None when it did not change."""
        if self._snapshot is None:
            return None
        try:
            changed = self._snapshot() is not self._last
        except Exception:  # logged when the state is published, not on every wait
            changed = False
        return max(0.0, self._next_at - now) if changed else None

    def publish(self, *, force: bool = False) -> None:
        """Publish the retained state; unless ``force``, only a new snapshot object."""
        self._due.clear()
        state = self._peek()
        if state is None or (not force and state is self._last):
            return
        self._last = state
        self._next_at = time.monotonic() + self._interval
        body = {
            "table_id": self._connection.table_id,
            "ts": self._clock(),
            "last_seq": self._journal.last_seq(),
            "state": state,
        }
        try:
            payload = encode(signed_message(body, self._events_key))
        except ValueError as exc:  # e.g. NaN in a snapshot: keep the last good retained state
            log.error("state snapshot cannot be published: %s", exc)
            return
        self._connection.publish(self._connection.topics.state, payload, retain=True)

    def _peek(self) -> object:
        if self._snapshot is None:
            return None
        try:
            return self._snapshot()
        except Exception:
            log.exception("state snapshot provider failed")
            return None


class HealthReporter:
    """Builds the ``health`` report and publishes it (retained) every ``health_interval_s``."""

    def __init__(
        self,
        connection: Connection,
        journal: Journal,
        delivery: Delivery,
        counters: Counters,
        *,
        events_key: Secret | None,
        clock: Callable[[], float],
        health_extra: HealthExtraFn | None,
        health_pace: HealthPaceFn | None = None,
        health_sections: HealthExtraFn | None = None,
    ) -> None:
        self._connection = connection
        self._health_sections = health_sections
        self._journal = journal
        self._delivery = delivery
        self._counters = counters
        self._events_key = events_key
        self._clock = clock
        self._health_extra = health_extra
        self._health_pace = health_pace
        self._interval = connection.settings.delivery.health_interval_s
        self._next_at = 0.0

    def publish_when_due(self, now: float, *, running: bool) -> None:
        """Publish the report if connected and the interval passed (``now``: monotonic)."""
        if now < self._next_at:
            return
        self._next_at = now + self._interval
        if self._connection.connected.is_set():
            payload = encode(signed_message(self.report(running=running), self._events_key))
            self._connection.publish(self._connection.topics.health, payload, retain=True)

    def report(self, *, running: bool) -> dict[str, Any]:
        """Connection, queue depth, oldest undelivered age, counters, journal capacity."""
        now = self._clock()
        capacity = self._journal.capacity()
        oldest = capacity.oldest_undelivered_at
        report: dict[str, Any] = {
            "table_id": self._connection.table_id,
            "ts": now,
            "running": running,
            "connected": self._connection.connected.is_set(),
            "last_error": self._connection.last_error,
            "queue_depth": capacity.undelivered,
            "inflight": self._delivery.window.inflight,
            "oldest_undelivered_age_s": None if oldest is None else now - oldest,
            "last_seq": self._journal.last_seq(),
            "counters": self._counters.as_dict(),
            "journal": {
                "size_bytes": capacity.size_bytes,
                "max_bytes": capacity.max_bytes,
                "full": capacity.full,
                "reason": capacity.reason,
                "admits_new_round": self._journal.admits_new_round(),
            },
        }
        report["delivery"] = {"server_ack": self._delivery.server_ack.report()}
        failing = self._delivery.failing_report()
        if failing is not None:
            report["delivery_failing"] = failing
        if self._health_extra is not None:
            try:
                report["devices"] = self._health_extra()
            except Exception as exc:  # a broken provider must not stop health reports
                report["devices"] = {"error": f"health provider failed: {exc}"}
        if self._health_pace is not None:
            try:
                report["pace"] = self._health_pace()
            except Exception:  # the pace is informational: a broken provider leaves it out
                log.exception("pace provider failed")
        if self._health_sections is not None:
            try:
                report.update(self._health_sections())
            except Exception:  # a broken provider must not stop health reports
                log.exception("health sections provider failed")
        return report
