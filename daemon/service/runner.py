"""The daemon process: wiring and lifecycle of one table's parts.

::

    reader/camera threads ─┐                           ┌─> journal (fsync) ─> publisher
    MQTT commands ─────────┼─> queue ─> engine thread ─┤
    clock ticks (timeout) ─┘                           └─> retained state snapshot

Who does what:

* :mod:`~daemon.service.engine_loop`: the input queue and the engine thread (the only code
  that touches the engine), journal capacity fed to the engine, engine failures;
* :mod:`~daemon.service.journal_writer`: append retried until stored, the
  ``journal_recovered`` report, one log line per journaled event;
* :mod:`~daemon.service.state_snapshot`: the retained state the publisher sends;
* :mod:`~daemon.service.health`: the watchdog pings and the health report;
* here, :class:`Daemon`: builds the parts, starts and stops them in order, runs the main
  loop (watchdog, health log, SIGHUP) and swaps the publisher on a broker reload.

* Start-up folds the journal into a fresh engine, so a restart resumes the shoe.
* No event is published before the start-up self-checks ran (config, journal tail, the
  installed files' attestation, devices started: :mod:`~daemon.service.startup_checks`);
  ``integrity_failed`` holds every event after it (:mod:`~daemon.service.attestation`).
* READY goes to systemd once devices, journal and engine are up (the broker may be
  away: the journal holds everything until it is back). WATCHDOG pings go out only
  while every worker shows progress.
* SIGTERM/SIGINT: stop the devices (closed), let the engine drain what was read,
  let the publisher flush within ``shutdown_timeout_s`` and publish ``offline``. The signal
  handlers only note the signal and write a byte to a pipe
  (:class:`~daemon.service.wakeup.Wakeup`): a handler
  runs between two bytecodes of the main thread, which may be holding a lock (a log line
  half written, an event being set) that the handler would then wait for forever. The main
  loop wakes on the pipe and does the rest. A signal during start-up ends the process once
  the start is done (the start reads a snapshot and the events after it: it is short).
* SIGHUP: re-read the config; apply what can change in place (``config.RELOADABLE``)
  and log which changed settings need a restart.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import structlog

from common.inputs import EngineInput, SupervisorCommand
from daemon import __version__
from daemon.alerts import AlertCode
from daemon.engine.table import Engine
from daemon.journal.continuity_alert import continuity_alert
from daemon.journal.records import DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.command_channel import ReplyFn
from daemon.mqtt.open_alerts import open_episode_alerts
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.settings import BrokerSettings
from daemon.mqtt.tls_dates import TlsDateWatch
from daemon.service.attestation import ATTEST_ACTION, Attestation, birth_fields, health_sections
from daemon.service.clock_status import ClockWatch, clock_source
from daemon.service.config import (
    RELOADABLE,
    LoadedConfig,
    changed_sections,
    config_digest,
    device_name,
    load_config,
    rotated_secrets,
)
from daemon.service.configfile import ConfigError
from daemon.service.engine_loop import (
    Barrier,
    Command,
    EngineLoop,
    InputQueue,
)
from daemon.service.engine_restore import SnapshotTaker, restore_from_journal
from daemon.service.health import (
    DaemonHealth,
    EngineHealth,
    HealthError,
    Watchdog,
    devices_health,
    engine_health,
    publisher_health,
)
from daemon.service.journal_housekeeping import JournalHousekeeping
from daemon.service.journal_writer import JournalWriter, LoggedJournal
from daemon.service.logging import configure_logging
from daemon.service.pace_health import TablePace
from daemon.service.probes import insecure_settings
from daemon.service.reader_commands import ReaderCommandWorker
from daemon.service.sdnotify import SystemdNotifier
from daemon.service.startup_checks import PublishGate
from daemon.service.state_snapshot import StateSnapshot
from daemon.service.stats import RunnerStats
from daemon.service.wakeup import Wakeup, WakingEvent
from drivers.device import Device, DeviceHealth
from drivers.registry import load

log = structlog.get_logger("baccarat_edge.runner")

Clock = Callable[[], float]


class Daemon:
    """Wires devices, engine, journal and publisher for one table."""

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
        self.queue = InputQueue(self.config.service.input_queue_max, self.stats)
        self.watchdog = Watchdog(self.notifier, self.config.service.watchdog_stall_s)
        self.wakeup = Wakeup()
        self.stop_requested: threading.Event = WakingEvent(self.wakeup)
        self.reload_requested: threading.Event = WakingEvent(self.wakeup)
        self.signal_received: int | None = None
        """The last SIGTERM/SIGINT received (set by the handler; acted on by the main loop)."""
        self.hangup_received = False
        """A SIGHUP arrived (set by the handler; the main loop reloads)."""
        self._housekeeping: JournalHousekeeping | None = None
        self.engine_done = threading.Event()
        self.journal: Journal | None = None
        self.pace = TablePace()
        """The table's pace (health ``pace``): read from the journal at start, then per event."""
        betting = self.config.table.betting
        self.clock_watch = ClockWatch(
            clock_source(self.config.service.clock),
            self.submit,
            settings=self.config.service.clock,
            max_skew_s=betting.max_skew_s,
            clock_gate=betting.clock_gate,
            clock=clock,
        )
        """The clock status, polled by the main loop (``clock_status.py``); tests replace its source."""
        self._publisher: Publisher | None = None
        self.drivers: dict[str, Device] = {}
        self.snapshot = StateSnapshot(self.config.broker.delivery.state_interval_s)
        self.engine_loop: EngineLoop | None = None
        self.reader_commands = ReaderCommandWorker(lambda: self.drivers, self.submit, self.clock)
        self.insecure_broker_settings: list[str] = []
        """What check-config would flag as insecure in the broker settings in use (health, log)."""
        self.tls_dates: TlsDateWatch | None = None
        """The ``tls_certificate_dates`` alert (a certificate outside its dates is no reason to stop)."""
        self.gate = PublishGate()
        """The start-up self-checks and what the publisher may send (startup_checks.py)."""
        self.attestation: Attestation | None = None

    @property
    def publisher(self) -> Publisher:
        """The publisher in service (a new one after a SIGHUP that changes the broker)."""
        if self._publisher is None:
            raise RuntimeError("the daemon is not started")
        return self._publisher

    @property
    def engine(self) -> Engine:
        """The table's engine (the engine thread's; read it only while that thread is idle)."""
        if self.engine_loop is None:
            raise RuntimeError("the daemon is not started")
        return self.engine_loop.engine

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        """Open the journal, restore the engine, start publisher, engine thread and devices."""
        cfg = self.config
        self.stats.started_at = self.clock()
        self.gate.passed("config")
        self.gate.begin("journal_tail")
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        journal = LoggedJournal(cfg.journal, cfg.table_id, clock=self.clock)
        self.journal = journal
        alert = continuity_alert(journal.continuity, self.clock())
        if alert is not None:
            log.error("journal_continuity", **alert.data)
            journal.append_delivery_event(alert)
        engine = restore_from_journal(
            journal,
            cfg.table,
            self.loaded.variant,
            progress=self._folding,
        ).engine
        self.snapshot.seed_rounds(cfg.journal.path)
        self.snapshot.reset(engine)
        self.gate.passed("journal_tail")
        self.attestation = Attestation(
            cfg.attestation, journal, self.gate, clock=self.clock, notify=self._notify_publisher
        )
        self.pace = TablePace.from_journal(journal)
        self._warn_if_insecure(cfg.broker)
        self.tls_dates = TlsDateWatch(
            cfg.broker.tls,
            self._journal_alert,
            self.clock,
            open_alert=open_episode_alerts(journal).get(AlertCode.TLS_CERTIFICATE_DATES),
        )
        self.tls_dates.check(force=True)
        publisher = self._make_publisher(cfg.broker)
        self._publisher = publisher
        publisher.start()
        self.watchdog.watch("publisher", publisher.last_progress)
        self.attestation.check_at_start()  # before any device starts: startup_checks.py
        writer = JournalWriter(
            journal, self.stats, self.clock, self._notify_publisher, self.queue.inputs_queued
        )
        self.engine_loop = EngineLoop(
            engine,
            writer,
            self.queue,
            self.snapshot,
            self.reader_commands,
            self._make_housekeeping(journal),
            restore=lambda: restore_from_journal(journal, cfg.table, self.loaded.variant).engine,
            snapshots=SnapshotTaker(journal),
            notify=self._notify_publisher,
            clock=self.clock,
            tick_interval_s=cfg.service.tick_interval_s,
            done=self.engine_done,
            on_events=self._after_events,
        )
        self.engine_loop.start(self.watchdog.heartbeat("engine"))
        self.reader_commands.start()
        self.watchdog.watch("reader_commands", self.reader_commands.last_progress)
        self.gate.begin("device_probe")
        self._start_devices()
        self.gate.passed("device_probe")
        self.gate.startup_done()
        self._notify_publisher()
        self.notifier.ready(status=f"table {cfg.table_id}: {len(self.drivers)} device(s), journal open")
        log.info("daemon_ready", table_id=cfg.table_id, devices=sorted(self.drivers))

    def _make_housekeeping(self, journal: Journal) -> JournalHousekeeping:
        self._housekeeping = JournalHousekeeping(
            journal, lambda: self.config.broker.delivery, self.clock, self._notify_publisher
        )
        return self._housekeeping

    def _folding(self, events_read: int) -> None:
        """A whole-journal fold at start (no usable snapshot) is still reading: ask systemd
        for another minute rather than be killed at ``TimeoutStartSec``."""
        self.notifier.extend_timeout(60, f"folding the whole journal: {events_read} events read")

    def _warn_if_insecure(self, settings: BrokerSettings) -> None:
        """Log (and keep for health) every insecure broker setting check-config refuses by default.

        ``run`` still starts (a lab bench may need it), but never silently.
        """
        self.insecure_broker_settings = insecure_settings(settings)
        for problem in self.insecure_broker_settings:
            log.warning("insecure_broker_setting", problem=problem, host=settings.host)

    def _make_publisher(self, settings: BrokerSettings) -> Publisher:
        assert self.journal is not None
        return Publisher(
            settings=settings,
            table_id=self.config.table_id,
            journal=self.journal,
            on_command=self.submit_command,
            snapshot=self.snapshot.get,
            health_extra=self._devices_health,
            health_pace=self.pace.report,
            clock=self.clock,
            identity={
                "version": __version__,
                "config_digest": self._config_digest(settings),
                **birth_fields(self.attestation),
            },
            held_after=self.gate.held_after,
            health_sections=lambda: health_sections(self.gate, self.attestation),
        )

    def _config_digest(self, broker: BrokerSettings) -> str:
        """The digest of the config running once ``broker`` is in service (see config_digest)."""
        return config_digest(self.config.model_copy(update={"broker": broker}), self.loaded.variant)

    def _journal_alert(self, event: DeliveryEvent) -> None:
        """Journal an alert of the service's own (published by whichever publisher runs)."""
        assert self.journal is not None
        self.journal.append_delivery_event(event)
        self._notify_publisher()

    def _notify_publisher(self) -> None:
        """Wake the publisher in service now (swapped on a broker reload): events are journaled."""
        if self._publisher is not None:
            self._publisher.notify()

    def _start_devices(self) -> None:
        """Build every configured reader and the camera through the registry, start each, watch it."""
        cfg = self.config
        for section, settings in zip(cfg.readers, self.loaded.reader_settings, strict=True):
            name = device_name(settings, section.driver)
            self.drivers[name] = load(section.driver).build(settings, self.submit, self.clock)
        if cfg.camera is not None and self.loaded.camera_settings is not None:
            name = device_name(self.loaded.camera_settings, "camera")
            self.drivers[name] = load("camera").build(self.loaded.camera_settings, self.submit, self.clock)
        for name, device in self.drivers.items():
            device.start()
            self.watchdog.watch(name, device.last_progress)

    # ------------------------------------------------------------------ inputs
    def submit(self, inp: EngineInput) -> None:
        """Queue one input for the engine (any thread, the devices' sink; never blocks, never drops)."""
        self.queue.put(inp)

    def submit_command(self, command: SupervisorCommand, reply: ReplyFn) -> None:
        """Called by the publisher's network thread for every verified command (lock/unlock too)."""
        self.clock_watch.note_command(command)
        if command.action == ATTEST_ACTION and self.attestation is not None:
            reply = self.attestation.on_command(command.actor, reply)  # the check, once journaled
        self.queue.put(Command(command, reply))

    def wait_until_processed(self, timeout: float) -> bool:
        """True once the engine thread has handled everything queued before this call.

        A barrier for tests and tools: no sleeping and hoping the last input was handled.
        """
        reached = threading.Event()
        self.queue.put(Barrier(reached))
        return reached.wait(timeout)

    def _after_events(self, events: list[JournaledEvent]) -> None:
        """Engine thread, after each store: the pace takes the events, then the test hook."""
        self.pace.observe(events)
        if self.on_events is not None:
            self.on_events(events)

    # ------------------------------------------------------------------ health
    def _devices_health(self) -> dict[str, DeviceHealth | HealthError | EngineHealth]:
        """The devices part of the published health report (the publisher adds its own)."""
        report: dict[str, DeviceHealth | HealthError | EngineHealth] = {**devices_health(self.drivers)}
        report["engine"] = self._engine_health()
        return report

    def _engine_health(self) -> EngineHealth:
        report = engine_health(
            self.stats,
            self.queue,
            self.engine_loop,
            self._publisher,
            self.watchdog,
            self.reader_commands.health(),
            self.insecure_broker_settings,
        )
        report["clock"] = self.clock_watch.health()
        return report

    def health(self) -> DaemonHealth:
        """Every worker's health plus the runner's counters (logged as ``health``)."""
        return DaemonHealth(
            devices=devices_health(self.drivers),
            publisher=publisher_health(self._publisher) if self._publisher is not None else None,
            engine=self._engine_health(),
            workers=self.watchdog.workers(),
        )

    # ------------------------------------------------------------------ main loop
    def run_until_stopped(self) -> None:
        """Main thread: watchdog pings, health log, SIGHUP reloads, until ``stop_requested``."""
        next_health = time.monotonic() + self.config.service.health_interval_s
        while True:
            self._take_signals()
            if self.stop_requested.is_set():
                return
            self._take_signals(self.wakeup.wait(self.watchdog.ping_every))
            if self.stop_requested.is_set():
                return
            if self.engine_done.is_set():
                log.error("engine_thread_died")
                raise RuntimeError("the engine thread stopped unexpectedly")
            self.watchdog.turn()
            self.clock_watch.poll(time.monotonic())
            if self.tls_dates is not None:
                self.tls_dates.check()
            if self.reload_requested.is_set():
                self.reload_requested.clear()
                self.reload()
            if time.monotonic() >= next_health:
                next_health = time.monotonic() + self.config.service.health_interval_s
                log.info("health", **self.health())

    def _take_signals(self, piped: set[int] | frozenset[int] = frozenset()) -> None:
        """Act on the signals the handlers noted or the wakeup pipe carried (here, on the main
        thread, not in the handlers)."""
        if signal.SIGHUP in piped:
            self.hangup_received = True
        for stop in (signal.SIGTERM, signal.SIGINT):
            if stop in piped and self.signal_received is None:
                self.signal_received = int(stop)
        signum = self.signal_received
        if signum is not None and not self.stop_requested.is_set():
            log.info("signal_received", signal=signal.Signals(signum).name)
            self.stop_requested.set()
        if self.hangup_received:
            self.hangup_received = False
            self.reload_requested.set()

    def reload(self) -> None:
        """SIGHUP: re-read the config file and apply the settings that can change in place."""
        self.notifier.reloading()
        try:
            if self.config_path is None:
                log.info("reload_skipped", reason="running on embedded defaults")
                return
            try:
                fresh = load_config(self.config_path, tls_dates=False)  # dates: TlsDateWatch
            except ConfigError as exc:
                log.error("reload_refused", problems=[str(p) for p in exc.problems])
                return
            changed = changed_sections(self.config, fresh.config, self._secret_digests, fresh.secret_digests)
            rotated = rotated_secrets(self._secret_digests, fresh.secret_digests)
            applied = [c for c in changed if c in RELOADABLE or c.split(".")[0] in RELOADABLE]
            needs_restart = [c for c in changed if c not in applied]
            updates: dict[str, object] = {}
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
                self.watchdog.liveness.stall_after = service.watchdog_stall_s
                updates["service"] = service
            if "broker" in applied:
                if self._swap_publisher(fresh.config.broker):
                    updates["broker"] = fresh.config.broker
                    self.snapshot.interval_s = fresh.config.broker.delivery.state_interval_s
                    self._warn_if_insecure(fresh.config.broker)
                    if self.tls_dates is not None:
                        self.tls_dates.tls = fresh.config.broker.tls
                        self.tls_dates.check(force=True)
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
        publisher drains them from the first unacknowledged one; replies to commands still in
        the engine's queue go out through the new connection. The old one says ``offline``.
        """
        try:
            fresh = self._make_publisher(settings)
        except Exception as exc:  # e.g. a secret file that cannot be read: keep the running one
            log.error("reload_broker_failed", error=str(exc))
            return False
        old = self.publisher
        # Commands queued for the engine were received by the old connection: their replies
        # must not go out through it once it stops (they would be lost), but through the new one.
        old.hand_over_replies(fresh)
        self.watchdog.forget("publisher")
        try:
            old.stop(timeout=self.config.service.shutdown_timeout_s)
        except Exception as exc:
            log.warning("publisher_stop_failed", error=str(exc))
        self._publisher = fresh
        fresh.start()
        self.watchdog.watch("publisher", fresh.last_progress)
        log.info("publisher_replaced", host=settings.host, port=settings.effective_port)
        return True

    def stop(self) -> None:
        """Clean shutdown: devices closed, queue drained into the journal, publisher flushed."""
        self.notifier.stopping(status="stopping: closing devices, flushing the journal")
        for name, device in self.drivers.items():
            try:
                device.stop()
            except Exception as exc:
                log.warning("driver_stop_failed", device=name, error=str(exc))
            self.watchdog.forget(name)
        timeout = self.config.service.shutdown_timeout_s
        self.reader_commands.stop(timeout=timeout / 4)
        self.watchdog.forget("reader_commands")
        if self.engine_loop is not None:
            self.engine_loop.stop(timeout)
        if self._housekeeping is not None:
            self._housekeeping.stop(timeout / 4)  # a running compaction ends after its slice
        if self._publisher is not None:
            try:
                self._publisher.stop(timeout=self.config.service.shutdown_timeout_s)
            except Exception as exc:
                log.warning("publisher_stop_failed", error=str(exc))
        if self.journal is not None:
            self.journal.close()
        self.wakeup.close()
        log.info("daemon_stopped", inputs=self.stats.inputs, events=self.stats.events)


def install_signal_handlers(daemon: Daemon) -> None:
    """SIGTERM/SIGINT → clean stop; SIGHUP → reload. Main thread only.

    The handlers only note the signal and wake the main loop through its pipe: no logging,
    no lock (see :class:`~daemon.service.wakeup.Wakeup`). A signal during :meth:`Daemon.start`
    is acted on as soon as the main loop runs."""

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        daemon.signal_received = signum
        daemon.wakeup.wake()

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        daemon.hangup_received = True
        daemon.wakeup.wake()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    daemon.wakeup.catch_signals()
