"""lock/unlock on the shoe, performed off the engine thread and off paho's network thread.

The path of a ``lock``/``unlock`` supervisor command:

1. the publisher verifies it and hands it to the runner like any other command;
2. the engine thread journals it: the engine answers ``command_accepted`` plus a
   ``reader_command_requested`` event (or ``command_refused``), so every request
   is on the audit trail before anything touches the device;
3. this worker sends the Angel Eye ``LK`` command to every reader that takes host
   commands and waits for its ACK/NAK (up to ``timeout`` seconds per reader);
4. the result goes back into the engine queue as an input (``ReaderSignal``
   LOCKED/UNLOCKED on ACK, :func:`refusal_input` on NAK, no answer or error), so
   it is journaled too, and only then is the supervisor's reply sent.

A crash between steps 2 and 3 leaves a journaled request that was never performed:
it is not retried after a restart (the supervisor got no reply and sends it again).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

import structlog

from common.inputs import EngineInput, ReaderSignal, ReaderSignalKind, SupervisorCommand
from daemon.mqtt.command_channel import CommandAnswer, ReplyFn, refused
from drivers.device import HostCommands

log = structlog.get_logger("baccarat_edge.reader_commands")

LOCK_CODES: dict[str, int] = {"lock": 2, "unlock": 1}
"""Angel Eye ``LK`` data: 2 locks the shoe, 1 unlocks it."""

IDLE_SLICE_S = 1.0
"""Longest an idle worker loop goes without a turn (its watchdog sign of life)."""

_DONE_KIND = {"lock": ReaderSignalKind.LOCKED, "unlock": ReaderSignalKind.UNLOCKED}


@dataclass(frozen=True, slots=True)
class ReaderRequest:
    """A journaled lock/unlock to perform, with the engine's answer to send once it is done."""

    command: SupervisorCommand
    reply: ReplyFn
    answer: CommandAnswer


class _Stop:
    pass


class ReaderCommandsHealth(TypedDict):
    """The worker's part of the engine health block."""

    running: bool
    waiting: int
    performed: int


def refusal_input(
    device: str, at: float, command: SupervisorCommand, detail: str, *, code: int | None = None
) -> EngineInput:
    """The input telling the engine a reader did not carry out ``command`` (it raises an alert)."""
    return ReaderSignal(
        ReaderSignalKind.COMMAND_REFUSED,
        at,
        code=code,
        detail=f"{command.action}: {detail}",
        device=device,
        command_id=command.command_id,
    )


class ReaderCommandWorker:
    """One thread performing reader commands in the order the engine journaled them."""

    def __init__(
        self,
        drivers: Callable[[], Mapping[str, object]],
        submit: Callable[[EngineInput], None],
        clock: Callable[[], float],
        timeout: float = 1.0,
    ) -> None:
        """``drivers`` returns the running devices by name: the lock/unlock goes to each one that
        takes host commands (:class:`~drivers.device.HostCommands`); ``submit`` queues the
        result for the engine; ``timeout`` bounds each reader's answer."""
        self._drivers = drivers
        self._submit = submit
        self._clock = clock
        self._timeout = timeout
        self._queue: queue.Queue[ReaderRequest | _Stop] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._progress: float | None = None  # time.monotonic() of the loop's last turn
        self.performed = 0

    def start(self) -> None:
        if self._thread is None:
            self._progress = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="reader-commands", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the requests already queued (each bounded by the reader timeout), then exit."""
        if self._thread is not None:
            self._queue.put(_Stop())
            self._thread.join(timeout)

    def request(self, request: ReaderRequest) -> None:
        """Queue a journaled request (called by the engine thread; never blocks)."""
        self._queue.put(request)

    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the worker loop's last turn; None when its thread is not running.

        The idle loop turns every :data:`IDLE_SLICE_S`, and a command turns it before and after
        each reader it is sent to (each bounded by the reader timeout), so only a loop blocked in
        a driver's ``send_command`` or in a reply falls behind, and the watchdog sees it.
        """
        thread = self._thread
        if thread is None or not thread.is_alive():
            return None
        return self._progress

    def health(self) -> ReaderCommandsHealth:
        """Whether the thread runs, requests waiting, requests performed."""
        return ReaderCommandsHealth(
            running=self._thread is not None and self._thread.is_alive(),
            waiting=self._queue.qsize(),
            performed=self.performed,
        )

    def _run(self) -> None:
        while True:
            self._progress = time.monotonic()
            try:
                item = self._queue.get(timeout=IDLE_SLICE_S)
            except queue.Empty:
                continue
            if isinstance(item, _Stop):
                return
            try:
                self._perform(item)
            except Exception as exc:  # the reply must still go out; the thread must live on
                log.exception("reader_command_crashed", error=str(exc))
                item.reply(refused(f"reader command failed: {exc}"))

    def _perform(self, request: ReaderRequest) -> None:
        command = request.command
        action = command.action
        targets = [(n, d) for n, d in self._drivers().items() if isinstance(d, HostCommands)]
        if action not in LOCK_CODES or not targets:
            why = "no configured reader accepts host commands" if not targets else f"{action!r} is unknown"
            self._submit(refusal_input("reader", self._clock(), command, why))
            request.reply(refused(why))
            return
        failures: list[str] = []
        for name, driver in targets:
            self._progress = time.monotonic()
            detail, code = self._send(name, driver, action)
            self._progress = time.monotonic()
            at = self._clock()
            if detail is None:
                self._submit(
                    ReaderSignal(
                        _DONE_KIND[action],
                        at,
                        detail=f"{action} acknowledged",
                        device=name,
                        command_id=command.command_id,
                    )
                )
            else:
                failures.append(f"{name}: {detail}")
                self._submit(refusal_input(name, at, command, detail, code=code))
        self.performed += 1
        log.info("reader_command_done", action=action, command_id=command.command_id, failures=failures)
        if failures:
            request.reply(refused("; ".join(failures)))
        else:
            request.reply(request.answer)

    def _send(self, name: str, driver: HostCommands, action: str) -> tuple[str | None, int | None]:
        """(None, None) when the reader acknowledged; otherwise what went wrong and its NAK code."""
        try:
            answer = driver.send_command("LK", LOCK_CODES[action], timeout=self._timeout)
        except Exception as exc:
            log.warning("reader_command_failed", device=name, action=action, error=str(exc))
            return f"cannot send: {exc}", None
        if answer is None:
            return "no answer from the reader (offline or silent)", None
        if not answer.ok:
            code, meaning = answer.code, answer.meaning
            number = int(code) if code is not None and code.isdigit() else None
            return f"the reader refused (NAK {code}{f': {meaning}' if meaning else ''})", number
        return None, None
