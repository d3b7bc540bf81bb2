"""What every reader driver shares: the thread, the sink, connection state and health.

A driver only moves bytes: it keeps the device open, feeds what it reads to its
protocol decoder with the clock's time, and hands each new engine input to the
sink. Repeats are counted, rejected frames are counted and logged (a rejected frame
that stood for a dealt card also reaches the sink as its ``ReadFailed``, so the
engine asks for a rescan), and the partial frame is discarded when the device goes
away. While the device is away the sink gets one ``DeviceConnection(connected=False)``;
when it is back, one ``DeviceConnection(connected=True)``.

Every turn of a driver's loop (a read that returned bytes, a read that timed out on an
idle shoe, a slice of the reconnect wait) records :meth:`ReaderDriver.last_progress`,
which the daemon's watchdog reads: a loop blocked anywhere (a read that never returns,
a sink or decoder that hangs) stops advancing it while the thread still lives.
"""

from __future__ import annotations

import contextlib
import errno
import sys
import threading
import time
from collections.abc import Callable
from typing import Literal

import structlog

from common.inputs import DeviceConnection
from drivers.device import Clock, ReaderHealth, Sink
from drivers.protocols.frames import CommandReply, DecodedFrame, Decoder, DuplicateCounting

Counter = Literal["frames", "duplicates", "rejects", "rescans", "notices", "discarded_partials"]

log = structlog.get_logger("drivers")

EPERM_HINT = (
    "the kernel refused this device node to the service (systemd DeviceAllow=): under the "
    "strict-devices drop-in only the nodes the udev names pointed to when the service started "
    "are allowed, and a device replugged since may have come back on a new node; "
    "run `systemctl restart baccarat-edge` (systemd/README.md, strict device access)"
)
EACCES_HINT = (
    "permission denied on the device node: the service user must be in its group "
    "(dialout for serial, plugdev for raw USB, video for cameras; `id baccarat-edge`) and the "
    "udev rule must set GROUP/MODE (systemd/99-baccarat-edge.rules)"
)


def open_failure_hint(exc: BaseException) -> str | None:
    """What a technician should check when a device cannot be opened, by the error's errno.

    EPERM is the device cgroup (``DevicePolicy=closed`` without a matching ``DeviceAllow=``),
    EACCES the file permissions; anything else (ENOENT: unplugged) needs no hint.
    """
    code = getattr(exc, "errno", None)
    if code == errno.EPERM:
        return EPERM_HINT
    if code == errno.EACCES:
        return EACCES_HINT
    return None


WAIT_SLICE_S = 1.0
"""Longest stretch a waiting reader loop goes without recording a turn (reconnect backoff is up to 30 s)."""


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)  # whatever stderr is now, not at configure time


def log_to_stderr() -> None:
    """For the technician commands: driver logs on stderr, so stdout stays machine-readable.

    Leaves an existing structlog configuration (the daemon's) alone.
    """
    if not structlog.is_configured():
        structlog.configure(logger_factory=_stderr_logger)


