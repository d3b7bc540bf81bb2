"""The daemon process: one input queue, one engine thread, journal before publish.

::

    reader/camera threads ─┐                        ┌─> journal (fsync) ─> publisher
    MQTT commands ─────────┼─> queue ─> engine thread┤
    clock ticks (timeout) ─┘                        └─> retained state snapshot

* The engine thread is the only code that touches the engine. For every input it
  asks the engine for events, appends input and events to the journal in one
  transaction, and only then wakes the publisher.
* The queue is unbounded: no input is ever dropped (a dealer makes a few per second;
  ``service.input_queue_max`` is only the depth at which a warning is logged).
* A failed journal append (disk full, I/O error) is retried with backoff on the engine
  thread, with the *same* input and events, until it succeeds: the engine already
  holds the state those events describe and nothing else touches it meanwhile, so
  the engine and the journal never disagree once the append lands. Readers keep
  queueing; health shows ``journal_failing`` and the inputs waiting; once it works again
  one ``journal_recovered`` alert puts the outage in the event stream. Only at shutdown
  does the retry give up, logging every input it could not store.
* The journal's capacity reaches the engine as ``StorageState`` inputs on
  transitions (full / has room), checked before any card that could open a round
  and on idle ticks: the engine itself refuses a card that would open a round while
  the journal is full (``card_refused`` + alert) and lets the round in progress finish.
* ``lock``/``unlock`` are engine commands like any other (journaled); the reader I/O
  happens on :class:`~daemon.service.reader_commands.ReaderCommandWorker` and its
  result comes back as a journaled input before the supervisor's reply goes out.
* Start-up folds the journal into a fresh engine, so a restart resumes the shoe.
* READY goes to systemd once devices, journal and engine are up (the broker may be
  away: the journal holds everything until it is back). WATCHDOG pings go out only
  while every worker shows progress.
* SIGTERM: stop the drivers (devices closed), let the engine drain what was read,
  let the publisher flush within ``shutdown_timeout_s`` and publish ``offline``.
* SIGHUP: re-read the config; apply what can change in place (``config.RELOADABLE``)
  and log which changed settings need a restart.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from common.backoff import Backoff
from common.inputs import CardRead, EngineInput, StorageState, SupervisorCommand, Tick
from daemon.engine.events import ROUND_BOUNDARY_KINDS, Event
from daemon.journal.records import DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.settings import BrokerSettings
from daemon.rules.variants import load_variant_by_name
from daemon.service.config import (
    RELOADABLE,
    LoadedConfig,
    changed_sections,
    device_name,
    load_config,
    rotated_secrets,
)
from daemon.service.configfile import ConfigError
from daemon.service.journal_housekeeping import JournalHousekeeping
from daemon.service.liveness import Liveness
from daemon.service.logging import configure_logging
from daemon.service.reader_commands import ReaderCommandWorker, ReaderRequest
from daemon.service.sdnotify import SystemdNotifier

log = structlog.get_logger("baccarat_edge.runner")

Clock = Callable[[], float]
ReplyFn = Callable[..., None]


@dataclass(frozen=True, slots=True)
class _Command:
    command: SupervisorCommand
    reply: ReplyFn


class _Stop:
    """Sentinel: the engine thread drains the queue up to here, then exits."""


@dataclass(frozen=True, slots=True)
class _Barrier:
    """Set once the engine thread has handled every item queued before it."""

    reached: threading.Event


QueueItem = EngineInput | _Command | _Stop | _Barrier

JOURNAL_RETRY_INITIAL_S = 0.05
JOURNAL_RETRY_MAX_S = 2.0
STORAGE_CHECK_INTERVAL_S = 1.0
"""How often an idle engine thread re-checks the journal's capacity (a card checks at once)."""
OUTAGE_REPORT_RETRY_S = 1.0
"""How often an idle engine thread retries journaling a ``journal_recovered`` alert that failed."""
JOURNAL_RECOVERED_ALERT = "journal_recovered"


@dataclass(slots=True)
class _JournalOutage:
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


