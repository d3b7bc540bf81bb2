"""The game flow: the betting window and the server's round ids, the shoe lock that
goes with it, the shoe procedure marks of readers that name no slot, the ``cut_card`` command,
and the check of a reader's frames across a restart (``README.md``, "Game flow").

With ``table.game_flow: betting_window`` the betting window says what a card between rounds is
(``Dealing._plan_by_betting_window``); this module moves the window: ``open_betting`` /
``close_betting`` commands from the game server, or ``BettingOpened`` / ``BettingClosed`` inputs
from a dealer button or the shoe's lock state. Nothing out of order is guessed: a command is
refused with its reason (and, where the floor must know, an alert), an input is alerted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

from common.inputs import (
    BettingClosed,
    BettingOpened,
    CutCardDrawn,
    GameFlowSource,
    ReaderSignal,
    ReaderSignalKind,
    ShoeSignal,
    ShoeSignalKind,
    Source,
    SupervisorCommand,
)
from common.slots import Slot
from daemon.alerts import AlertCode
from daemon.engine import commands as args_
from daemon.engine.clock_gate import ClockGate
from daemon.engine.commands import Outcome, Refused
from daemon.engine.dealing import Dealing, Placement
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.flow_timing import LateClose, claim_late_cards, judge_close
from daemon.engine.payloads import AlertData, ReadFields
from daemon.engine.phases import GAME_FLOW_ACTOR, NEXT_ROUND, OUTSIDE_SHOE, FlowPhase, Phase
from daemon.engine.settings import GameFlow
from daemon.engine.shoe import ShoeSetup
from daemon.engine.signals import DeviceSignals
from daemon.engine.state import TableState


class BettingAction(StrEnum):
    """What a betting window input or command does (its command's action)."""

    OPEN = "open_betting"
    CLOSE = "close_betting"


class LockAction(StrEnum):
    """The shoe lock the engine asks for with the betting window (``reader_command_requested``)."""

    LOCK = "lock"
    UNLOCK = "unlock"


_OPEN = BettingAction.OPEN
_CLOSE = BettingAction.CLOSE


@dataclass(frozen=True, slots=True)
class FlowProblem:
    """Why a betting open/close cannot be taken. ``repeat``: it repeats the window's current state
    (a resent command): refused, no alert. ``code``: the alert to raise (None: none)."""

    reason: str
    code: AlertCode | None = AlertCode.BETTING_OUT_OF_ORDER
    repeat: bool = False


@dataclass(frozen=True, slots=True)
class Sequence:
    """How a round id follows the last one: ``reason`` None when it is the next one."""

    reason: str | None
    accepted: bool = True


def round_id_sequence(last: str | None, new: str) -> Sequence:
    """How ``new`` follows ``last`` (both server round ids, ``commands.ROUND_ID``).

    The next id has the same prefix and the next number. A repeated or earlier number is
    refused; a skipped number (rounds the edge did not see) or another prefix is accepted, for
    the server owns its ids, but alerted and held.
    """
    if last is None:
        return Sequence(None)
    before, after = args_.round_id_parts(last), args_.round_id_parts(new)
    if before is None or after is None:
        return Sequence("unparsable")
    if before[0] != after[0]:
        return Sequence("prefix_changed")
    if after[1] == before[1]:
        return Sequence("repeated", accepted=False)
    if after[1] < before[1]:
        return Sequence("backwards", accepted=False)
    if after[1] > before[1] + 1:
        return Sequence("skipped")
    return Sequence(None)


class BettingWindow:
    """Betting window inputs and commands, shoe signals, ``cut_card``, the shoe lock's answers."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing
    signals: DeviceSignals
    clock: ClockGate

    def __init__(
        self,
        *,
        state: TableState,
        shoe: ShoeSetup,
        emitter: Emitter,
        dealing: Dealing,
        signals: DeviceSignals,
        clock: ClockGate,
    ) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing
        self.signals = signals
        self.clock = clock

    # ------------------------------------------------------------------ checks
    def _flow_problem(
        self, action: BettingAction, source: GameFlowSource, round_id: str | None
    ) -> FlowProblem | None:
        """Why the betting window cannot open or close now (None: it can)."""
        flow = self.shoe.settings.game_flow
        if flow is not GameFlow.BETTING_WINDOW:
            return FlowProblem(f"this table's game_flow is {flow.value!r}: it takes no betting window")
        configured = self.shoe.settings.betting.source
        if source != configured:
            return FlowProblem(
                f"this table's betting window comes from {configured.value!r}, not {source.value!r}"
            )
        if round_id is not None and args_.round_id_parts(round_id) is None:
            return FlowProblem(f"round id {round_id!r} is not in the accepted form (see open_betting)")
        if self.state.phase in OUTSIDE_SHOE:
            return FlowProblem("no shoe is being dealt")
        match action:
            case BettingAction.OPEN:
                return self._open_problem(round_id)
            case BettingAction.CLOSE:
                return self._close_problem(round_id)
            case _:
                assert_never(action)

    def _open_problem(self, round_id: str | None) -> FlowProblem | None:
        st = self.state
        window = st.flow_round_id
        if st.flow_phase == FlowPhase.BETTING:
            if window == round_id:
                return FlowProblem(f"betting is already open for round {round_id}", None, repeat=True)
            return FlowProblem(f"betting is open for round {window}: close it first")
        return None

    def _close_problem(self, round_id: str | None) -> FlowProblem | None:
        st = self.state
        window = st.flow_round_id
        if st.flow_phase == FlowPhase.DEALING and window == round_id:
            return FlowProblem(f"betting is already closed for round {round_id}", None, repeat=True)
        if st.flow_phase != FlowPhase.BETTING:
            return FlowProblem("no betting is open: nothing to close")
        if window != round_id:
            return FlowProblem(f"betting is open for round {window}, not {round_id}")
        return None

    def _flow_alert(
        self, problem: FlowProblem, at: float, action: str, *, source: str, round_id: str | None
    ) -> None:
        if problem.code is not None:
            self.emitter.alert(
                problem.code, at, Source.SYSTEM, action=action, betting_source=source, round_id=round_id,
                reason=problem.reason,
            )  # fmt: skip

    # ------------------------------------------------------------------ commands
    def open_betting(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"round_id", "closes_at"})
        round_id = args_.req_round_id(cmd.args)
        closes_at = args_.opt_time(cmd.args, "closes_at")
        problem = self._flow_problem(_OPEN, GameFlowSource.SERVER, round_id)
        if problem is not None:
            return self._refused(problem, cmd, round_id)
        gate = self.clock.refusal(cmd, round_id)
        if gate is not None:
            return gate
        sequence = round_id_sequence(self.state.last_round_id, round_id)
        if not sequence.accepted:
            reason = (
                f"round id {round_id!r} is {sequence.reason} (the last round opened was "
                f"{self.state.last_round_id!r})"
            )
            return Refused(reason, alert=lambda: self._sequence_alert(cmd.at, round_id, sequence))
        opening = BettingOpened(cmd.at, GameFlowSource.SERVER, round_id, closes_at, "server", cmd.command_id)
        return lambda: self._open(opening, sequence, cmd.actor)

    def close_betting(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"round_id"})
        round_id = args_.req_round_id(cmd.args)
        problem = self._flow_problem(_CLOSE, GameFlowSource.SERVER, round_id)
        if problem is not None:
            return self._refused(problem, cmd, round_id)
        closing = BettingClosed(cmd.at, GameFlowSource.SERVER, round_id, "server", cmd.command_id)
        late = None
        if cmd.issued_at is not None:
            late = judge_close(self.state, self.shoe.settings.betting, cmd.issued_at, cmd.at)
        return lambda: self._close(closing, cmd.actor, late)

    def _refused(self, problem: FlowProblem, cmd: SupervisorCommand, round_id: str | None) -> Refused:
        if problem.code is None:
            return Refused(problem.reason)
        return Refused(
            problem.reason,
            alert=lambda: self._flow_alert(problem, cmd.at, cmd.action, source="server", round_id=round_id),
        )

    def cut_card(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, set())
        st = self.state
        if st.phase in OUTSIDE_SHOE:
            return Refused("no shoe is being dealt")
        if st.cut_card_seen:
            return Refused(f"the cut card was already reported (last round: hand {st.last_hand})")
        drawn = CutCardDrawn(cmd.at, Source.SUPERVISOR, raw=None, device="supervisor")
        return lambda: self.signals.on_cut_card(drawn)

    # ------------------------------------------------------------------ inputs (button, shoe lock)
    def on_betting_opened(self, inp: BettingOpened) -> None:
        problem = self._flow_problem(_OPEN, inp.source, inp.round_id)
        if problem is not None:
            if not problem.repeat:
                self._flow_alert(problem, inp.at, _OPEN, source=inp.source, round_id=inp.round_id)
            return
        sequence = Sequence(None)
        if inp.round_id is not None:
            sequence = round_id_sequence(self.state.last_round_id, inp.round_id)
            if not sequence.accepted:
                self._sequence_alert(inp.at, inp.round_id, sequence)
                return
        self._open(inp, sequence, None)

    def on_betting_closed(self, inp: BettingClosed) -> None:
        problem = self._flow_problem(_CLOSE, inp.source, inp.round_id)
        if problem is not None:
            if not problem.repeat:
                self._flow_alert(problem, inp.at, _CLOSE, source=inp.source, round_id=inp.round_id)
            return
        self._close(inp, None)

    # ------------------------------------------------------------------ effects
    def _open(self, inp: BettingOpened, sequence: Sequence, actor: str | None) -> None:
        st = self.state
        last = st.last_round_id
        if st.phase == Phase.ROUND:
            # The next round's betting is evidence that the round in progress is over on the table:
            # held as it stands (a card never read, cards dealt while the reader was out), never
            # completed with the next round's cards.
            self.dealing.cut_short(
                inp.at, Source.SYSTEM, next_round_id=inp.round_id, betting_source=inp.source
            )
            if st.phase in OUTSIDE_SHOE:  # it was the shoe's last round: no betting opens
                problem = FlowProblem(f"round {st.hand} was the shoe's last round: the shoe has ended")
                self._flow_alert(problem, inp.at, _OPEN, source=inp.source, round_id=inp.round_id)
                return
        self.emitter.emit(
            EventKind.BETTING_OPENED,
            inp.at,
            Source.SYSTEM,
            {
                "phase": FlowPhase.BETTING,
                "round_id": inp.round_id,
                "closes_at": inp.closes_at,
                "source": inp.source,
                "device": inp.device,
                "command_id": inp.command_id,
                "actor": actor,
                "next_hand": st.hand + 1,
            },
        )
        self.clock.opened(inp.at)
        if sequence.reason is not None and inp.round_id is not None:
            self._sequence_alert(inp.at, inp.round_id, sequence, last)
        if self.shoe.settings.betting.lock_shoe:
            self._request_lock(LockAction.LOCK, inp.at)

    def _close(self, inp: BettingClosed, actor: str | None, late: LateClose | None = None) -> None:
        st = self.state
        data: dict[str, Any] = {
            "phase": FlowPhase.DEALING,
            "round_id": inp.round_id,
            "source": inp.source,
            "device": inp.device,
            "command_id": inp.command_id,
            "actor": actor,
            "next_hand": st.hand + 1,
        }
        if late is not None:  # the server's own time: how the close was judged (README "Judged by time")
            data.update(
                issued_at=late.issued_at,
                skew_s=late.skew_s,
                within_skew=late.honoured,
                claimed=[c["card"] for c in late.claimed],
            )
        self.emitter.emit(EventKind.BETTING_CLOSED, inp.at, Source.SYSTEM, data)
        if late is not None:
            claim_late_cards(late, inp.at, state=st, emitter=self.emitter, dealing=self.dealing)
        if self.shoe.settings.betting.lock_shoe:
            pending = st.lock_request
            if pending is not None and pending["action"] == LockAction.LOCK:
                self.emitter.alert(
                    AlertCode.SHOE_NOT_LOCKED,
                    inp.at,
                    Source.SYSTEM,
                    action=LockAction.LOCK,
                    command_id=pending["command_id"],
                    reason="the shoe did not confirm the lock before betting closed",
                )
            self._request_lock(LockAction.UNLOCK, inp.at)

    def _sequence_alert(self, at: float, round_id: str, sequence: Sequence, last: str | None = None) -> None:
        self.emitter.alert(
            AlertCode.ROUND_ID_OUT_OF_SEQUENCE,
            at,
            Source.SYSTEM,
            holds=NEXT_ROUND if sequence.accepted else None,
            round_id=round_id,
            last_round_id=last if sequence.accepted else self.state.last_round_id,
            reason=sequence.reason,
            accepted=sequence.accepted,
        )

    def _request_lock(self, action: LockAction, at: float) -> None:
        """Ask the service to lock/unlock the shoe (``reader_command_requested``); the shoe's
        answer comes back as a ``ReaderSignal`` naming this command id."""
        st = self.state
        command_id = f"betting-{st.flow_windows}-{action}"
        self.emitter.emit(
            EventKind.READER_COMMAND_REQUESTED,
            at,
            Source.SYSTEM,
            {"action": action, "command_id": command_id, "actor": GAME_FLOW_ACTOR},
        )

    def is_lock_answer(self, inp: ReaderSignal) -> bool:
        request = self.state.lock_request
        return request is not None and inp.command_id == request["command_id"]

    def on_lock_answer(self, inp: ReaderSignal) -> None:
        """The shoe's answer to a lock/unlock the engine asked for with the betting window."""
        request = self.state.lock_request
        assert request is not None
        self.emitter.emit(
            EventKind.READER_STATUS,
            inp.at,
            Source.READER,
            {
                "kind": inp.kind,
                "code": inp.code,
                "detail": inp.detail,
                "device": inp.device,
                "raw": inp.raw,
                "command_id": inp.command_id,
            },
        )
        expected = (
            ReaderSignalKind.LOCKED if request["action"] == LockAction.LOCK else ReaderSignalKind.UNLOCKED
        )
        if inp.kind is not expected:
            self.emitter.alert(
                AlertCode.SHOE_NOT_LOCKED,
                inp.at,
                Source.READER,
                device=inp.device,
                action=request["action"],
                command_id=request["command_id"],
                reason=inp.detail or f"the shoe answered {inp.kind.value}",
                reader_code=inp.code,
            )

    # ------------------------------------------------------------------ shoe signals
    def on_shoe_signal(self, inp: ShoeSignal) -> None:
        """A slotless reader's shoe mark: recorded, acted on only where it fits the shoe procedure."""
        st = self.state
        problem: str | None = None
        applied = False
        kind = inp.kind
        start = cut_short = False
        if kind is ShoeSignalKind.SHOE_STARTED:
            if st.phase in OUTSIDE_SHOE:
                if not self.shoe.settings.device_starts_shoe:
                    problem = "no shoe is running and table.device_starts_shoe is off: start it with new_shoe"
                elif st.held:
                    problem = f"held round(s) {sorted(st.held)} of the last shoe await a decision"
                else:
                    start = applied = True
            elif st.phase != Phase.INDICATOR:
                problem = f"a shoe is being dealt (phase {st.phase.value})"
        elif kind is ShoeSignalKind.SHOE_ENDED:
            if st.phase == Phase.ROUND and self.dealing.last_round_end(st.hand) is not None:
                # the shoe's last round never got its last card, and the shoe is out: it is over
                cut_short = applied = True
            elif st.phase not in OUTSIDE_SHOE:
                problem = (
                    f"the shoe was taken out before its last round (phase {st.phase.value}): "
                    "void_shoe, or new_shoe"
                )
        elif kind is ShoeSignalKind.BURN_STARTED:
            if st.phase == Phase.ROUND:
                problem = f"round {st.hand} is being dealt: its cards are not burn cards"
            elif st.phase in OUTSIDE_SHOE:
                problem = "no shoe is being dealt"
            else:
                applied = True
        else:  # BURN_ENDED
            applied = st.burn_signalled
        self.emitter.emit(
            EventKind.SHOE_SIGNAL,
            inp.at,
            Source.READER,
            {"signal": kind, "applied": applied, "device": inp.device, "raw": inp.raw},
        )
        if start:
            self.dealing.start_shoe(inp.at, None, None, Source.READER)
        if cut_short:
            self.dealing.cut_short(inp.at, Source.READER, next_round_id=None, betting_source="shoe_ended")
        if problem is not None:
            self.emitter.alert(
                AlertCode.SHOE_SIGNAL_UNEXPECTED, inp.at, Source.READER, device=inp.device, signal=kind,
                reason=problem,
            )  # fmt: skip

    # ------------------------------------------------------------------ restart

    def _reader_misread_pending(self) -> AlertData | None:
        """The open ``rescan_needed`` alert of a reader's misread (not an over-composition card or a
        pull's gap, which hold their round already), if any."""
        st = self.state
        if st.rescan_alert is None:
            return None
        alert = st.alerts[st.rescan_alert]
        if alert["details"].get("reason") in ("over_composition", "pull_gap"):
            return None
        return alert

    # ------------------------------------------------------------------ cards the window refuses
    def exposed_card(self, code: str, at: float, source: str, fields: ReadFields) -> None:
        """A reader's card while betting is open (RULES.md dealing mistake 7): never dealt; counted
        against the shoe (it left it); the next round is held for a supervisor (void or accept)."""
        st = self.state
        seen = st.counts.get(code, 0)
        counted = seen < self.shoe.settings.decks
        self.emitter.emit(
            EventKind.CARD_OUTSIDE_GAME,
            at,
            source,
            {"card": code, "mode": "betting", "counted": counted, "read": fields | {"mode": "betting"}},
        )
        details: dict[str, Any] = {
            "card": code,
            "round_id": st.flow_round_id,
            "counted": counted,
            "rule": "RULES.md dealing mistake 7",
        }
        if not counted:
            details["not_counted_because"] = self.shoe.over_composition_text(seen)
        self.emitter.alert(
            AlertCode.CARD_EXPOSED_DURING_BETTING,
            at,
            source,
            holds=NEXT_ROUND,
            device=fields.get("device"),
            **details,
        )
        if st.rescan_alert is not None:  # the unread card was read: exposed, no longer unknown
            self.emitter.clear_alert(st.rescan_alert, at, source, "rescanned: exposed during betting")

    def hold_unconfirmed_rescan(self, plan: Placement, fields: ReadFields) -> None:
        """A slotless reader's card closing a misread: the rescan, or the next card dealt on? Taken
        as the rescan; the round it lands in is held (before it can be decided) for a supervisor."""
        misread = self._reader_misread_pending()
        if misread is None:
            return
        st = self.state
        in_round = isinstance(plan.slot, Slot) and not plan.opens_round and st.round is not None
        hand = st.round.hand if in_round and st.round is not None else None
        self.emitter.alert(
            AlertCode.RESCAN_UNCONFIRMED,
            fields["read_at"],
            fields["source"],
            hand=hand,
            holds=hand if hand is not None else NEXT_ROUND,
            device=fields.get("device"),
            card=fields["card"],
            slot=plan.slot,
            misread_alert=misread["alert_id"],
        )
