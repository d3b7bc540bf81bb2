"""Storing the engine's inputs and events: append retried until stored, outage reported.

* A failed journal append (disk full, I/O error) is retried with backoff (50 ms → 2 s) on
  the engine thread, with the *same* input and events, until it succeeds: the engine
  already holds the state those events describe and nothing else touches it meanwhile,
  so the engine and the journal never disagree once the append lands. The engine keeps
  beating the watchdog while it retries (a restart would lose the queue).
* While appends fail nothing can be journaled, so the event stream cannot say so: once
  an input is stored again, one ``journal_recovered`` alert puts the outage in the stream
  (:meth:`JournalWriter.report_outage_when_due`). Should that append fail too, it is
  retried after the next stored input (or an idle second) and a new failing spell
  meanwhile is folded into the same report.
* Only at shutdown does the retry give up (:meth:`JournalWriter.give_up_at`): from then
  on nothing is stored and every input is logged (``input_not_stored``).
* Every event the daemon journals is logged once stored, by ``event_id`` (:func:`log_event`,
  :class:`LoggedJournal` for the delivery side's own events).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from common.backoff import Backoff
from common.inputs import EngineInput
from daemon.alerts import AlertCode
from daemon.engine.events import Event
from daemon.engine.squeeze import public_data
from daemon.journal.faults import classify_storage_error
from daemon.journal.records import DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_raised
from daemon.service.stats import RunnerStats

log = structlog.get_logger("baccarat_edge.runner")

JOURNAL_RETRY_INITIAL_S = 0.05
JOURNAL_RETRY_MAX_S = 2.0
OUTAGE_REPORT_RETRY_S = 1.0
"""How often an idle engine thread retries journaling a ``journal_recovered`` alert that failed."""


@dataclass(slots=True)
class JournalOutage:
    """A spell of failing journal appends, reported as one alert once the journal works again.

    While it lasts nothing can be journaled (so nothing published): only the log and health
    know. When an input is stored again the outage becomes ``recovered``; the alert that
    tells the stream is journaled next. Should that append fail too, the outage stays open
    and a later failing spell is folded into the same report.
    """

    since_wall: float
    since_mono: float
    errors_before: int
    first_error: str
    until_mono: float | None = None
    inputs_waited: int = 0
    spells: int = 1

    @property
    def recovered(self) -> bool:
        return self.until_mono is not None


class JournalWriter:
    """The engine thread's way into the journal (engine thread only, except :meth:`give_up_at`)."""

    def __init__(
        self,
        journal: Journal,
        stats: RunnerStats,
        clock: Callable[[], float],
        notify: Callable[[], None],
        inputs_queued: Callable[[], int],
    ) -> None:
        """``notify`` wakes the publisher; ``inputs_queued`` counts the inputs waiting behind
        the one being stored (for the outage report)."""
        self.journal = journal
        self.stats = stats
        self._clock = clock
        self._notify = notify
        self._inputs_queued = inputs_queued
        self.beat: Callable[[], None] = lambda: None
        """The engine thread's watchdog heartbeat: retrying is progress."""
        self.failing_since: float | None = None
        """``time.monotonic()`` of the first failed append of the current spell."""
        self.abandoned = False
        """Shutdown gave up on a failing journal: nothing more is stored."""
        self._outage: JournalOutage | None = None  # not yet reported in the event stream
        self._outage_report_tried = 0.0
        self._stopping = threading.Event()
        self._give_up_at = float("inf")

    def give_up_at(self, deadline: float) -> None:
        """Shutdown: stop retrying a failing append at ``deadline`` (``time.monotonic()``)."""
        self._give_up_at = deadline
        self._stopping.set()

    def store(self, inp: EngineInput, events: list[Event]) -> list[JournaledEvent] | None:
        """Append until the journal takes it; None only when shutdown gave up on it.

        The same input and events are retried: the engine already moved on by them and
        nothing else touches it until they are stored, so it never disagrees with the journal.
        """
        backoff: Backoff | None = None
        while True:
            try:
                journaled = self.journal.append([inp], events)
            except Exception as exc:
                self.stats.journal_errors += 1
                if backoff is None:
                    backoff = Backoff(JOURNAL_RETRY_INITIAL_S, JOURNAL_RETRY_MAX_S)
                    if self.failing_since is None:
                        self.failing_since = time.monotonic()
                        self._outage_started(str(exc))
                        fault = classify_storage_error(exc)
                        log.error(
                            "journal_failing",
                            input=type(inp).__name__,
                            error=str(exc),
                            fault=fault.kind.value,
                            hint=f"inputs wait in memory and are retried; {fault.hint}",
                        )
                if time.monotonic() >= self._give_up_at:
                    # the engine moved on by this input: storing any later one would journal
                    # events the journal cannot explain, so every later one is refused too
                    self.abandoned = True
                    self.not_stored(inp, str(exc))
                    return None
                self.beat()  # retrying is progress: a restart would lose the queue
                self._stopping.wait(min(backoff.next_delay(), max(0.0, self._give_up_at - time.monotonic())))
                continue
            if self.failing_since is not None:
                log.warning(
                    "journal_recovered",
                    failing_for_s=round(time.monotonic() - self.failing_since, 3),
                    errors=self.stats.journal_errors,
                )
                self.failing_since = None
                if self._outage is not None:
                    self._outage.until_mono = time.monotonic()
                    # the engine thread was stuck on this input: nothing left the queue meanwhile
                    waited = 1 + self._inputs_queued()
                    self._outage.inputs_waited = max(self._outage.inputs_waited, waited)
            return journaled

    def _outage_started(self, error: str) -> None:
        if self._outage is None:
            self._outage = JournalOutage(
                since_wall=self._clock(),
                since_mono=time.monotonic(),
                errors_before=self.stats.journal_errors - 1,
                first_error=error,
            )
        else:  # the last outage's report is not journaled yet: one report for both
            self._outage.until_mono = None
            self._outage.spells += 1

    def report_outage_when_due(self, *, idle_tick: bool) -> None:
        """After a stored input, or on an idle tick at most every OUTAGE_REPORT_RETRY_S."""
        if self._outage is None or not self._outage.recovered:
            return
        if idle_tick and time.monotonic() - self._outage_report_tried < OUTAGE_REPORT_RETRY_S:
            return
        self._report_outage()

    def _report_outage(self) -> None:
        """Journal one ``journal_recovered`` alert for a journal outage that is over.

        Engine thread only, after an input was stored again. The alert is a report of
        something past: it is never cleared (like ``mqtt_dead_letter``).
        """
        outage = self._outage
        if outage is None or outage.until_mono is None or self.abandoned:
            return
        self._outage_report_tried = time.monotonic()
        failed_for = round(outage.until_mono - outage.since_mono, 3)
        errors = self.stats.journal_errors - outage.errors_before
        _alert_id, event = alert_raised(
            AlertCode.JOURNAL_RECOVERED,
            f"the journal could not store anything for {failed_for:.1f} s "
            f"({outage.first_error}); {outage.inputs_waited} input(s) waited in memory and were "
            "then stored in the order they arrived: nothing was lost, events of that time were "
            "published late",
            {
                "failed_since": outage.since_wall,
                "failed_for_s": failed_for,
                "inputs_waited": outage.inputs_waited,
                "failed_appends": errors,
                "spells": outage.spells,
                "error": outage.first_error,
            },
            self._clock(),
        )
        try:
            self.journal.append_delivery_event(event)
        except Exception as exc:  # tried again after the next stored input or idle second
            self.stats.journal_errors += 1
            log.error(
                "journal_write_failed", kind="alert_raised", error=str(exc), code=AlertCode.JOURNAL_RECOVERED
            )
            return
        self._outage = None
        self._notify()

    def not_stored(self, inp: EngineInput, why: str) -> None:
        """Shutdown with a failing journal: the input is lost, so the log keeps all of it."""
        self.stats.inputs_not_stored += 1
        log.error("input_not_stored", input=type(inp).__name__, body=repr(inp), reason=why)

    def store_for_audit(self, inp: EngineInput) -> None:
        """An input the engine failed on: journaled without events (once; a failure is logged)."""
        try:
            self.journal.append([inp], [])
        except Exception as journal_exc:
            log.error("journal_write_failed", input=type(inp).__name__, error=str(journal_exc))

    def raise_alert(self, code: AlertCode, message: str, fields: dict[str, Any]) -> None:
        """Journal (and so log, with its event_id) an alert of the service's own
        (:func:`daemon.alerts.raised_alert`), then publish it."""
        _alert_id, event = alert_raised(code, message, fields, self._clock())
        try:
            self.journal.append_delivery_event(event)
        except Exception as exc:  # not in the stream: the log keeps all of it
            self.stats.journal_errors += 1
            log.error("journal_write_failed", kind=event.kind, error=str(exc), **log_fields(event.data))
            return
        self._notify()


