"""The engine thread: one input queue, the only code that touches the engine.

::

    reader/camera threads ─┐                           ┌─> journal (fsync) ─> publisher
    MQTT commands ─────────┼─> queue ─> engine thread ─┤
    clock ticks (timeout) ─┘                           └─> retained state snapshot

* For every input the engine thread asks the engine for events, appends input and events
  to the journal in one transaction (:class:`~daemon.service.journal_writer.JournalWriter`,
  retried until stored), and only then wakes the publisher.
* The queue is unbounded: no input is ever dropped (a dealer makes a few per second;
  ``service.input_queue_max`` is only the depth at which a warning is logged).
* The journal's capacity reaches the engine as ``StorageState`` inputs on transitions
  (full / has room), checked before any card that could open a round and on idle ticks:
  the engine itself refuses a card that would open a round while the journal is full
  (``card_refused`` + alert) and lets the round in progress finish.
* ``lock``/``unlock`` are engine commands like any other (journaled); the reader I/O
  happens on :class:`~daemon.service.reader_commands.ReaderCommandWorker` and its result
  comes back as a journaled input before the supervisor's reply goes out.
* An engine exception is logged, the input journaled for audit, the engine rebuilt from
  the durable journal and an ``engine_error`` alert raised.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from common.inputs import CardRead, EngineInput, StorageState, SupervisorCommand, Tick
from daemon.alerts import AlertCode
from daemon.engine.events import ROUND_BOUNDARY_KINDS
from daemon.engine.state import GAME_FLOW_ACTOR, Phase
from daemon.engine.table import Engine
from daemon.journal.records import JournaledEvent
from daemon.mqtt.command_channel import CommandAnswer, ReplyFn, refused
from daemon.service.card_nonces import with_nonce
from daemon.service.engine_restore import SnapshotTaker
from daemon.service.journal_housekeeping import JournalHousekeeping
from daemon.service.journal_writer import JournalWriter, log_event
from daemon.service.reader_commands import ReaderCommandWorker, ReaderRequest
from daemon.service.state_snapshot import StateSnapshot
from daemon.service.stats import RunnerStats

log = structlog.get_logger("baccarat_edge.runner")


def _nobody_waits(_answer: CommandAnswer) -> None:
    """The reply of a request nobody sent as a command (the engine's own betting-window lock)."""


STORAGE_CHECK_INTERVAL_S = 1.0
"""How often an idle engine thread re-checks the journal's capacity (a card checks at once)."""


@dataclass(frozen=True, slots=True)
class Command:
    """A verified supervisor command and the publisher's function to answer it."""

    command: SupervisorCommand
    reply: ReplyFn


class Stop:
    """Sentinel: the engine thread drains the queue up to here, then exits."""


@dataclass(frozen=True, slots=True)
class Barrier:
    """Set once the engine thread has handled every item queued before it."""

    reached: threading.Event


QueueItem = EngineInput | Command | Stop | Barrier


class InputQueue:
    """The engine's input queue: unbounded (an input is never dropped), any thread puts."""

    def __init__(self, warn_at: int, stats: RunnerStats) -> None:
        self.warn_at = warn_at
        self._stats = stats
        self._queue: queue.Queue[QueueItem] = queue.Queue()
        self._deep = False

    def put(self, item: QueueItem) -> None:
        """Queue ``item``; the crossing of ``warn_at`` is logged once each way, not per input."""
        self._queue.put(item)
        deep = self._queue.qsize() >= self.warn_at
        if deep != self._deep:
            self._deep = deep
            if deep:
                self._stats.queue_depth_warnings += 1
                log.warning("input_queue_deep", depth=self._queue.qsize(), warn_at=self.warn_at)
            else:
                log.info("input_queue_normal", depth=self._queue.qsize())

    def get(self, timeout: float) -> QueueItem:
        """The next item; raises ``queue.Empty`` after ``timeout`` seconds."""
        return self._queue.get(timeout=timeout)

    def qsize(self) -> int:
        return self._queue.qsize()

    def empty(self) -> bool:
        return self._queue.empty()

    def inputs_queued(self) -> int:
        """Inputs and commands in the queue (not the barriers and stop markers among them)."""
        with self._queue.mutex:
            return sum(1 for item in self._queue.queue if not isinstance(item, Barrier | Stop))


class EngineLoop:
    """The engine thread: takes inputs off the queue, steps the engine, stores, publishes."""

    def __init__(
        self,
        engine: Engine,
        writer: JournalWriter,
        inputs: InputQueue,
        snapshot: StateSnapshot,
        reader_commands: ReaderCommandWorker,
        housekeeping: JournalHousekeeping,
        *,
        restore: Callable[[], Engine],
        notify: Callable[[], None],
        clock: Callable[[], float],
        tick_interval_s: float,
        done: threading.Event,
        on_events: Callable[[list[JournaledEvent]], None] | None = None,
        snapshots: SnapshotTaker | None = None,
    ) -> None:
        """``restore`` rebuilds the engine from the journal after an engine failure; ``notify``
        wakes the publisher; ``done`` is set when the thread ends; ``housekeeping`` (compaction,
        the journal capacity alerts) runs on this thread, between inputs."""
        self.engine = engine
        self.writer = writer
        self.journal = writer.journal
        self.stats = writer.stats
        self.inputs = inputs
        self.snapshot = snapshot
        self.reader_commands = reader_commands
        self.housekeeping = housekeeping
        self._restore = restore
        self._notify = notify
        self._clock = clock
        self._tick = tick_interval_s
        self.done = done
        self._on_events = on_events
        self._snapshots = snapshots  # stores engine-state snapshots (shoe ends) for quick restarts
        self._beat: Callable[[], None] = lambda: None
        self._thread: threading.Thread | None = None
        self.storage_full = bool(engine.state.storage_full)
        self._storage_checked = 0.0

    def start(self, beat: Callable[[], None]) -> None:
        """Start the thread; ``beat`` is its watchdog heartbeat, called on every turn."""
        self._beat = beat
        self.writer.beat = beat
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Drain the queue into the journal and end the thread (within ``timeout`` seconds).

        A failing journal is retried for half that time, then each input it could not store
        is logged (never silently lost).
        """
        if self._thread is None:
            return
        self.writer.give_up_at(time.monotonic() + timeout / 2)
        self.inputs.put(Stop())
        self._thread.join(timeout=timeout)

    def _run(self) -> None:
        try:
            while True:
                self._beat()
                try:
                    item = self.inputs.get(timeout=self._tick)
                except queue.Empty:
                    item = Tick(at=self._clock())
                if isinstance(item, Stop):
                    self._store_refusal_summary()
                    break
                if isinstance(item, Barrier):
                    item.reached.set()
                    continue
                self._update_storage_state(item)
                self._step(item)
                self.writer.report_outage_when_due(idle_tick=isinstance(item, Tick))
                self.housekeeping.run(time.monotonic())
                if not isinstance(item, Tick):
                    self.stats.processed += 1
                self.snapshot.refresh_if_due(self.engine)
        finally:
            self.snapshot.refresh_if_stale(self.engine)  # the publisher's final state on stop
            self.done.set()

    def _store_refusal_summary(self) -> None:
        """Before a clean stop: journal the engine's pending cards_refused summary (with an idle
        tick as its input), so no refused card it absorbed is lost."""
        events = self.engine.summarise_refusals()
        if events and not self.writer.abandoned and self.writer.store(Tick(at=self._clock()), events):
            self._notify()

    def _step(self, item: EngineInput | Command) -> None:
        inp: EngineInput = item.command if isinstance(item, Command) else item
        inp = with_nonce(inp, self.engine.emitter.squeeze)  # a squeeze table's card: its secret nonce
        if self.writer.abandoned:
            if not isinstance(inp, Tick):
                self.writer.not_stored(inp, "an earlier input could not be stored")
            if isinstance(item, Command):
                item.reply(refused("the journal could not store the command (daemon stopping)"))
            return
        try:
            events = self.engine.handle(inp)
        except Exception as exc:
            self._engine_failed(inp, exc)
            if isinstance(item, Command):
                item.reply(refused(f"the engine failed on this command: {exc}"))
            return
        if not events and (isinstance(inp, Tick) or self.engine.absorbed):
            # idle ticks are not worth a journal row, nor a refused card the engine tallied into
            # its episode's next cards_refused summary (daemon/engine/aggregate.py)
            return
        journaled = self.writer.store(inp, events)
        if journaled is None:
            if isinstance(item, Command):
                item.reply(refused("the journal could not store the command (daemon stopping)"))
            return
        if self._snapshots is not None:
            self._snapshots.after_append(self.engine, journaled)
        self.stats.inputs += 1
        self.stats.events += len(journaled)
        for event in journaled:
            self.stats.events_by_kind[event.kind] = self.stats.events_by_kind.get(event.kind, 0) + 1
            log_event(event)
        self.snapshot.observe(journaled)
        if events:
            self.snapshot.mark_stale()
            if any(event.kind in ROUND_BOUNDARY_KINDS for event in events):
                self.snapshot.refresh(self.engine)  # the publisher sends state at once after a boundary
        self._notify()
        if isinstance(item, Command):
            self.stats.commands += 1
            self._answer(item, journaled)
        self._request_betting_locks(journaled)
        if self._on_events is not None and journaled:
            self._on_events(journaled)

    def _answer(self, item: Command, journaled: list[JournaledEvent]) -> None:
        """Reply now, or once the reader carried out an accepted lock/unlock."""
        answer = answer_for(item.command, journaled)
        requested = any(
            e.kind == "reader_command_requested" and e.data.get("command_id") == item.command.command_id
            for e in journaled
        )
        if answer["accepted"] and requested:
            self.reader_commands.request(ReaderRequest(item.command, item.reply, answer))
        else:
            item.reply(answer)

    def _request_betting_locks(self, journaled: list[JournaledEvent]) -> None:
        """The shoe lock/unlock the engine asks for itself with the betting window
        (``table.betting.lock_shoe``): journaled, then performed by the reader worker like a
        supervisor's; the shoe's answer comes back as an input (nobody waits for a reply)."""
        for event in journaled:
            if event.kind == "reader_command_requested" and event.data.get("actor") == GAME_FLOW_ACTOR:
                request = SupervisorCommand(
                    action=event.data["action"],
                    at=event.at,
                    actor=GAME_FLOW_ACTOR,
                    command_id=event.data["command_id"],
                    args={},
                )
                self.reader_commands.request(
                    ReaderRequest(request, _nobody_waits, CommandAnswer(accepted=True))
                )

    def _update_storage_state(self, item: QueueItem) -> None:
        """Tell the engine when the journal filled up or has room again.

        Checked before a card (a read, or a supervisor's ``assign_card``) only when it could
        open a round (mid-round cards are admitted anyway, and the check must not cost every
        card) or while the engine believes the journal full; on idle ticks at most every
        STORAGE_CHECK_INTERVAL_S.
        """
        if self.writer.abandoned:
            return
        places_card = isinstance(item, CardRead) or (
            isinstance(item, Command) and item.command.action == "assign_card"
        )
        if places_card:
            if not self.storage_full and _mid_round(self.engine):
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
        if full == self.storage_full:
            return
        self.storage_full = full
        self.stats.storage_transitions += 1
        detail = None
        if full:
            try:
                detail = self.journal.capacity().reason
            except Exception as exc:
                detail = f"capacity unknown: {exc}"
        log.warning("journal_storage_state", full=full, detail=detail)
        self._step(StorageState(full=full, at=self._clock(), detail=detail))

    def _engine_failed(self, inp: EngineInput, exc: Exception) -> None:
        """A bug in the engine must not stop the table: keep the input for audit, rebuild, go on."""
        self.stats.engine_errors += 1
        log.exception("engine_failed", input=type(inp).__name__, error=str(exc))
        self.writer.store_for_audit(inp)
        try:
            self.engine = self._restore()
        except Exception:
            # The journal cannot be read back right now: go on with the engine as it stood
            # (the input was not applied); a restart rebuilds it from the journal.
            log.exception("engine_restore_failed")
        self.storage_full = bool(self.engine.state.storage_full)
        self.snapshot.reset(self.engine)
        self.writer.raise_alert(
            AlertCode.ENGINE_ERROR,
            f"the engine failed on a {type(inp).__name__} input; it was journaled for "
            "audit and not applied; the table state was rebuilt from the journal",
            {"error": str(exc)},
        )


def answer_for(command: SupervisorCommand, journaled: list[JournaledEvent]) -> CommandAnswer:
    """The engine's command_accepted/command_refused event for ``command``, as the reply."""
    for event in journaled:
        if event.kind in ("command_accepted", "command_refused") and (
            event.data.get("command_id") == command.command_id
        ):
            reason = event.data.get("reason")
            return CommandAnswer(
                accepted=event.kind == "command_accepted",
                reason=None if reason is None else str(reason),
                event_id=event.event_id,
                seq=event.seq,
            )
    return CommandAnswer(accepted=False, reason="the engine gave no answer to this command")


def _mid_round(engine: Engine) -> bool:
    """A round (or the opening burn) is under way: its cards are still accepted when full."""
    state = engine.state
    return state.round is not None or state.phase in (Phase.INDICATOR, Phase.BURNING)
