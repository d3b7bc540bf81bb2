"""The main loop's wake-up pipe: other threads and signals wake the daemon's main loop here.

A signal handler must not log or take a lock (it runs between two bytecodes of a main thread
that may hold one), so the daemon's handlers only write a byte to this pipe; the main loop
waits on it and does the rest.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading

__all__ = ["CAUGHT_SIGNALS", "Wakeup", "WakingEvent"]


class Wakeup:
    """A pipe the main loop waits on: another thread writes a byte to wake it, and once
    :meth:`catch_signals` ran, so does the interpreter's own C-level signal handler (the
    signal's number, ``signal.set_wakeup_fd``), whichever thread the signal interrupted. The
    main loop learns of a signal from the pipe even when the interpreter has not run the
    Python-level handler yet (it runs those only on the main thread, between bytecodes: a
    signal that lands on another thread while the main thread waits in ``select`` would wait
    for the next timeout, and was seen to be missed altogether under load)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._closed = False

    def wake(self) -> None:
        """Wake the waiting loop (any thread, or a signal handler); nothing once closed."""
        if self._closed:
            return
        with contextlib.suppress(OSError):  # a full pipe is awake already
            os.write(self._write, b"!")

    def catch_signals(self) -> None:
        """Have every signal with a Python handler write its number to the pipe (main thread)."""
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)

    def wait(self, timeout: float) -> set[int]:
        """Until woken or ``timeout`` seconds; every pending wake is consumed. Returns the
        numbers of the signals that wrote to the pipe."""
        seen: set[int] = set()
        readable, _, _ = select.select([self._read], [], [], max(0.0, timeout))
        if readable:
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(self._read, 512):
                    seen.update(chunk)
        return seen & CAUGHT_SIGNALS

    def close(self) -> None:
        self._closed = True
        if threading.current_thread() is threading.main_thread():  # where it was installed
            previous = signal.set_wakeup_fd(-1)
            if previous != self._write:  # not ours: put it back
                signal.set_wakeup_fd(previous)
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


CAUGHT_SIGNALS = {int(signal.SIGTERM), int(signal.SIGINT), int(signal.SIGHUP)}
"""The signals the daemon handles (their numbers as the wakeup pipe carries them)."""


class WakingEvent(threading.Event):
    """A :class:`threading.Event` whose ``set`` also wakes the main loop's :class:`Wakeup`."""

    def __init__(self, wakeup: Wakeup) -> None:
        super().__init__()
        self._wakeup = wakeup

    def set(self) -> None:
        super().set()
        self._wakeup.wake()