_RESERVED_LOG_KEYS = frozenset(
    {"event", "level", "timestamp", "logger", "event_id", "seq", "shoe_id", "hand", "kind", "exc_info"}
)


def log_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Event data as log fields; keys that would clash with the envelope's get a ``data_`` prefix.
    A squeeze table's sealed cards are left out (``public_data``): a log line shows what the
    players may see."""
    return {(f"data_{k}" if k in _RESERVED_LOG_KEYS else k): v for k, v in public_data(data).items()}


def log_event(event: JournaledEvent) -> None:
    """One log line per journaled event, with ``event_id`` and ``seq``: traceable from the broker.

    Alerts are logged at warning level (journald priority 4), everything else at info.
    """
    try:
        emit = log.warning if event.kind == "alert_raised" else log.info
        emit(
            event.kind,
            event_id=event.event_id,
            seq=event.seq,
            shoe_id=event.shoe_id,
            hand=event.hand,
            **log_fields(event.data),
        )
    except Exception as exc:  # a log line must never stop the thread that stored the event
        log.error("log_failed", kind=event.kind, seq=event.seq, error=str(exc))


class LoggedJournal(Journal):
    """The journal, logging every delivery-side event it stores (the publisher's alerts and
    refused commands, the service's own alerts) like the engine's: by ``event_id``."""

    def append_delivery_event(self, event: DeliveryEvent) -> JournaledEvent:
        journaled = super().append_delivery_event(event)
        log_event(journaled)
        return journaled