@dataclass(slots=True)
class RunnerStats:
    """Counters reported in health and in the demo's summary."""

    inputs: int = 0
    processed: int = 0
    events: int = 0
    commands: int = 0
    journal_errors: int = 0
    engine_errors: int = 0
    storage_transitions: int = 0
    inputs_not_stored: int = 0  # only at shutdown with a failing journal, each one logged
    queue_depth_warnings: int = 0
    started_at: float = 0.0
    events_by_kind: dict[str, int] = field(default_factory=dict)


class Daemon:
    """Wires drivers, engine, journal and publisher for one table."""

    def __init__(
        self,
        loaded: LoadedConfig,
        notifier: SystemdNotifier | None = None,
        clock: Clock = time.time,
        config_path: Path | None = None,
        on_events: Callable[[list[JournaledEvent]], None] | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.config_path = config_path
        self._secret_digests = dict(loaded.secret_digests)  # of the secrets the publisher runs with
        self.notifier = notifier or SystemdNotifier()
        self.clock = clock
        self.on_events = on_events
        self.stats = RunnerStats()
        self.queue: queue.Queue[QueueItem] = queue.Queue()  # unbounded: an input is never dropped
        self.liveness = Liveness(self.config.service.watchdog_stall_s, time.monotonic)
        self.stop_requested = threading.Event()
        self.reload_requested = threading.Event()
        self.engine_done = threading.Event()
        self.journal: Journal | None = None
        self.engine: Any = None
        self.publisher: Any = None
        self.drivers: dict[str, Any] = {}
        self._engine_thread: threading.Thread | None = None
        self._engine_beat: Callable[[], None] = lambda: None
        self._snapshot: dict[str, Any] = {}
        self._snapshot_lock = threading.Lock()
        self._snapshot_stale = False
        self._snapshot_due_at = 0.0
        self.reader_commands = ReaderCommandWorker(lambda: self.drivers, self.submit, self.clock)
        self._queue_deep = False
        self._journal_failing_since: float | None = None
        self._outage: _JournalOutage | None = None  # not yet reported in the event stream
        self._outage_report_tried = 0.0
        self._storage_full = False
        self._storage_checked = 0.0
        self._stopping = threading.Event()
        self._give_up_at = float("inf")
        self._abandoned = False  # shutdown gave up on a failing journal: nothing more is stored
        self.insecure_broker_settings: list[str] = []
        """What check-config would flag as insecure in the broker settings in use (health, log)."""

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        """Open the journal, restore the engine, start publisher, engine thread and drivers."""
        from daemon.engine.table import Engine

        cfg = self.config
        self.stats.started_at = self.clock()
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        self.journal = LoggedJournal(cfg.journal, cfg.table_id, clock=self.clock)
        history = [Event.from_dict(e.body) for e in self.journal.events()]
        self.engine = Engine.restore(cfg.table, self.loaded.variant, history, load_variant_by_name)
        self._storage_full = bool(self.engine.state.storage_full)
        self._set_snapshot(self.engine.snapshot())
        log.info(
            "engine_restored",
            table_id=cfg.table_id,
            events=len(history),
            last_seq=self.journal.last_seq(),
        )
        self._warn_if_insecure(cfg.broker)
        self.publisher = self._make_publisher()
        self.publisher.start()
        self._register_probe("publisher", self.publisher)
        self._engine_beat = self.liveness.register_heartbeat("engine")
        self._engine_thread = threading.Thread(target=self._engine_loop, name="engine", daemon=True)
        self._engine_thread.start()
        self.reader_commands.start()
        self._register_probe("reader_commands", self.reader_commands)
        self._start_drivers()
        self.notifier.ready(status=f"table {cfg.table_id}: {len(self.drivers)} device(s), journal open")
        log.info("daemon_ready", table_id=cfg.table_id, devices=sorted(self.drivers))

    def _warn_if_insecure(self, settings: BrokerSettings) -> None:
        """Log (and keep for health) every insecure broker setting check-config refuses by default.

        ``run`` still starts (a lab bench may need it), but never silently.
        """
        from daemon.service.probes import insecure_settings

        self.insecure_broker_settings = insecure_settings(settings)
        for problem in self.insecure_broker_settings:
            log.warning("insecure_broker_setting", problem=problem, host=settings.host)

    def _make_publisher(self, settings: BrokerSettings | None = None) -> Any:
        from daemon.mqtt.publisher import Publisher

        assert self.journal is not None
        return Publisher(
            settings=settings or self.config.broker,
            table_id=self.config.table_id,
            journal=self.journal,
            on_command=self.submit_command,
            snapshot=self.snapshot,
            health_extra=self._devices_health,
            clock=self.clock,
        )

    def _start_drivers(self) -> None:
        from drivers.registry import load

        cfg = self.config
        for section, settings in zip(cfg.readers, self.loaded.reader_settings, strict=True):
            name = device_name(settings, section.driver)
            self.drivers[name] = load(section.driver).build(settings, self.sink_for(name), self.clock)
        if cfg.camera is not None and self.loaded.camera_settings is not None:
            name = device_name(self.loaded.camera_settings, "camera")
            self.drivers[name] = load("camera").build(
                self.loaded.camera_settings, self.sink_for(name), self.clock
            )
        for name, driver in self.drivers.items():
            driver.start()
            self._register_probe(name, driver)

    def _register_probe(self, name: str, worker: Any) -> None:
        """Watch ``worker`` through its ``last_progress()`` when it has one, else its threads.

        ``last_progress()`` (reader drivers, the publisher, the reader-command worker) is the
        ``time.monotonic()`` of its loop's last turn, or None when not running: a loop blocked
        in a read, a sink or a socket stops advancing it and the worker counts as stalled
        after ``watchdog_stall_s`` although its thread lives.

        A worker without it (the camera) shows progress only in the weaker sense that its
        thread(s) live and its ``health()`` answers (it takes the worker's own lock, so a
        deadlock on that lock stalls the main loop and no ping goes out); a loop blocked
        elsewhere in such a worker is not detected. A worker with a
        ``running`` property and no ``last_progress`` is asked only that (a ``health()``
        that is a costly report is not called several times a second).
        """
        last_progress = getattr(worker, "last_progress", None)
        if callable(last_progress):
            self.liveness.register(name, last_progress)
            return

        def probe() -> float | None:
            running = getattr(type(worker), "running", None)
            if isinstance(running, property):
                return time.monotonic() if bool(worker.running) else None
            health = worker.health()
            if "running" in health:
                alive = bool(health["running"])
            else:
                threads = _threads_of(worker)
                alive = all(t.is_alive() for t in threads) if threads else True
            return time.monotonic() if alive else None

        self.liveness.register(name, probe)

    # ------------------------------------------------------------------ inputs
    def sink_for(self, device: str) -> Callable[[EngineInput], None]:
        """The callable a driver feeds its inputs to (thread-safe, never blocks the driver long)."""

        def sink(inp: EngineInput) -> None:
            self.submit(inp)

        return sink

    def submit(self, inp: EngineInput) -> None:
        """Queue one input for the engine (any thread; never blocks, never drops)."""
        self._put(inp)

    def submit_command(self, command: SupervisorCommand, reply: ReplyFn) -> None:
        """Called by the publisher's network thread for every verified command (lock/unlock too)."""
        self._put(_Command(command, reply))

    def _put(self, item: QueueItem) -> None:
        self.queue.put(item)
        deep = self.queue.qsize() >= self.config.service.input_queue_max
        if deep != self._queue_deep:  # log once per crossing, not per input
            self._queue_deep = deep
            if deep:
                self.stats.queue_depth_warnings += 1
                log.warning(
                    "input_queue_deep", depth=self.queue.qsize(), warn_at=self.config.service.input_queue_max
                )
            else:
                log.info("input_queue_normal", depth=self.queue.qsize())

    def wait_until_processed(self, timeout: float) -> bool:
        """True once the engine thread has handled everything queued before this call.

        A barrier for tests and tools: no sleeping and hoping the last input was handled.
        """
        reached = threading.Event()
        self._put(_Barrier(reached))
        return reached.wait(timeout)

    # ------------------------------------------------------------------ engine thread
    def _engine_loop(self) -> None:
        tick = self.config.service.tick_interval_s
        assert self.journal is not None
        housekeeping = JournalHousekeeping(
            self.journal, lambda: self.config.broker.delivery, self.clock, lambda: self.publisher.notify()
        )
        try:
            while True:
                self._engine_beat()
                try:
                    item: QueueItem = self.queue.get(timeout=tick)
                except queue.Empty:
                    item = Tick(at=self.clock())
                if isinstance(item, _Stop):
                    break
                if isinstance(item, _Barrier):
                    item.reached.set()
                    continue
                self._update_storage_state(item)
                self._step(item)
                self._report_outage_when_due(item)
                housekeeping.run(time.monotonic())
                if not isinstance(item, Tick):
                    self.stats.processed += 1
                if self._snapshot_stale and time.monotonic() >= self._snapshot_due_at:
                    self._refresh_snapshot()
        finally:
            if self._snapshot_stale:
                self._refresh_snapshot()  # the publisher's final state on stop
            self.engine_done.set()

    def _step(self, item: EngineInput | _Command) -> None:
        assert self.journal is not None
        inp: EngineInput = item.command if isinstance(item, _Command) else item
        if self._abandoned:
            if not isinstance(inp, Tick):
                self._not_stored(inp, "an earlier input could not be stored")
            if isinstance(item, _Command):
                item.reply(False, "the journal could not store the command (daemon stopping)")
            return
        try:
            events: list[Event] = self.engine.handle(inp)
        except Exception as exc:
            self._engine_failed(inp, exc)
            if isinstance(item, _Command):
                item.reply(False, f"the engine failed on this command: {exc}")
            return
        if isinstance(inp, Tick) and not events:
            return  # idle ticks are not worth a journal row
        journaled = self._store(inp, events)
        if journaled is None:
            if isinstance(item, _Command):
                item.reply(False, "the journal could not store the command (daemon stopping)")
            return
        self.stats.inputs += 1
        self.stats.events += len(journaled)
        for event in journaled:
            self.stats.events_by_kind[event.kind] = self.stats.events_by_kind.get(event.kind, 0) + 1
            log_event(event)
        if events:
            self._snapshot_stale = True
            if any(event.kind in ROUND_BOUNDARY_KINDS for event in events):
                self._refresh_snapshot()  # the publisher sends state at once after a boundary
        self.publisher.notify()
        if isinstance(item, _Command):
            self.stats.commands += 1
            self._answer(item, journaled)
        if self.on_events is not None and journaled:
            self.on_events(journaled)

    def _answer(self, item: _Command, journaled: list[JournaledEvent]) -> None:
        """Reply now, or once the reader carried out an accepted lock/unlock."""
        answer = _answer_for(item.command, journaled)
        requested = any(
            e.kind == "reader_command_requested" and e.data.get("command_id") == item.command.command_id
            for e in journaled
        )
        if answer["accepted"] and requested:
            self.reader_commands.request(ReaderRequest(item.command, item.reply, answer))
        else:
            item.reply(answer)

    def _store(self, inp: EngineInput, events: list[Event]) -> list[JournaledEvent] | None:
        """Append until the journal takes it; None only when shutdown gave up on it.

        The same input and events are retried: the engine already moved on by them and
        nothing else touches it until they are stored, so it never disagrees with the journal.
        """
        assert self.journal is not None
        backoff: Backoff | None = None
        while True:
            try:
                journaled = self.journal.append([inp], events)
            except Exception as exc:
                self.stats.journal_errors += 1
                if backoff is None:
                    backoff = Backoff(JOURNAL_RETRY_INITIAL_S, JOURNAL_RETRY_MAX_S)
                    if self._journal_failing_since is None:
                        self._journal_failing_since = time.monotonic()
                        self._outage_started(str(exc))
                        log.error(
                            "journal_failing",
                            input=type(inp).__name__,
                            error=str(exc),
                            hint="inputs wait in memory and are retried; free disk space",
                        )
                if time.monotonic() >= self._give_up_at:
                    # the engine moved on by this input: storing any later one would journal
                    # events the journal cannot explain, so every later one is refused too
                    self._abandoned = True
                    self._not_stored(inp, str(exc))
                    return None
                self._engine_beat()  # retrying is progress: a restart would lose the queue
                self._stopping.wait(min(backoff.next_delay(), max(0.0, self._give_up_at - time.monotonic())))
                continue
            if self._journal_failing_since is not None:
                log.warning(
                    "journal_recovered",
                    failing_for_s=round(time.monotonic() - self._journal_failing_since, 3),
                    errors=self.stats.journal_errors,
                )
                self._journal_failing_since = None
                if self._outage is not None:
                    self._outage.until_mono = time.monotonic()
                    # the engine thread was stuck on this input: nothing left the queue meanwhile
                    waited = 1 + self._inputs_queued()
                    self._outage.inputs_waited = max(self._outage.inputs_waited, waited)
            return journaled

    def _inputs_queued(self) -> int:
        """Inputs and commands in the queue (not the barriers and stop markers among them)."""
        with self.queue.mutex:
            return sum(1 for item in self.queue.queue if not isinstance(item, _Barrier | _Stop))

    def _outage_started(self, error: str) -> None:
        if self._outage is None:
            self._outage = _JournalOutage(
                since_wall=self.clock(),
                since_mono=time.monotonic(),
                errors_before=self.stats.journal_errors - 1,
                first_error=error,
            )
        else:  # the last outage's report is not journaled yet: one report for both
            self._outage.until_mono = None
            self._outage.spells += 1

    def _report_outage_when_due(self, item: QueueItem) -> None:
        """After a stored input, or on an idle tick at most every OUTAGE_REPORT_RETRY_S."""
        if self._outage is None or not self._outage.recovered:
            return
        if isinstance(item, Tick) and time.monotonic() - self._outage_report_tried < OUTAGE_REPORT_RETRY_S:
            return
        self._report_outage()

    def _report_outage(self) -> None:
        """Journal one ``journal_recovered`` alert for a journal outage that is over.

        Engine thread only, after an input was stored again. The alert is a report of
        something past: it is never cleared (like ``mqtt_dead_letter``).
        """
        outage = self._outage
        if outage is None or outage.until_mono is None or self._abandoned:
            return
        assert self.journal is not None
        self._outage_report_tried = time.monotonic()
        failed_for = round(outage.until_mono - outage.since_mono, 3)
        errors = self.stats.journal_errors - outage.errors_before
        data = {
            "alert_id": f"journal-{uuid.uuid4().hex[:12]}",
            "code": JOURNAL_RECOVERED_ALERT,
            "severity": "warning",
            "message": f"the journal could not store anything for {failed_for:.1f} s "
            f"({outage.first_error}); {outage.inputs_waited} input(s) waited in memory and were "
            "then stored in the order they arrived: nothing was lost, events of that time were "
            "published late",
            "failed_since": outage.since_wall,
            "failed_for_s": failed_for,
            "inputs_waited": outage.inputs_waited,
            "failed_appends": errors,
            "spells": outage.spells,
            "error": outage.first_error,
        }
        try:
            self.journal.append_delivery_event(DeliveryEvent(kind="alert_raised", at=self.clock(), data=data))
        except Exception as exc:  # tried again after the next stored input or idle second
            self.stats.journal_errors += 1
            log.error(
                "journal_write_failed", kind="alert_raised", error=str(exc), code=JOURNAL_RECOVERED_ALERT
            )
            return
        self._outage = None
        self.publisher.notify()

    def _not_stored(self, inp: EngineInput, why: str) -> None:
        """Shutdown with a failing journal: the input is lost, so the log keeps all of it."""
        self.stats.inputs_not_stored += 1
        log.error("input_not_stored", input=type(inp).__name__, body=repr(inp), reason=why)

    def _update_storage_state(self, item: QueueItem) -> None:
        """Tell the engine when the journal filled up or has room again.

        Checked before a card (a read, or a supervisor's ``assign_card``) only when it could
        open a round (mid-round cards are admitted anyway, and the check must not cost every
        card) or while the engine believes the journal full; on idle ticks at most every
        STORAGE_CHECK_INTERVAL_S.
        """
        assert self.journal is not None
        if self._abandoned:
            return
        places_card = isinstance(item, CardRead) or (
            isinstance(item, _Command) and item.command.action == "assign_card"
        )
        if places_card:
            if not self._storage_full and _mid_round(self.engine):
                return
        elif isinstance(item, Tick):
            if time.monotonic() - self._storage_checked < STORAGE_CHECK_INTERVAL_S:
                return
        else:
            return
        self._storage_checked = time.monotonic()
        try:
            full = not self.journal.admits_new_round()
        except Exception as exc:  # a capacity check that fails is no reason to stop dealing
            log.error("journal_capacity_check_failed", error=str(exc))
            return
        if full == self._storage_full:
            return
        self._storage_full = full
        self.stats.storage_transitions += 1
        detail = None
        if full:
            try:
                detail = self.journal.capacity().reason
            except Exception as exc:
                detail = f"capacity unknown: {exc}"
        log.warning("journal_storage_state", full=full, detail=detail)
        self._step(StorageState(full=full, at=self.clock(), detail=detail))

    def _delivery_event(self, kind: str, data: dict[str, Any]) -> None:
        """Journal (and so log, with its event_id) an event of the service's own, then publish it."""
        assert self.journal is not None
        event = DeliveryEvent(kind=kind, at=self.clock(), data=data)
        try:
            self.journal.append_delivery_event(event)
        except Exception as exc:  # not in the stream: the log keeps all of it
            self.stats.journal_errors += 1
            log.error("journal_write_failed", kind=kind, error=str(exc), **_log_fields(data))
            return
        self.publisher.notify()

    def _engine_failed(self, inp: EngineInput, exc: Exception) -> None:
        """A bug in the engine must not stop the table: keep the input for audit, rebuild, go on."""
        self.stats.engine_errors += 1
        log.exception("engine_failed", input=type(inp).__name__, error=str(exc))
        assert self.journal is not None
        try:
            self.journal.append([inp], [])
        except Exception as journal_exc:
            log.error("journal_write_failed", input=type(inp).__name__, error=str(journal_exc))
        self._rebuild_engine()
        self._delivery_event(
            "alert_raised",
            {
                "alert_id": f"engine-error-{self.stats.engine_errors}",
                "code": "engine_error",
                "message": f"the engine failed on a {type(inp).__name__} input; it was journaled for "
                "audit and not applied; the table state was rebuilt from the journal",
                "error": str(exc),
            },
        )

    def _rebuild_engine(self) -> None:
        from daemon.engine.table import Engine

        assert self.journal is not None
        history = [Event.from_dict(e.body) for e in self.journal.events()]
        self.engine = Engine.restore(self.config.table, self.loaded.variant, history, load_variant_by_name)
        self._storage_full = bool(self.engine.state.storage_full)
        self._set_snapshot(self.engine.snapshot())

    # ------------------------------------------------------------------ views
    def _set_snapshot(self, snapshot: dict[str, Any]) -> None:
        with self._snapshot_lock:
            self._snapshot = snapshot

    def _refresh_snapshot(self) -> None:
        """Engine thread only. A snapshot costs far more than a card (0.4 ms mid-shoe), and the
        publisher sends state at most every ``state_interval_s`` or after a boundary, so it is
        rebuilt only then rather than after every input."""
        self._set_snapshot(self.engine.snapshot())
        self._snapshot_stale = False
        self._snapshot_due_at = time.monotonic() + self.config.broker.delivery.state_interval_s

    def snapshot(self) -> dict[str, Any]:
        """The latest engine snapshot (thread-safe: the publisher retains it)."""
        with self._snapshot_lock:
            return self._snapshot

    def _devices_health(self) -> dict[str, Any]:
        """The devices part of the published health report (the publisher adds its own)."""
        report: dict[str, Any] = {name: _safe_health(d) for name, d in self.drivers.items()}
        report["engine"] = self._engine_health()
        return report

    def _engine_health(self) -> dict[str, Any]:
        failing_since = self._journal_failing_since
        depth = self.queue.qsize()
        return {
            "queue_depth": depth,
            "inputs": self.stats.inputs,
            "processed": self.stats.processed,
            "events": self.stats.events,
            "journal_errors": self.stats.journal_errors,
            "journal_failing": failing_since is not None,
            "journal_failing_for_s": None if failing_since is None else time.monotonic() - failing_since,
            # the input being retried plus those queued behind it
            "inputs_waiting": depth + (1 if failing_since is not None else 0),
            "storage_full": self._storage_full,
            "inputs_not_stored": self.stats.inputs_not_stored,
            "queue_depth_warnings": self.stats.queue_depth_warnings,
            "reader_commands": self.reader_commands.health(),
            # the broker acknowledged the command subscription: supervisor commands can arrive
            "command_channel_ready": _command_channel_ready(self.publisher),
            "stalled_workers": [s.name for s in self.liveness.states() if s.stalled],
            "insecure_broker_settings": list(self.insecure_broker_settings),
        }

    def health(self) -> dict[str, Any]:
        """Every worker's health plus the runner's counters."""
        return {
            "devices": {name: _safe_health(d) for name, d in self.drivers.items()},
            "publisher": _safe_health(self.publisher) if self.publisher is not None else None,
            "engine": self._engine_health(),
            "workers": {
                s.name: {"stalled": s.stalled, "last_progress": s.last_progress}
                for s in self.liveness.states()
            },
        }

    # ------------------------------------------------------------------ main loop
    def run_until_stopped(self) -> None:
        """Main thread: watchdog pings, health log, SIGHUP reloads, until ``stop_requested``."""
        next_health = time.monotonic() + self.config.service.health_interval_s
        interval = self.notifier.watchdog_interval
        ping_every = min(interval / 3, 1.0) if interval else 1.0
        while not self.stop_requested.wait(ping_every):
            if self.engine_done.is_set():
                log.error("engine_thread_died")
                raise RuntimeError("the engine thread stopped unexpectedly")
            if self.liveness.all_progressing():
                self.notifier.watchdog()
            else:
                stalled = [s.describe(time.monotonic()) for s in self.liveness.states() if s.stalled]
                log.warning("watchdog_withheld", stalled=stalled)
            if self.reload_requested.is_set():
                self.reload_requested.clear()
                self.reload()
            if time.monotonic() >= next_health:
                next_health = time.monotonic() + self.config.service.health_interval_s
                log.info("health", **self.health())

    def reload(self) -> None:
        """SIGHUP: re-read the config file and apply the settings that can change in place."""
        self.notifier.reloading()
        try:
            if self.config_path is None:
                log.info("reload_skipped", reason="running on embedded defaults")
                return
            try:
                fresh = load_config(self.config_path)
            except ConfigError as exc:
                log.error("reload_refused", problems=[str(p) for p in exc.problems])
                return
            changed = changed_sections(self.config, fresh.config, self._secret_digests, fresh.secret_digests)
            rotated = rotated_secrets(self._secret_digests, fresh.secret_digests)
            applied = [c for c in changed if c in RELOADABLE or c.split(".")[0] in RELOADABLE]
            needs_restart = [c for c in changed if c not in applied]
            updates: dict[str, Any] = {}
            if "log" in applied:
                configure_logging(fresh.config.log.level, fresh.config.log.format)
                updates["log"] = fresh.config.log
            service = self.config.service
            if any(c.startswith("service.") for c in applied):
                service = service.model_copy(
                    update={
                        "health_interval_s": fresh.config.service.health_interval_s,
                        "watchdog_stall_s": fresh.config.service.watchdog_stall_s,
                    }
                )
                self.liveness.stall_after = service.watchdog_stall_s
                updates["service"] = service
            if "broker" in applied:
                if self._swap_publisher(fresh.config.broker):
                    updates["broker"] = fresh.config.broker
                    self._warn_if_insecure(fresh.config.broker)
                    self._secret_digests = dict(fresh.secret_digests)
                else:
                    applied.remove("broker")
                    needs_restart.append("broker")
            self.config = self.config.model_copy(update=updates)
            # names of the rotated secrets only: their contents and digests are never logged
            log.info(
                "config_reloaded", applied=applied, needs_restart=needs_restart, rotated_in_place=rotated
            )
        finally:
            self.notifier.ready()

    def _swap_publisher(self, settings: BrokerSettings) -> bool:
        """New broker settings (host, credentials, keys rotated): a new publisher takes over.

        Nothing is lost in between: undelivered events wait in the journal and the new
        publisher drains them from the first unacknowledged one. The old one says ``offline``.
        """
        try:
            fresh = self._make_publisher(settings)
        except Exception as exc:  # e.g. a secret file that cannot be read: keep the running one
            log.error("reload_broker_failed", error=str(exc))
            return False
        old = self.publisher
        self.liveness.unregister("publisher")
        try:
            old.stop(timeout=self.config.service.shutdown_timeout_s)
        except Exception as exc:
            log.warning("publisher_stop_failed", error=str(exc))
        self.publisher = fresh
        fresh.start()
        self._register_probe("publisher", fresh)
        log.info("publisher_replaced", host=settings.host, port=settings.effective_port)
        return True

    def stop(self) -> None:
        """Clean shutdown: devices closed, queue drained into the journal, publisher flushed."""
        self.notifier.stopping(status="stopping: closing devices, flushing the journal")
        for name, driver in self.drivers.items():
            try:
                driver.stop()
            except Exception as exc:
                log.warning("driver_stop_failed", device=name, error=str(exc))
            self.liveness.unregister(name)
        timeout = self.config.service.shutdown_timeout_s
        self.reader_commands.stop(timeout=timeout / 4)
        self.liveness.unregister("reader_commands")
        if self._engine_thread is not None:
            # a failing journal is retried for half the shutdown time, then each input
            # it could not store is logged (never silently lost)
            self._give_up_at = time.monotonic() + timeout / 2
            self._stopping.set()
            self.queue.put(_Stop())
            self._engine_thread.join(timeout=timeout)
        if self.publisher is not None:
            try:
                self.publisher.stop(timeout=self.config.service.shutdown_timeout_s)
            except Exception as exc:
                log.warning("publisher_stop_failed", error=str(exc))
        if self.journal is not None:
            self.journal.close()
        log.info("daemon_stopped", inputs=self.stats.inputs, events=self.stats.events)


def _answer_for(command: SupervisorCommand, journaled: list[JournaledEvent]) -> dict[str, Any]:
    """The engine's command_accepted/command_refused event for ``command``, as the reply."""
    for event in journaled:
        if event.kind in ("command_accepted", "command_refused") and (
            event.data.get("command_id") == command.command_id
        ):
            reason = event.data.get("reason")
            return {
                "accepted": event.kind == "command_accepted",
                "reason": None if reason is None else str(reason),
                "event_id": event.event_id,
                "seq": event.seq,
            }
    return {"accepted": False, "reason": "the engine gave no answer to this command"}


def _threads_of(worker: Any) -> list[threading.Thread]:
    """The threads a worker runs (its ``_thread``/``thread``/``_threads`` attributes)."""
    found: list[threading.Thread] = []
    for attribute in ("_thread", "thread", "_threads"):
        value = getattr(worker, attribute, None)
        if isinstance(value, threading.Thread):
            found.append(value)
        elif isinstance(value, list):
            found.extend(t for t in value if isinstance(t, threading.Thread))
    return found


def _mid_round(engine: Any) -> bool:
    """A round (or the opening burn) is under way: its cards are still accepted when full."""
    from daemon.engine.state import Phase

    state = engine.state
    return state.round is not None or state.phase in (Phase.INDICATOR, Phase.BURNING)


def _command_channel_ready(publisher: Any) -> bool:
    subscribed = getattr(publisher, "subscribed", None)
    return isinstance(subscribed, threading.Event) and subscribed.is_set()


def _safe_health(worker: Any) -> dict[str, Any]:
    try:
        health: dict[str, Any] = worker.health()
    except Exception as exc:
        return {"error": str(exc)}
    return health


_RESERVED_LOG_KEYS = frozenset(
    {"event", "level", "timestamp", "logger", "event_id", "seq", "shoe_id", "hand", "kind", "exc_info"}
)


def _log_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Event data as log fields; keys that would clash with the envelope's get a ``data_`` prefix."""
    return {(f"data_{k}" if k in _RESERVED_LOG_KEYS else k): v for k, v in data.items()}


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
            **_log_fields(event.data),
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


def install_signal_handlers(daemon: Daemon) -> None:
    """SIGTERM/SIGINT → clean stop; SIGHUP → reload. Main thread only."""

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        daemon.stop_requested.set()

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        daemon.reload_requested.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
