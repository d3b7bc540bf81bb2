"""Health and the systemd watchdog: what the daemon reports, and when it pings.

* :class:`Watchdog` pings ``WATCHDOG=1`` at a third of ``WatchdogSec`` (at most every second)
  while every worker shows progress within ``service.watchdog_stall_s``
  (:class:`~daemon.service.liveness.Liveness`): the engine thread beats on every turn of its
  loop; each device, the publisher and the reader-command worker are watched through their
  ``last_progress()``. A stalled worker withholds the ping and is named in the log.
* The health report (logged every ``service.health_interval_s``; its ``devices`` part is
  published by the publisher, which adds its own) is put together here from each part's
  own health record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

import structlog

from daemon.mqtt.publisher import Publisher
from daemon.service.clock_status import ClockHealth
from daemon.service.engine_loop import EngineLoop, InputQueue
from daemon.service.liveness import Liveness, Probe
from daemon.service.reader_commands import ReaderCommandsHealth
from daemon.service.sdnotify import SystemdNotifier
from daemon.service.stats import RunnerStats
from drivers.device import Device, DeviceHealth

log = structlog.get_logger("baccarat_edge.runner")


class HealthError(TypedDict):
    """A part whose ``health()`` raised: what it raised, in its place in the report."""

    error: str


class WorkerHealth(TypedDict):
    """One watched worker's last sign of life (``time.monotonic()``) and whether it stalled."""

    stalled: bool
    last_progress: float | None


class EngineHealth(TypedDict):
    """The runner's own block (``devices.engine`` in the published health)."""

    queue_depth: int
    inputs: int
    processed: int
    events: int
    journal_errors: int
    journal_failing: bool
    journal_failing_for_s: float | None
    inputs_waiting: int
    storage_full: bool
    inputs_not_stored: int
    queue_depth_warnings: int
    reader_commands: ReaderCommandsHealth
    command_channel_ready: bool
    stalled_workers: list[str]
    insecure_broker_settings: list[str]
    clock: NotRequired[ClockHealth]


class DaemonHealth(TypedDict):
    """The whole report the daemon logs as ``health``."""

    devices: dict[str, DeviceHealth | HealthError]
    publisher: dict[str, Any] | HealthError | None
    engine: EngineHealth
    workers: dict[str, WorkerHealth]


class Watchdog:
    """Gates systemd's watchdog pings on every registered worker's progress."""

    def __init__(self, notifier: SystemdNotifier, stall_after: float) -> None:
        self.notifier = notifier
        self.liveness = Liveness(stall_after, time.monotonic)

    @property
    def ping_every(self) -> float:
        """Seconds between two turns: a third of ``WatchdogSec``, at most one second."""
        interval = self.notifier.watchdog_interval
        return min(interval / 3, 1.0) if interval else 1.0

    def watch(self, name: str, progress: Probe) -> None:
        """Watch a worker through its ``last_progress()`` (None: not running)."""
        self.liveness.register(name, progress)

    def heartbeat(self, name: str) -> Callable[[], None]:
        """Watch a worker that calls the returned function on every turn of its loop."""
        return self.liveness.register_heartbeat(name)

    def forget(self, name: str) -> None:
        """Stop watching a worker (it was stopped on purpose)."""
        self.liveness.unregister(name)

    def turn(self) -> None:
        """Ping when every worker progresses; otherwise log which ones stalled."""
        if self.liveness.all_progressing():
            self.notifier.watchdog()
        else:
            stalled = [s.describe(time.monotonic()) for s in self.liveness.states() if s.stalled]
            log.warning("watchdog_withheld", stalled=stalled)

    def stalled_workers(self) -> list[str]:
        return [s.name for s in self.liveness.states() if s.stalled]

    def workers(self) -> dict[str, WorkerHealth]:
        return {
            s.name: WorkerHealth(stalled=s.stalled, last_progress=s.last_progress)
            for s in self.liveness.states()
        }


def device_health(device: Device) -> DeviceHealth | HealthError:
    """A device's health block; a device whose health raises is reported, not fatal."""
    try:
        return device.health()
    except Exception as exc:
        return HealthError(error=str(exc))


def devices_health(devices: Mapping[str, Device]) -> dict[str, DeviceHealth | HealthError]:
    return {name: device_health(device) for name, device in devices.items()}


def publisher_health(publisher: Publisher) -> dict[str, Any] | HealthError:
    """The publisher's own report (its shape is the publisher's: ``daemon/mqtt``)."""
    try:
        return publisher.health()
    except Exception as exc:
        return HealthError(error=str(exc))


def engine_health(
    stats: RunnerStats,
    inputs: InputQueue,
    loop: EngineLoop | None,
    publisher: Publisher | None,
    watchdog: Watchdog,
    reader_commands: ReaderCommandsHealth,
    insecure_broker_settings: list[str],
) -> EngineHealth:
    """The runner's block: queue, counters, journal outage and capacity, command channel, stalls."""
    failing_since = loop.writer.failing_since if loop is not None else None
    depth = inputs.qsize()
    return EngineHealth(
        queue_depth=depth,
        inputs=stats.inputs,
        processed=stats.processed,
        events=stats.events,
        journal_errors=stats.journal_errors,
        journal_failing=failing_since is not None,
        journal_failing_for_s=None if failing_since is None else time.monotonic() - failing_since,
        # the input being retried plus those queued behind it
        inputs_waiting=depth + (1 if failing_since is not None else 0),
        storage_full=loop.storage_full if loop is not None else False,
        inputs_not_stored=stats.inputs_not_stored,
        queue_depth_warnings=stats.queue_depth_warnings,
        reader_commands=reader_commands,
        # the broker acknowledged the command subscription: supervisor commands can arrive
        command_channel_ready=publisher is not None and publisher.subscribed.is_set(),
        stalled_workers=watchdog.stalled_workers(),
        insecure_broker_settings=list(insecure_broker_settings),
    )
