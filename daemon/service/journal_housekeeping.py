"""Journal housekeeping: compaction, the ``journal_nearly_full`` early warning and the
``journal_full`` alert.

The service calls :meth:`JournalHousekeeping.run` on every turn of its engine loop, which
turns at least every ``service.tick_interval_s``; ``run`` does something only when it is
due:

* every ``broker.delivery.health_interval_s``, the journal's capacity is checked: the first
  check that finds a limit ``journal.warn_fraction`` reached raises a ``journal_nearly_full``
  alert (``warning``, which limit and how far; dealing goes on), the first that finds every
  limit below that fraction again clears it; the first check that finds it full raises a
  ``journal_full`` alert (``critical``, the limit reached and the ``on_full`` policy,
  ``admits_new_round``); the first that finds it below its limits again clears it;
* every ``broker.delivery.compact_interval_s`` (the first time 5 s after the first run), the
  delivered events of finished shoes past the audit retention are deleted
  (:meth:`daemon.journal.store.Journal.compact`).

The alerts are journaled as delivery-side events (see :mod:`daemon.mqtt.alerts`), and
``notify`` (the publisher's) is called after each so it goes out at once. A failing check or
compaction is logged and tried again when next due: it must never stop the engine loop.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from daemon.alerts import AlertCode
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.mqtt.settings import DeliverySettings

log = structlog.get_logger("baccarat_edge.journal_housekeeping")

FIRST_COMPACTION_AFTER_S = 5.0
"""Start-up is busy enough (restoring the engine, draining a backlog): compact a bit later."""


class JournalHousekeeping:
    """Periodic journal care for one table; all calls on one thread. ``settings`` returns the
    delivery settings in force (they change with a reload of the ``broker`` section)."""

    def __init__(
        self,
        journal: Journal,
        settings: Callable[[], DeliverySettings],
        clock: Callable[[], float],
        notify: Callable[[], None],
    ) -> None:
        self._journal = journal
        self._settings = settings
        self._clock = clock
        self._notify = notify
        self._next_check: float | None = None
        self._next_compaction = 0.0
        self.full_alert: str | None = None
        """The id of the open ``journal_full`` alert, None while the journal has room."""
        self.nearly_full_alert: str | None = None
        """The id of the open ``journal_nearly_full`` alert, None while every limit is below
        ``journal.warn_fraction``."""

    def run(self, now: float) -> None:
        """Do what is due at ``now`` (``time.monotonic()`` seconds)."""
        if self._next_check is None:  # the first run: check at once, compact a bit later
            self._next_check = now
            self._next_compaction = now + FIRST_COMPACTION_AFTER_S
        if now >= self._next_check:
            self._next_check = now + self._settings().health_interval_s
            try:
                self._check_capacity()
            except Exception:
                log.exception("journal_capacity_check_failed")
        if now >= self._next_compaction:
            self._next_compaction = now + self._settings().compact_interval_s
            try:
                self._journal.compact()
            except Exception:
                log.exception("journal_compaction_failed")

    def _check_capacity(self) -> None:
        capacity = self._journal.capacity()
        if capacity.warning is not None and self.nearly_full_alert is None:
            alert_id, event = alert_raised(
                AlertCode.JOURNAL_NEARLY_FULL,
                f"{capacity.warning}: make room (restore delivery) before dealing stops",
                {"warn_fraction": self._journal.settings.warn_fraction},
                self._clock(),
            )
            self._journal.append_delivery_event(event)
            self.nearly_full_alert = alert_id
            self._notify()
        if capacity.full and self.full_alert is None:
            alert_id, event = alert_raised(
                AlertCode.JOURNAL_FULL,
                f"{capacity.reason}; policy {self._journal.settings.on_full.value}",
                {"admits_new_round": self._journal.admits_new_round()},
                self._clock(),
            )
            self._journal.append_delivery_event(event)
            self.full_alert = alert_id
            self._notify()
        elif not capacity.full and self.full_alert is not None:
            self._journal.append_delivery_event(
                alert_cleared(
                    self.full_alert, AlertCode.JOURNAL_FULL, "journal below its limits again", self._clock()
                )
            )
            self.full_alert = None
            self._notify()
        if capacity.warning is None and self.nearly_full_alert is not None:
            self._journal.append_delivery_event(
                alert_cleared(
                    self.nearly_full_alert,
                    AlertCode.JOURNAL_NEARLY_FULL,
                    "journal below the early-warning fraction of its limits again",
                    self._clock(),
                )
            )
            self.nearly_full_alert = None
            self._notify()
