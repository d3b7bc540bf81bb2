"""Worker progress tracking behind the systemd watchdog.

Each worker (reader driver, camera, engine thread, publisher, reader-command worker)
is registered with a probe returning the ``time.monotonic()`` of its last sign of
life, or None when it is not running. The watchdog is pinged only while every probe
is within ``stall_after`` seconds.

What a sign of life is depends on the worker (registered by ``daemon.service.health.Watchdog``):

* the engine thread beats on every turn of its loop (inputs, idle ticks, journal retries);
* every other worker is watched through its ``last_progress()``: the reader drivers, the
  publisher's drain loop and the reader-command worker report their loop's last turn. An
  idle shoe or an unreachable broker still turns the loop (read timeouts, reconnect waits
  in slices), a loop blocked in a read, a sink or a socket call does not, so it stops the
  pings although its thread lives;
* the camera has no loop heartbeat: its ``last_progress()`` is "now" while its thread lives
  and its state lock is free, so its death or a deadlock on that lock stops the pings, a
  loop blocked elsewhere does not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

Probe = Callable[[], float | None]


@dataclass(frozen=True, slots=True)
class WorkerState:
    """One worker's last sign of life, and whether it counts as stalled."""

    name: str
    last_progress: float | None
    stalled: bool

    def describe(self, now: float) -> str:
        if self.last_progress is None:
            return f"{self.name}: not running"
        return f"{self.name}: last progress {now - self.last_progress:.1f}s ago"


class Liveness:
    """Registry of worker probes with a stall limit in seconds."""

    def __init__(self, stall_after: float, clock: Callable[[], float]) -> None:
        self.stall_after = stall_after
        self._clock = clock
        self._probes: dict[str, Probe] = {}
        self._beats: dict[str, float] = {}
        self._lock = threading.Lock()

    def register(self, name: str, probe: Probe) -> None:
        """Watch a worker through ``probe``."""
        with self._lock:
            self._probes[name] = probe

    def register_heartbeat(self, name: str) -> Callable[[], None]:
        """Watch a worker that calls the returned function on every turn of its loop."""
        self._beats[name] = self._clock()

        def beat() -> None:
            self._beats[name] = self._clock()

        self.register(name, lambda: self._beats.get(name))
        return beat

    def unregister(self, name: str) -> None:
        with self._lock:
            self._probes.pop(name, None)
            self._beats.pop(name, None)

    def states(self) -> list[WorkerState]:
        now = self._clock()
        with self._lock:
            probes = list(self._probes.items())
        out = []
        for name, probe in probes:
            try:
                last = probe()
            except Exception:  # a probe that raises is a worker in trouble, not a crash
                last = None
            stalled = last is None or now - last > self.stall_after
            out.append(WorkerState(name, last, stalled))
        return out

    def all_progressing(self) -> bool:
        """True when every registered worker showed progress within ``stall_after``."""
        return not any(state.stalled for state in self.states())
