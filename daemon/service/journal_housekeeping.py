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
  (:meth:`daemon.journal.store.Journal.compaction_run`). Compaction runs on a thread of its
  own, off the card path: a slice at a time (one short transaction of about 10 ms under the
  journal lock, :mod:`daemon.journal.compaction`), then a pause at least as long, so an append
  waits at most about one slice and the engine thread (and so the watchdog) never waits for
  a whole run, whatever the backlog (a table off for weeks);
* at every check the free space of the journal's file system is measured. Below
  :data:`LOW_SPACE_BYTES` the reserve file (:mod:`daemon.journal.reserve`, written at start
  while there is room) is deleted, so appends go on, and a *tight* compaction starts at once
  (small slices, the WAL truncated after each, so compaction never needs more than a slice's
  worth of disk), again at most every :data:`LOW_SPACE_RETRY_S` while the space stays low.
  When that run ends, a ``journal_disk_low`` alert (``critical``) says how many bytes it freed
  and how many are free; it is cleared (saying the same) once the free space is above the
  mark again, and the reserve is written again.

The alerts are journaled as delivery-side events (see :mod:`daemon.mqtt.alerts`), and
``notify`` (the publisher's) is called after each so it goes out at once. A failing check or
compaction is logged and tried again when next due: it must never stop the engine loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from daemon.alerts import AlertCode
from daemon.journal.compaction import CompactionRun
from daemon.journal.reserve import SpaceReserve, free_bytes
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.mqtt.settings import DeliverySettings

log = structlog.get_logger("baccarat_edge.journal_housekeeping")

FIRST_COMPACTION_AFTER_S = 5.0
"""Start-up is busy enough (restoring the engine, draining a backlog): compact a bit later."""
LOW_SPACE_BYTES = 64 * 1024 * 1024
"""Below this much free space on the journal's file system the disk counts as nearly full."""
RESERVE_BYTES = 8 * 1024 * 1024
"""The reserve file kept beside the journal for appends when the disk fills."""
LOW_SPACE_RETRY_S = 60.0
"""While the disk stays nearly full, a tight compaction is tried again this often."""
PAUSE_MIN_S = 0.002
"""The least pause after a compaction slice (the pause is at least as long as the slice)."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What the last compaction run did (for the disk alert, the health log and benchmarks)."""

    events_deleted: int
    inputs_deleted: int
    pages_freed: int
    slices: int
    longest_slice_s: float
    file_bytes_freed: int
    """The journal file and its WAL, smaller by this much."""
    seconds: float
    tight: bool


class JournalHousekeeping:
    """Periodic journal care for one table; all calls on one thread. ``settings`` returns the
    delivery settings in force (they change with a reload of the ``broker`` section)."""

    def __init__(
        self,
        journal: Journal,
        settings: Callable[[], DeliverySettings],
        clock: Callable[[], float],
        notify: Callable[[], None],
        *,
        low_space_bytes: int = LOW_SPACE_BYTES,
        reserve_bytes: int = RESERVE_BYTES,
    ) -> None:
        self._journal = journal
        self._settings = settings
        self._clock = clock
        self._notify = notify
        self._next_check: float | None = None
        self._next_compaction = 0.0
        self._low_space = low_space_bytes
        self.reserve = SpaceReserve(Path(f"{journal.settings.path}.reserve"), reserve_bytes)
        self._reserve_released = 0
        self._next_tight = 0.0
        self._stop = threading.Event()
        self._compactor: threading.Thread | None = None
        self._reserving: threading.Thread | None = None
        self._run: CompactionRun | None = None
        self._run_started = 0.0
        self._size_before = 0
        self.last_compaction: CompactionReport | None = None
        """What the last finished compaction run did (None before the first)."""
        self.disk_alert: str | None = None
        """The id of the open ``journal_disk_low`` alert, None while the disk has room."""
        self.full_alert: str | None = None
        """The id of the open ``journal_full`` alert, None while the journal has room."""
        self.nearly_full_alert: str | None = None
        """The id of the open ``journal_nearly_full`` alert, None while every limit is below
        ``journal.warn_fraction``."""

    def run(self, now: float) -> None:
        """Do what is due at ``now`` (``time.monotonic()`` seconds). Never blocks on compaction:
        a run goes on on its own thread."""
        if self._next_check is None:  # the first run: check at once, compact a bit later
            self._next_check = now
            self._next_compaction = now + FIRST_COMPACTION_AFTER_S
            self._keep_reserve()
        self._collect()
        if now >= self._next_check:
            self._next_check = now + self._settings().health_interval_s
            try:
                self._check_capacity()
            except Exception:
                log.exception("journal_capacity_check_failed")
            try:
                self._check_disk(now)
            except Exception:
                log.exception("journal_disk_check_failed")
        if now >= self._next_compaction and not self.compacting:
            self._next_compaction = now + self._settings().compact_interval_s
            self._start_compaction(tight=self._disk_low())

    @property
    def compacting(self) -> bool:
        """True while a compaction run goes on on its thread."""
        return self._compactor is not None and self._compactor.is_alive()

    def wait_for_compaction(self, timeout: float) -> bool:
        """Wait until no compaction runs (tools and tests); True when none does, and what the
        run did is then in :attr:`last_compaction`."""
        thread = self._compactor
        if thread is not None:
            thread.join(timeout)
        if self.compacting:
            return False
        self._collect()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """End a running compaction after its current slice (a stop within about one slice)."""
        self._stop.set()
        for thread in (self._compactor, self._reserving):
            if thread is not None:
                thread.join(timeout)

    # -- compaction on its own thread ---------------------------------------------------------

    def _start_compaction(self, *, tight: bool) -> None:
        if self._stop.is_set():
            return
        try:
            run = self._journal.compaction_run(tight=tight)
        except Exception:
            log.exception("journal_compaction_failed")
            return
        self._run = run
        self._run_started = time.monotonic()
        self._size_before = self._journal.size_bytes()
        self._compactor = threading.Thread(
            target=self._compact, args=(run,), name="journal-compaction", daemon=True
        )
        self._compactor.start()

    def _compact(self, run: CompactionRun) -> None:
        """The compaction thread: a slice, then a pause at least as long, until done or stopped."""
        try:
            while not run.done and not self._stop.is_set():
                started = time.perf_counter()
                run.step()
                self._stop.wait(max(PAUSE_MIN_S, time.perf_counter() - started))
        except Exception:
            log.exception("journal_compaction_failed")
        finally:
            self._journal.forget_size()

    def _collect(self) -> None:
        """Once a run's thread has ended: note what it did and follow the disk alert."""
        run = self._run
        if run is None or self.compacting:
            return
        self._run = None
        self._compactor = None
        report = CompactionReport(
            events_deleted=run.events_deleted,
            inputs_deleted=run.inputs_deleted,
            pages_freed=run.pages_freed,
            slices=run.slices,
            longest_slice_s=run.longest_slice_s,
            file_bytes_freed=max(0, self._size_before - self._journal.size_bytes()),
            seconds=time.monotonic() - self._run_started,
            tight=run.tight,
        )
        self.last_compaction = report
        if report.events_deleted or report.inputs_deleted:
            log.info(
                "journal_compacted",
                events=report.events_deleted,
                inputs=report.inputs_deleted,
                bytes_freed=report.file_bytes_freed,
                slices=report.slices,
                longest_slice_ms=round(report.longest_slice_s * 1000, 1),
                seconds=round(report.seconds, 2),
                tight=report.tight,
            )
        if report.tight or self.disk_alert is not None:
            try:
                self._follow_disk_alert(report)
            except Exception:
                log.exception("journal_disk_alert_failed")

    # -- the disk -------------------------------------------------------------------------------

    def _free(self) -> int:
        return free_bytes(self._journal.settings.path)

    def _disk_low(self) -> bool:
        return self._free() < self._low_space

    def _keep_reserve(self) -> None:
        """Write the reserve when it is missing, on a thread of its own (megabytes and an fsync
        have no place on the engine thread)."""
        if self.reserve.held() >= self.reserve.size or self._stop.is_set():
            return
        if self._free() < self._low_space + 2 * self.reserve.size:  # would be low again at once
            return
        if self._reserving is not None and self._reserving.is_alive():
            return
        self._reserving = threading.Thread(target=self._write_reserve, name="journal-reserve", daemon=True)
        self._reserving.start()

    def _write_reserve(self) -> None:
        try:
            self.reserve.ensure()
        except OSError as exc:
            log.warning("journal_reserve_not_written", path=str(self.reserve.path), error=str(exc))

    def _check_disk(self, now: float) -> None:
        """Nearly full: give the reserve to the appends and compact in small steps at once."""
        if not self._disk_low():
            if self.disk_alert is not None:
                self._clear_disk_alert()
            self._keep_reserve()
            return
        released = self.reserve.release()
        if released:
            self._reserve_released += released
            log.warning("journal_reserve_released", bytes=released, free_bytes=self._free())
        if not self.compacting and now >= self._next_tight:
            self._next_tight = now + LOW_SPACE_RETRY_S
            self._start_compaction(tight=True)

    def _follow_disk_alert(self, report: CompactionReport) -> None:
        free = self._free()
        if free >= self._low_space:
            if self.disk_alert is not None:
                self._clear_disk_alert()
            self._keep_reserve()
            return
        what = self._freed_and_left(free)
        if self.disk_alert is None:
            alert_id, event = alert_raised(
                AlertCode.JOURNAL_DISK_LOW,
                f"the journal's file system is nearly full: {what}; make room on it",
                {
                    "free_bytes": free,
                    "freed_bytes": report.file_bytes_freed,
                    "reserve_bytes_released": self._reserve_released,
                },
                self._clock(),
            )
            self._journal.append_delivery_event(event)
            self.disk_alert = alert_id
            self._notify()

    def _freed_and_left(self, free: int) -> str:
        freed = 0 if self.last_compaction is None else self.last_compaction.file_bytes_freed
        return f"compaction freed {freed} bytes; {free} bytes are free on the journal's file system"

    def _clear_disk_alert(self) -> None:
        assert self.disk_alert is not None
        what = self._freed_and_left(self._free())
        self._journal.append_delivery_event(
            alert_cleared(self.disk_alert, AlertCode.JOURNAL_DISK_LOW, f"room again: {what}", self._clock())
        )
        self.disk_alert = None
        self._reserve_released = 0
        self._notify()

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
