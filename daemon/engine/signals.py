"""Device signals that are not dealt cards: cut card, the reader's own verdict, reader status
and errors, device connection, a card drawn outside the game flow."""

from __future__ import annotations

from typing import Any

from common.inputs import (
    CutCardDrawn,
    DeviceConnection,
    OutsideGameCard,
    ReaderSignal,
    ReaderSignalKind,
    ShoeVerdict,
    Source,
    StorageState,
    VerdictOutcome,
)
from daemon.alerts import AlertCode
from daemon.engine.dealing import Dealing
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.payloads import Verdict
from daemon.engine.phases import NEXT_ROUND, OUTSIDE_SHOE, FlowPhase, Phase
from daemon.engine.reads import outside_read_fields
from daemon.engine.rounds import side_codes
from daemon.engine.settings import CutCardPolicy, GameFlow
from daemon.engine.settle import verdict_facts
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

# Bound once: ``Source.READER`` etc. go through the enum metaclass's ``__getattr__`` (~0.1 µs
# in Python 3.11), and a reader sends a verdict after every round.
_READER = Source.READER
_FORCED_QUIT = VerdictOutcome.FORCED_QUIT
_VERDICT_CHECKED = EventKind.VERDICT_CHECKED


class DeviceSignals:
    """Cut card, verdicts, reader status, connection changes, cards drawn outside the game."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter, dealing: Dealing) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing

    def on_outside_game_card(self, inp: OutsideGameCard) -> None:
        """A real card left the shoe, but not as a dealt card: count it, never deal it; alert."""
        st = self.state
        code = inp.card.code
        if inp.transmission_id is not None:
            seen_at = st.recent.get((inp.device, inp.transmission_id, code))
            if seen_at is not None and inp.at - seen_at <= self.shoe.settings.duplicate_window_s:
                return  # the same frame sent again
        seen = st.counts.get(code, 0)
        if st.phase == Phase.NO_SHOE:
            not_counted: str | None = "no shoe is running"
        elif st.phase == Phase.OVER:
            not_counted = "the shoe is over"
        elif seen >= self.shoe.settings.decks:
            not_counted = self.shoe.over_composition_text(seen)
        else:
            not_counted = None
        source = Source.READER
        fields = outside_read_fields(inp)
        data: dict[str, Any] = {
            "card": code,
            "mode": inp.mode,
            "counted": not_counted is None,
            "read": fields,
        }
        self.emitter.emit(EventKind.CARD_OUTSIDE_GAME, inp.at, source, data)
        hand = st.round.hand if st.round is not None else None
        details: dict[str, Any] = {
            "card": code,
            "mode": inp.mode,
            "counted": not_counted is None,
            "rule": "RULES.md dealing mistake 7",
        }
        if not_counted is not None:
            details["not_counted_because"] = not_counted
        if (
            self.shoe.settings.game_flow is GameFlow.BETTING_WINDOW
            and st.flow_phase == FlowPhase.BETTING
            and st.phase == Phase.READY
        ):
            # the shoe itself says so, during the betting window: the round bet on is held
            details["round_id"] = st.flow_round_id
            del details["mode"]
            self.emitter.alert(
                AlertCode.CARD_EXPOSED_DURING_BETTING, inp.at, source, holds=NEXT_ROUND, device=inp.device,
                **details,
            )  # fmt: skip
            return
        self.emitter.alert(
            AlertCode.CARD_OUTSIDE_GAME, inp.at, source, hand=hand, device=inp.device, **details
        )

    def on_cut_card(self, inp: CutCardDrawn) -> None:
        st = self.state
        source = inp.source
        if st.phase in OUTSIDE_SHOE or st.cut_card_seen:
            self.emitter.alert(AlertCode.UNEXPECTED_CUT_CARD, inp.at, source, device=inp.device, raw=inp.raw)
            return
        during = st.round.hand if st.phase == Phase.ROUND and st.round is not None else None
        finish = self.shoe.settings.cut_card_policy is CutCardPolicy.FINISH_CURRENT_ROUND
        last = during if during is not None and finish else (during or st.hand) + 1
        self.emitter.emit(
            EventKind.CUT_CARD,
            inp.at,
            source,
            {"during_hand": during, "policy": self.shoe.settings.cut_card_policy.value, "device": inp.device},
            hand=during,
        )
        self.emitter.emit(EventKind.LAST_ROUND, inp.at, source, {"hand": last}, hand=last)

    def on_verdict(self, inp: ShoeVerdict) -> None:
        st = self.state
        verdict: Verdict = {
            "outcome": inp.outcome,
            "player_pair": inp.player_pair,
            "banker_pair": inp.banker_pair,
            "raw": inp.raw,
            "device": inp.device,
        }
        source = _READER
        if inp.outcome is _FORCED_QUIT:
            hand = st.round.hand if st.round is not None else None
            self.emitter.alert(
                AlertCode.FORCED_QUIT, inp.at, source, hand=hand, holds=hand, device=inp.device
            )
            return
        awaiting = sorted(h for h, r in st.held.items() if r.awaiting_verdict)
        if awaiting:
            self._check_verdict(awaiting[0], st.held[awaiting[0]].cards, verdict, inp.at)
            return
        if self.emitter.squeeze and st.round is not None and st.round.cards and st.round.next_slot() is None:
            # a squeeze round complete on the table, awaiting its reveal: checked now, sealed
            self._check_verdict(st.round.hand, st.round.cards, verdict, inp.at)
            return
        if st.round is not None and st.round.cards:
            self.emitter.alert(
                AlertCode.MISSING_CARD,
                inp.at,
                source,
                hand=st.round.hand,
                holds=st.round.hand,
                device=inp.device,
                verdict=verdict,
                needed_slot=st.round.next_slot(),
            )
            return
        if st.last_decided is None:
            self.emitter.alert(AlertCode.MISSING_CARD, inp.at, source, device=inp.device, verdict=verdict)
            return
        self._check_verdict(st.last_decided["hand"], st.last_decided["cards"], verdict, inp.at)

    def _check_verdict(self, hand: int, cards: dict[str, str], verdict: Verdict, at: float) -> None:
        st = self.state
        source = _READER
        # The round's facts from lookup tables (settle.verdict_facts, checked against the rules
        # core in tests/engine/test_settle.py): a verdict comes with every round.
        winner, player_pair, banker_pair = verdict_facts(*side_codes(cards))
        agrees = (
            verdict["outcome"] == winner
            and verdict["player_pair"] == player_pair
            and verdict["banker_pair"] == banker_pair
        )
        self.emitter.emit(
            _VERDICT_CHECKED,
            at,
            source,
            {"hand": hand, "agrees": agrees, "verdict": verdict},
            hand=hand,
        )
        rnd = st.held.get(hand)
        if not agrees:
            self.emitter.alert(
                AlertCode.VERDICT_DISAGREEMENT,
                at,
                source,
                hand=hand,
                holds=hand if st.round_for(hand) is not None else None,
                device=verdict["device"],
                verdict=verdict,
                engine={"winner": winner, "player_pair": player_pair, "banker_pair": banker_pair},
                round_already_completed=st.round_for(hand) is None,
            )
        elif rnd is not None:
            self.dealing.try_complete_held(rnd, at, source)

    def on_reader_signal(self, inp: ReaderSignal) -> None:
        st = self.state
        source = Source.READER
        self.emitter.emit(
            EventKind.READER_STATUS,
            inp.at,
            source,
            {
                "kind": inp.kind,
                "code": inp.code,
                "detail": inp.detail,
                "device": inp.device,
                "raw": inp.raw,
                "command_id": inp.command_id,
            },
        )
        if inp.kind is ReaderSignalKind.ERROR_RAISED:
            self.emitter.alert(
                AlertCode.READER_ERROR, inp.at, source, device=inp.device, reader_code=inp.code
            )
            self.hold_for_continuity(inp.device, inp.at, source, reason="error", detail=inp.detail)
        elif inp.kind is ReaderSignalKind.ERROR_CLEARED:
            for alert_id in st.open_alert_ids(AlertCode.READER_ERROR, inp.device):
                self.emitter.clear_alert(alert_id, inp.at, source, "reader cleared the error")
        elif inp.kind is ReaderSignalKind.COMMAND_REFUSED:
            self.emitter.alert(
                AlertCode.READER_COMMAND_REFUSED,
                inp.at,
                source,
                device=inp.device,
                reader_code=inp.code,
                detail=inp.detail,
                command_id=inp.command_id,
            )
        elif inp.kind is ReaderSignalKind.REDEAL:
            hand = st.round.hand if st.round is not None else None
            self.emitter.alert(
                AlertCode.READER_REDEAL, inp.at, source, hand=hand, holds=hand, device=inp.device
            )

    def on_connection(self, inp: DeviceConnection) -> None:
        st = self.state
        down = inp.device in st.disconnected
        if inp.connected == (not down):
            return  # no change
        self.emitter.emit(
            EventKind.DEVICE_CONNECTION,
            inp.at,
            Source.SYSTEM,
            {"device": inp.device, "connected": inp.connected, "detail": inp.detail},
        )
        if not inp.connected:
            self.emitter.alert(
                AlertCode.READER_DISCONNECTED,
                inp.at,
                Source.SYSTEM,
                device=inp.device,
                detail=inp.detail,
            )
        else:
            for alert_id in st.open_alert_ids(AlertCode.READER_DISCONNECTED, inp.device):
                self.emitter.clear_alert(alert_id, inp.at, Source.SYSTEM, "device reconnected")
        reason = "reconnected" if inp.connected else "disconnected"
        self.hold_for_continuity(inp.device, inp.at, Source.SYSTEM, reason=reason, detail=inp.detail)

    def hold_for_continuity(
        self, device: str, at: float, source: str, *, reason: str, detail: str | None
    ) -> None:
        """A reader that names no slot lost its continuity (went away, came back, reported an error)
        while a round is dealt (either game flow): cards of the round may have been dealt unseen,
        and its next cards would take their places. The round is held (once per device), as after
        a restart; an Angel Eye reader (slots and sequence marks) is not."""
        st = self.state
        rnd = st.round
        if rnd is None or st.phase != Phase.ROUND:
            return
        if device in self.shoe.settings.camera.devices or any(d == device for d, _tid, _card in st.recent):
            return  # a camera, or a reader whose frames carry marks and slots (Angel Eye)
        if any(src == Source.CAMERA for src in rnd.sources.values()):
            return  # a camera filled in the round's cards while the reader was away: it sees the layout
        if any(
            st.alerts[a]["code"] == AlertCode.READER_GAP and st.alerts[a]["device"] == device
            for a in rnd.holds
        ):
            return
        self.emitter.alert(
            AlertCode.READER_GAP,
            at,
            source,
            hand=rnd.hand,
            holds=rnd.hand,
            device=device,
            reason=reason,
            round_id=st.round_ids.get(rnd.hand),
            cards=dict(rnd.cards),
            detail=detail,
        )

    def on_storage(self, inp: StorageState) -> None:
        """The journal filled up or has room again; a full journal refuses cards opening a round."""
        st = self.state
        if inp.full == st.storage_full and (not inp.full or inp.detail == st.storage_detail):
            return  # no change
        self.emitter.emit(
            EventKind.STORAGE_STATE, inp.at, Source.SYSTEM, {"full": inp.full, "detail": inp.detail}
        )
        if not inp.full and st.storage_alert is not None:
            self.emitter.clear_alert(
                st.storage_alert, inp.at, Source.SYSTEM, "journal has room", refused=st.storage_refused
            )
