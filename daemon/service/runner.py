"""The daemon process: one input queue, one engine thread, journal before publish.

::

    reader/camera threads ─┐                        ┌─> journal (fsync) ─> publisher
    MQTT commands ─────────┼─> queue ─> engine thread┤
    clock ticks (timeout) ─┘                        └─> retained state snapshot

* The engine thread is the only code that touches the engine. For every input it
  asks the engine for events, appends input and events to the journal in one
  transaction, and only then wakes the publisher.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from daemon.engine.events import Event
from daemon.engine.inputs import CardRead, EngineInput, SupervisorCommand, Tick
from daemon.journal.records import DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.settings import BrokerSettings
from daemon.service.config import RELOADABLE, LoadedConfig, changed_sections, device_name, load_config
from daemon.service.configfile import ConfigError
from daemon.service.liveness import Liveness
from daemon.service.logging import configure_logging
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


QueueItem = EngineInput | _Command | _Stop


@dataclass(slots=True)
class RunnerStats:
    """Counters reported in health and in the demo's summary."""

    inputs: int = 0
    events: int = 0
    commands: int = 0
    journal_errors: int = 0
    engine_errors: int = 0
    refused_journal_full: int = 0
    queue_full_drops: int = 0
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
        self.notifier = notifier or SystemdNotifier()
        self.clock = clock
        self.on_events = on_events
        self.stats = RunnerStats()
        self.queue: queue.Queue[QueueItem] = queue.Queue(maxsize=self.config.service.input_queue_max)
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

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        """Open the journal, restore the engine, start publisher, engine thread and drivers."""
        from daemon.engine.table import Engine

        cfg = self.config
        self.stats.started_at = self.clock()
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.journal, cfg.table_id, clock=self.clock)
        history = [Event.from_dict(e.body) for e in self.journal.events()]
        self.engine = Engine.restore(cfg.table, self.loaded.variant, history)
        self._set_snapshot(self.engine.snapshot())
        log.info(
            "engine_restored",
            table_id=cfg.table_id,
            events=len(history),
            last_seq=self.journal.last_seq(),
        )
        self.publisher = self._make_publisher()
        self.publisher.start()
        self._register_probe("publisher", self.publisher)
        self._engine_beat = self.liveness.register_heartbeat("engine")
        self._engine_thread = threading.Thread(target=self._engine_loop, name="engine", daemon=True)
        self._engine_thread.start()
        self._start_drivers()
        self.notifier.ready(status=f"table {cfg.table_id}: {len(self.drivers)} device(s), journal open")
        log.info("daemon_ready", table_id=cfg.table_id, devices=sorted(self.drivers))

    def _make_publisher(self, settings: BrokerSettings | None = None) -> Any:
        from daemon.mqtt.publisher import Publisher

        assert self.journal is not None
        return Publisher(
            settings=settings or self.config.broker,
            table_id=self.config.table_id,
            journal=self.journal,
            on_command=self.submit_command,
            on_reader_command=self._reader_command,
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
        """A worker shows progress while its thread(s) live and its ``health()`` answers.

        ``health()`` takes the worker's own lock, so a deadlocked worker stops answering
        and the main loop's watchdog check (which calls it) stalls too: no ping goes out.
        """

        def probe() -> float | None:
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
        try:
            self.queue.put(inp, timeout=1.0)
        except queue.Full:
            # Cannot happen while the engine thread lives (it drains far faster than a shoe);
            # never silently: count and log it so the health report shows it.
            self.stats.queue_full_drops += 1
            log.error("input_queue_full", input=type(inp).__name__, dropped_total=self.stats.queue_full_drops)

    def submit_command(self, command: SupervisorCommand, reply: ReplyFn) -> None:
        """Called by the publisher's network thread for every verified engine command."""
        self.queue.put(_Command(command, reply))

    def _reader_command(self, action: str, args: dict[str, Any]) -> tuple[bool, str]:
        """lock/unlock forwarded to the reader(s) that take host commands; (sent, detail)."""
        lock_codes = {"lock": 2, "unlock": 1}
        targets = [(n, d) for n, d in self.drivers.items() if hasattr(d, "send_command")]
        if action not in lock_codes:
            return False, f"{action!r} is not a reader command"
        if not targets:
            return False, "no configured reader accepts host commands"
        details: list[str] = []
        for name, driver in targets:
            try:
                answer = driver.send_command("LK", lock_codes[action])
            except Exception as exc:  # the reply tells the supervisor; the daemon goes on
                log.warning("reader_command_failed", device=name, action=action, error=str(exc))
                return False, f"{name}: {exc}"
            if answer is None:
                return False, f"{name}: no answer from the reader"
            if not bool(getattr(answer, "ok", False)):
                return False, f"{name}: the reader refused ({answer})"
            details.append(f"{name}: acknowledged")
        log.info("reader_command_done", action=action, devices=[n for n, _ in targets])
        return True, "; ".join(details)

    # ------------------------------------------------------------------ engine thread
    def _engine_loop(self) -> None:
        tick = self.config.service.tick_interval_s
        try:
            while True:
                self._engine_beat()
                try:
                    item: QueueItem = self.queue.get(timeout=tick)
                except queue.Empty:
                    item = Tick(at=self.clock())
                if isinstance(item, _Stop):
                    break
                self._step(item)
        finally:
            self.engine_done.set()

    def _step(self, item: EngineInput | _Command) -> None:
        assert self.journal is not None
        inp: EngineInput = item.command if isinstance(item, _Command) else item
        if isinstance(inp, CardRead) and not self._admits(inp):
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
        try:
            journaled = self.journal.append([inp], events)
        except Exception as exc:
            self._journal_failed(inp, exc)
            if isinstance(item, _Command):
                item.reply(False, "the journal could not store the command; nothing changed")
            return
        self.stats.inputs += 1
        self.stats.events += len(journaled)
        for event in journaled:
            self.stats.events_by_kind[event.kind] = self.stats.events_by_kind.get(event.kind, 0) + 1
            self._log_event(event)
        if events:
            self._set_snapshot(self.engine.snapshot())  # the publisher retains it after this batch
        self.publisher.notify()
        if isinstance(item, _Command):
            self.stats.commands += 1
            item.reply(_answer_for(item.command, journaled))
        if self.on_events is not None and journaled:
            self.on_events(journaled)

    @staticmethod
    def _log_event(event: JournaledEvent) -> None:
        try:
            log.info(
                event.kind,
                event_id=event.event_id,
                seq=event.seq,
                shoe_id=event.shoe_id,
                hand=event.hand,
                **_log_fields(event.data),
            )
        except Exception as exc:  # a log line must never stop the engine thread
            log.error("log_failed", kind=event.kind, seq=event.seq, error=str(exc))

    def _admits(self, read: CardRead) -> bool:
        """Journal full under ``refuse_new_rounds``: no card may open a new round."""
        assert self.journal is not None
        if self.journal.admits_new_round() or _mid_round(self.engine):
            return True
        self.stats.refused_journal_full += 1
        capacity = self.journal.capacity()
        self._delivery_event(
            "alert_raised",
            {
                "alert_id": f"journal-full-refused-{self.stats.refused_journal_full}",
                "code": "journal_full_card_refused",
                "message": "the journal is full: this card would open a new round and was refused; "
                "stop dealing until the broker is reachable and the journal drains",
                "card": read.card.code,
                "device": read.device,
                "reason": capacity.reason,
            },
        )
        return False

    def _delivery_event(self, kind: str, data: dict[str, Any]) -> None:
        assert self.journal is not None
        event = DeliveryEvent(kind=kind, at=self.clock(), data=data)
        log.warning(kind, **_log_fields(data))
        try:
            self.journal.append_delivery_event(event)
        except Exception as exc:
            self.stats.journal_errors += 1
            log.error("journal_write_failed", kind=kind, error=str(exc))
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
        self.engine = Engine.restore(self.config.table, self.loaded.variant, history)
        self._set_snapshot(self.engine.snapshot())

    def _journal_failed(self, inp: EngineInput, exc: Exception) -> None:
        """The engine decided events the journal could not store: rebuild from what is durable."""

        assert self.journal is not None
        self.stats.journal_errors += 1
        log.error("journal_write_failed", input=type(inp).__name__, error=str(exc))
        self._rebuild_engine()

    # ------------------------------------------------------------------ views
    def _set_snapshot(self, snapshot: dict[str, Any]) -> None:
        with self._snapshot_lock:
            self._snapshot = snapshot

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
        return {
            "queue_depth": self.queue.qsize(),
            "inputs": self.stats.inputs,
            "events": self.stats.events,
            "journal_errors": self.stats.journal_errors,
            "refused_journal_full": self.stats.refused_journal_full,
            "stalled_workers": [s.name for s in self.liveness.states() if s.stalled],
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
            changed = changed_sections(self.config, fresh.config)
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
                else:
                    applied.remove("broker")
                    needs_restart.append("broker")
            self.config = self.config.model_copy(update=updates)
            log.info("config_reloaded", applied=applied, needs_restart=needs_restart)
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
        if self._engine_thread is not None:
            self.queue.put(_Stop())
            self._engine_thread.join(timeout=self.config.service.shutdown_timeout_s)
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
    from daemon.engine.state import BURNING, INDICATOR

    state = engine.state
    return state.round is not None or state.phase in (INDICATOR, BURNING)


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