class ReaderDriver:
    """Base of the serial and USB reader drivers (runs its own thread); a :class:`~drivers.device.Device`."""

    kind = "reader"

    def __init__(self, *, device: str, decoder: Decoder, sink: Sink, clock: Clock) -> None:
        self.device = device
        self.decoder = decoder
        # A driver forwards only new inputs: a decoder that can count its repeats instead of
        # building frames for them does so (the shoe sends every frame about three times).
        self._counting: DuplicateCounting | None = None
        if isinstance(decoder, DuplicateCounting):
            decoder.drop_duplicates()
            self._counting = decoder
        self._sink = sink
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: float | None = None  # time.monotonic() of the loop's last turn
        self._state = threading.Condition()
        self._connected: bool | None = None  # None until the first attempt
        self._received = 0
        self._last_read_at: float | None = None
        self._reconnects = 0
        self._ever_connected = False
        self._counts: dict[Counter, int] = {
            "frames": 0,
            "duplicates": 0,
            "rejects": 0,
            "rescans": 0,
            "notices": 0,
            "discarded_partials": 0,
        }
        self._last_error: str | None = None
        self._open_refused: int | None = None  # errno of the open failure last logged with a hint
        self._replies: list[CommandReply] = []
        self.tap: Callable[[bytes, float], None] | None = None
        """Called with every raw chunk (serial bytes or one HID report) and its time: ``record`` uses it."""

    # -- runtime contract ---------------------------------------------------------

    def start(self) -> None:
        """Start the reader thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._progress = time.monotonic()
        self._thread = threading.Thread(target=self._run_guarded, name=f"reader-{self.device}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the device."""
        self._stop.set()
        self._interrupt()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the reader loop's last turn; None when its thread is not running.

        The loop turns at least once per read timeout on an idle device and once per
        :data:`WAIT_SLICE_S` while it waits to reconnect, so only a blocked loop falls behind.
        """
        thread = self._thread
        if thread is None or not thread.is_alive():
            return None
        return self._progress

    def health(self) -> ReaderHealth:
        """Connection state and counters, JSON-ready."""
        with self._state:
            counts = self._counts
            return ReaderHealth(
                driver=self.kind,
                device=self.device,
                connected=bool(self._connected),
                # None until the first open attempt has a result
                state="opening"
                if self._connected is None
                else "connected"
                if self._connected
                else "disconnected",
                last_read_at=self._last_read_at,
                reconnects=self._reconnects,
                bytes=self._received,
                last_error=self._last_error,
                running=self._thread is not None and self._thread.is_alive(),
                frames=counts["frames"],
                duplicates=counts["duplicates"],
                rejects=counts["rejects"],
                rescans=counts["rescans"],
                notices=counts["notices"],
                discarded_partials=counts["discarded_partials"],
            )

    # -- waiting helpers (replay, tests) -----------------------------------------

    def wait_until_received(self, count: int, timeout: float) -> bool:
        """Block until ``count`` bytes in total have been read and decoded."""
        with self._state:
            return self._state.wait_for(lambda: self._received >= count, timeout)

    def wait_until_connected(self, connected: bool, timeout: float) -> bool:
        """Block until the driver's view of the device is ``connected``."""
        with self._state:
            return self._state.wait_for(lambda: self._connected is connected, timeout)

    # -- for subclasses -------------------------------------------------------------

    def _run(self) -> None:
        raise NotImplementedError

    def _turned(self) -> None:
        """One turn of the loop: call at every read, timed out or not, and while waiting."""
        self._progress = time.monotonic()

    def _wait(self, delay: float) -> None:
        """Wait ``delay`` seconds (or until stopped) in slices, so a long backoff still shows progress."""
        deadline = time.monotonic() + delay
        while not self._stop.is_set():
            self._turned()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._stop.wait(min(remaining, WAIT_SLICE_S))

    def _interrupt(self) -> None:
        """Wake a blocking read so ``stop`` is prompt (optional)."""

    def _run_guarded(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a bug here must be loud, not a silent dead reader
            with contextlib.suppress(Exception):  # even when logging itself is what failed
                log.exception("reader thread crashed", device=self.device)
            with self._state:
                self._last_error = f"reader thread crashed: {exc!r}"
            self._mark_disconnected(f"reader thread crashed: {exc!r}")

    def _raw(self, data: bytes, at: float) -> None:
        """Hand a raw chunk to the tap, if any (before decoding, so a recording misses nothing)."""
        if self.tap is not None:
            self.tap(data, at)

    def _deliver(self, frames: list[DecodedFrame], received: int) -> None:
        """Forward new inputs to the sink; count the rest; then account ``received`` bytes."""
        for frame in frames:
            if frame.rejected is not None:
                self._count("rejects")
                log.warning(
                    "frame rejected", device=self.device, reason=frame.rejected, raw=frame.raw.hex(" ")
                )
                if frame.rescan is not None:  # a card the reader sent but we could not take
                    self._count("rescans")
                    self._sink(frame.rescan)
            elif frame.duplicate:
                self._count("duplicates")
            elif frame.reply is not None:
                with self._state:
                    self._replies.append(frame.reply)
                    self._state.notify_all()
            elif frame.notice is not None:
                self._count("notices")
                log.warning("reader notice", device=self.device, notice=frame.notice, raw=frame.raw.hex(" "))
            elif frame.input is not None:
                self._count("frames")
                self._sink(frame.input)
        dropped = self._counting.take_dropped_duplicates() if self._counting is not None else 0
        with self._state:
            self._counts["duplicates"] += dropped
            if received:
                self._received += received
                self._last_read_at = self._clock()
            self._state.notify_all()

    def _discard_partial(self) -> None:
        """The device went away: a half-received frame must not be glued to what comes next."""
        frames = self.decoder.reset()
        if frames:
            self._count("discarded_partials", len(frames))
            self._deliver(frames, 0)

    # Only the driver's own thread changes the connection state. The sink hears about a change
    # before waiters do, so whoever waits on the state sees the input already delivered.

    def _open_failed(self, what: str, exc: BaseException) -> None:
        """The device could not be opened: disconnected, with a hint when the errno has one.

        A refused open is logged once per errno until the device opens again (the reconnect
        loop retries it with backoff; the state change alone is logged only once, and a
        replug under the strict device policy first shows up as a read error).
        """
        hint = open_failure_hint(exc)
        detail = f"{what}: {exc}" if hint is None else f"{what}: {exc} — {hint}"
        code = getattr(exc, "errno", None)
        if hint is not None and code != self._open_refused:
            self._open_refused = code
            log.error("device open refused", device=self.device, error=str(exc), errno=code, hint=hint)
        self._mark_disconnected(detail)

    def _mark_connected(self, detail: str) -> None:
        with self._state:
            was = self._connected
        if was is not True:
            log.info("device connected", device=self.device, detail=detail)
            self._sink(DeviceConnection(connected=True, at=self._clock(), device=self.device, detail=detail))
        self._open_refused = None
        with self._state:
            if self._ever_connected and was is False:
                self._reconnects += 1
            self._ever_connected = True
            self._connected = True
            self._state.notify_all()

    def _mark_disconnected(self, detail: str) -> None:
        with self._state:
            was = self._connected
        if was is not False:
            log.warning("device away", device=self.device, detail=detail)
            self._sink(DeviceConnection(connected=False, at=self._clock(), device=self.device, detail=detail))
        with self._state:
            self._connected = False
            self._last_error = detail
            self._state.notify_all()

    def _count(self, name: Counter, n: int = 1) -> None:
        with self._state:
            self._counts[name] += n

    def _take_reply(self, timeout: float) -> CommandReply | None:
        with self._state:
            if not self._state.wait_for(lambda: bool(self._replies), timeout):
                return None
            return self._replies.pop(0)

    def _clear_replies(self) -> None:
        with self._state:
            self._replies.clear()
