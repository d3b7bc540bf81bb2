"""The table's clock, as the service sees it: is the system clock synchronised, and how far are the
game server's command times from the table's?

The engine reads no clock: :class:`ClockWatch` polls a :class:`ClockSource` every
``service.clock.poll_s`` from the daemon's main loop and hands a changed state to the engine as a
``ClockStatus`` input (the engine's clock gate then refuses ``open_betting`` and raises
``clock_unsynchronised``). It also notes each signed command's issued time against its receive time
(the measured skew) for health.

Sources (``service.clock.source``):

- ``adjtimex``: the kernel's own view, through ``adjtimex(2)`` with no mode bits (read only, no
  privilege): unsynchronised when the call returns ``TIME_ERROR`` or the status has ``STA_UNSYNC``
  (set by the kernel until an NTP daemon — chrony, ntpd, systemd-timesyncd — disciplines the clock).
  No subprocess, no D-Bus; works whatever NTP daemon runs. The detail gives the kernel's maximum
  error estimate.
- ``timedatectl``: ``timedatectl show -p NTPSynchronized --value`` (systemd hosts only).
- ``none`` (the default): no source; the engine's gate then judges the command skew only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from common.inputs import ClockStatus, SupervisorCommand

TIME_ERROR = 5
"""``adjtimex`` return value: the clock is not synchronised."""
STA_UNSYNC = 0x0040
"""``timex.status`` bit: the clock is not synchronised."""


class ClockSourceName(StrEnum):
    """Where the clock's synchronisation state is read (``service.clock.source``)."""

    NONE = "none"
    ADJTIMEX = "adjtimex"
    TIMEDATECTL = "timedatectl"


class ClockSettings(BaseModel):
    """``service.clock``: where the clock status comes from and how often it is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: ClockSourceName = Field(
        default=ClockSourceName.NONE,
        description="Where the system clock's synchronisation state is read: 'adjtimex' (the kernel's "
        "STA_UNSYNC / TIME_ERROR, no privilege needed), 'timedatectl' (NTPSynchronized, systemd hosts) or "
        "'none'. A production table should use adjtimex: while the clock is unsynchronised betting does "
        "not open (table.betting.clock_gate).",
    )
    poll_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds between two clock status reads.",
    )


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One read of a clock source: synchronised or not, and a short detail for the alert/health."""

    synchronised: bool
    detail: str | None = None


class ClockSource(Protocol):
    """A clock status source (injectable: tests pass a fake one)."""

    name: str

    def read(self) -> ClockReading: ...


class _Timex(ctypes.Structure):
    """``struct timex`` of ``<sys/timex.h>`` (Linux; the fields up to ``tai`` and its padding)."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time_sec", ctypes.c_long),
        ("time_usec", ctypes.c_long),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_padding", ctypes.c_int * 11),
    ]


class AdjtimexSource:
    """The kernel's synchronisation state through ``adjtimex(2)`` (read only)."""

    name = "adjtimex"

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def read(self) -> ClockReading:
        timex = _Timex()  # modes 0: read, change nothing
        state = self._libc.adjtimex(ctypes.byref(timex))
        if state < 0:
            return ClockReading(False, f"adjtimex failed: errno {ctypes.get_errno()}")
        maxerror = f"maxerror {timex.maxerror / 1000:g} ms"
        if state == TIME_ERROR or timex.status & STA_UNSYNC:
            return ClockReading(False, f"kernel clock unsynchronised (STA_UNSYNC / TIME_ERROR), {maxerror}")
        return ClockReading(True, maxerror)


class TimedatectlSource:
    """systemd's view: ``timedatectl show -p NTPSynchronized --value``."""

    name = "timedatectl"

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s

    def read(self) -> ClockReading:
        try:
            done = subprocess.run(
                ["timedatectl", "show", "-p", "NTPSynchronized", "--value"],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return ClockReading(False, f"timedatectl failed: {exc}")
        value = done.stdout.strip()
        if done.returncode != 0 or value not in ("yes", "no"):
            problem = (done.stderr.strip() or value or f"exit {done.returncode}")[:200]
            return ClockReading(False, f"timedatectl: {problem}")
        return ClockReading(value == "yes", f"NTPSynchronized={value}")


def clock_source(settings: ClockSettings) -> ClockSource | None:
    """The configured source (None: ``none``)."""
    match settings.source:
        case ClockSourceName.ADJTIMEX:
            return AdjtimexSource()
        case ClockSourceName.TIMEDATECTL:
            return TimedatectlSource()
        case _:
            return None


class ClockHealth(TypedDict):
    """Health ``devices.engine.clock``: the clock status and the server's measured command skew."""

    source: str
    synchronised: bool | None
    detail: str | None
    checked_at: float | None
    command_skew_s: float | None
    command_action: str | None
    max_skew_s: float
    clock_gate: bool


class ClockWatch:
    """Polls the clock source, tells the engine of a change, and keeps the command skew for health."""

    def __init__(
        self,
        source: ClockSource | None,
        submit: Callable[[ClockStatus], None],
        *,
        settings: ClockSettings,
        max_skew_s: float,
        clock_gate: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.submit = submit
        self.settings = settings
        self.max_skew_s = max_skew_s
        self.clock_gate = clock_gate
        self.clock = clock
        self._lock = threading.Lock()
        self._last: ClockReading | None = None
        self._checked_at: float | None = None
        self._next_poll = 0.0  # (monotonic) the first turn polls
        self._skew: tuple[float, str] | None = None

    def poll(self, monotonic_now: float) -> None:
        """Main loop: read the source when its interval has passed; a changed state goes to the engine."""
        if self.source is None or monotonic_now < self._next_poll:
            return
        self._next_poll = monotonic_now + self.settings.poll_s
        try:
            reading = self.source.read()
        except Exception as exc:  # a broken source is an unknown clock: not synchronised
            reading = ClockReading(False, f"{self.source.name} failed: {exc}"[:200])
        now = self.clock()
        with self._lock:
            changed = self._last is None or self._last.synchronised != reading.synchronised
            self._last = reading
            self._checked_at = now
        if changed:
            self.submit(ClockStatus(reading.synchronised, now, self.source.name, reading.detail))

    def note_command(self, command: SupervisorCommand) -> None:
        """A verified command (publisher thread): its receive time minus its signed issued time."""
        if command.issued_at is None:
            return
        with self._lock:
            self._skew = (round(command.at - command.issued_at, 3), command.action)

    def health(self) -> ClockHealth:
        with self._lock:
            last, skew = self._last, self._skew
            checked_at = self._checked_at
        return ClockHealth(
            source=self.settings.source.value,
            synchronised=None if last is None else last.synchronised,
            detail=None if last is None else last.detail,
            checked_at=checked_at,
            command_skew_s=None if skew is None else skew[0],
            command_action=None if skew is None else skew[1],
            max_skew_s=self.max_skew_s,
            clock_gate=self.clock_gate,
        )
