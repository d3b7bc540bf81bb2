"""The table engine: a deterministic state machine from inputs to validated events.

``Engine.handle(input)`` decides the events an input causes and applies each to the
state as it is emitted (``TableState.apply``); nothing else changes the state, so
``Engine.restore(settings, variant, events)`` rebuilds an identical engine. The
engine does no I/O and reads no clock. See ``daemon/engine/README.md`` for the
state machine, every event kind, command and alert.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from daemon.engine import commands as args_
from daemon.engine.alerts import ALERTS, AlertCode
from daemon.engine.events import Event
from daemon.engine.inputs import (
    CardRead,
    CutCardDrawn,
    DeviceConnection,
    DeviceTarget,
    EngineInput,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
    SupervisorCommand,
    Tick,
    VerdictOutcome,
)
from daemon.engine.reads import card_code, read_fields, read_from_fields
from daemon.engine.settings import TableSettings
from daemon.engine.settle import RANKS, Settler
from daemon.engine.state import (
    BURNING,
    INDICATOR,
    NO_SHOE,
    OVER,
    READY,
    ROUND,
    ROUND_SLOTS,
    RoundState,
    TableState,
)
from daemon.rules.outcome import RoundOutcome, next_slot
from daemon.rules.variants import Variant

# Which device targets agree with which engine slot.
_TARGET_AGREES: dict[str, frozenset[DeviceTarget]] = {
    "indicator": frozenset({DeviceTarget.FIRST_CARD}),
    "burn": frozenset({DeviceTarget.BURN, DeviceTarget.BURN_COUNT}),
    **{slot: frozenset({DeviceTarget(slot)}) for slot in ROUND_SLOTS},
}


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the engine puts the next card."""

    slot: str
    burn: str | None = None  # opening / round / unneeded, for burn cards
    opens_round: bool = False
    unneeded: int = 0  # 1 or 2: RULES.md dealing mistakes 1 and 2


Effect = Callable[[], None]

_INDICATOR = Placement("indicator")
_OPENING_BURN = Placement("burn", burn="opening")
_ROUND_BURN = Placement("burn", burn="round")
_UNNEEDED_BURN = Placement("burn", burn="unneeded", unneeded=1)
_UNNEEDED_P1 = Placement("P1", opens_round=True, unneeded=2)
_NEW_ROUND = Placement("P1", opens_round=True)
_IN_ROUND = {slot: Placement(slot) for slot in ROUND_SLOTS}


class Engine:
    """One table's engine. Feed inputs to ``handle``; publish the events it returns."""

    def __init__(self, settings: TableSettings, variant: Variant) -> None:
        self.settings = settings
        self.variant = variant
        self.state = TableState(settings)
        self._settler = Settler(variant)
        self._camera_devices = frozenset(settings.camera.devices)
        self._needs_die = variant.needs_super_round_die
        self._out: list[Event] = []
        self._now = 0.0

    # ------------------------------------------------------------------ public API
    @classmethod
    def restore(cls, settings: TableSettings, variant: Variant, events: Iterable[Event]) -> Engine:
        """An engine whose state is the fold of ``events`` (its own earlier output)."""
        engine = cls(settings, variant)
        for event in events:
            engine.apply(event)
        return engine

    def apply(self, event: Event) -> None:
        """Fold one event into the state."""
        self.state.apply(event)

    def handle(self, inp: EngineInput) -> list[Event]:
        """Decide, apply and return the events caused by one input."""
        out: list[Event] = []
        self._out = out
        self._now = inp.at
        rescan_before = self.state.rescan_alert
        if self.state.held_reads:
            self._expire_pulls(inp.at)
        if isinstance(inp, CardRead):
            self._on_card_read(inp)
        elif isinstance(inp, ReadFailed):
            self._on_read_failed(inp)
        elif isinstance(inp, SupervisorCommand):
            self._on_command(inp)
        elif isinstance(inp, CutCardDrawn):
            self._release_all(inp.device, "interleaved")
            self._on_cut_card(inp)
        elif isinstance(inp, ShoeVerdict):
            self._release_all(inp.device, "interleaved")
            self._on_verdict(inp)
        elif isinstance(inp, ReaderSignal):
            self._release_all(inp.device, "interleaved")
            self._on_reader_signal(inp)
        elif isinstance(inp, DeviceConnection):
            self._on_connection(inp)
        elif isinstance(inp, Tick):
            pass  # expiry above is all a tick does
        if rescan_before is not None and self.state.rescan_alert is None and self.state.held_reads:
            for device in self._held_devices():
                self._release_all(device, "rescanned")
        self._out = []
        return out

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready current state (the publisher retains it)."""
        st = self.state
        rnd = st.round
        return {
            "shoe": {
                "shoe_id": st.shoe_id,
                "phase": st.phase,
                "decks": self.settings.decks,
                "cards_out": st.cards_out,
                "burn_remaining": st.burn_remaining,
                "round_burn_remaining": st.round_burn_remaining,
                "cut_card_seen": st.cut_card_seen,
                "last_hand": st.last_hand,
                "end_reason": st.shoe_end_reason,
            },
            "variant": self.variant.name,
            "hand": st.hand,
            "round": None if rnd is None else self._round_view(rnd),
            "offered_bets": {"hand": st.offered_hand, "bets": list(st.offered_bets)},
            "alerts": [dict(a) for a in st.alerts.values()],
            "held_rounds": [self._round_view(r) for _, r in sorted(st.held.items())],
            "rescan_needed": st.rescan_alert is not None,
            "disconnected_devices": list(st.disconnected),
            "reads_waiting_in_pull": len(st.held_reads),
        }

    # ------------------------------------------------------------------ emission
    def _emit(
        self,
        kind: str,
        at: float,
        source: str,
        data: dict[str, Any],
        hand: int | None = None,
        shoe_id: str | None = None,
    ) -> Event:
        event = Event(kind, at, shoe_id or self.state.shoe_id, hand, source, data)
        self.state.apply(event)
        self._out.append(event)
        return event

    def _alert(
        self,
        code: AlertCode,
        at: float,
        source: str,
        *,
        hand: int | None = None,
        holds: int | str | None = None,
        device: str | None = None,
        read: dict[str, Any] | None = None,
        **details: Any,
    ) -> str:
        # Numbered within the shoe, so ids stay unique when the journal drops old shoes.
        alert_id = f"{self.state.shoe_id or 'noshoe'}:a{self.state.alert_counter + 1}"
        data: dict[str, Any] = {
            "alert_id": alert_id,
            "code": code.value,
            "message": ALERTS[code].summary,
            "hand": hand,
            "holds": holds,
            "device": device,
            "details": details,
        }
        if read is not None:
            data["read"] = read
        self._emit("alert_raised", at, source, data, hand=hand)
        return alert_id

    def _clear_alert(
        self, alert_id: str, at: float, source: str, reason: str, cmd: SupervisorCommand | None = None
    ) -> None:
        alert = self.state.alerts[alert_id]
        data: dict[str, Any] = {"alert_id": alert_id, "code": alert["code"], "reason": reason}
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        self._emit("alert_cleared", at, source, data, hand=alert.get("hand"))

    # ------------------------------------------------------------------ pulls
    def _held_devices(self) -> list[str]:
        seen: list[str] = []
        for r in self.state.held_reads:
            if r["device"] not in seen:
                seen.append(r["device"])
        return seen

    def _expire_pulls(self, at: float) -> None:
        st = self.state
        if not st.held_reads or st.rescan_alert is not None:
            return
        window = self.settings.pull_hold_window_s
        for device in self._held_devices():
            first = min(r["read_at"] for r in st.held_reads if r["device"] == device)
            if at - first >= window:
                self._release_all(device, "window")

    def _release_all(self, device: str, reason: str) -> None:
        """Release every read held for ``device`` in position order, stopping after a misread."""
        st = self.state
        if not st.held_reads or st.rescan_alert is not None:
            return
        held = sorted(
            (r for r in st.held_reads if r["device"] == device),
            key=lambda r: (r["position"], r["read_at"], r["hold_id"]),
        )
        if held:
            self._release(self._upto_failure(held), reason)

    @staticmethod
    def _upto_failure(reads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, r in enumerate(reads):
            if r["card"] is None:
                return reads[: i + 1]
        return reads

    def _release(self, reads: list[dict[str, Any]], reason: str) -> None:
        first = reads[0]
        self._emit(
            "pull_released",
            self._now,
            first["source"],
            {"device": first["device"], "hold_ids": [r["hold_id"] for r in reads], "reason": reason},
        )
        for fields in reads:
            read = read_from_fields(fields)
            if isinstance(read, ReadFailed):
                self._misread(read)
            else:
                self._take_read(read)

    def _sequence(self, read: CardRead | ReadFailed) -> None:
        """Order a read carrying a pull position: process it now or hold it for the cards above it."""
        st = self.state
        device = read.device
        position = read.position
        assert position is not None
        held = [r for r in st.held_reads if r["device"] == device]
        last_at = st.pull_last_at.get(device)
        active = last_at is not None and read.at - last_at <= self.settings.pull_hold_window_s
        base = 1 if position == 1 or not active else st.pull_next.get(device, 1)
        if not held and position == base:
            if isinstance(read, ReadFailed):
                self._misread(read)
            else:
                self._take_read(read)
            return
        fields = read_fields(read) | {"hold_id": st.hold_counter + 1}
        self._emit("read_held", read.at, read.source.value, {"read": fields})
        held = sorted(
            (r for r in st.held_reads if r["device"] == device),
            key=lambda r: (r["position"], r["read_at"], r["hold_id"]),
        )
        run: list[dict[str, Any]] = []
        expect = base
        for r in held:
            if r["position"] != expect:
                break
            run.append(r)
            expect += 1
        if run:
            self._release(self._upto_failure(run), "in_order")

    # ------------------------------------------------------------------ reads
    def _is_camera(self, read: CardRead | ReadFailed) -> bool:
        return read.source is Source.CAMERA or read.device in self._camera_devices

    def _on_card_read(self, read: CardRead) -> None:
        if read.source is Source.CAMERA or read.device in self._camera_devices:
            self._camera_read(read)
            return
        if read.transmission_id is not None and self._is_duplicate(read):
            return
        st = self.state
        if st.rescan_alert is not None:
            failed = st.alerts[st.rescan_alert].get("read") or {}
            below = failed.get("position")
            if (
                read.position is not None
                and below is not None
                and read.position > below
                and failed.get("device") == read.device
                and read.at - failed["read_at"] <= self.settings.pull_hold_window_s
            ):
                # A card from under the misread one in the same pull: it waits for the rescan.
                fields = read_fields(read) | {"hold_id": st.hold_counter + 1}
                self._emit("read_held", read.at, read.source.value, {"read": fields})
                return
            # Nothing moves on after a misread: the next valid read is the dealer's rescan of it.
            self._take_read(read)
            return
        if read.position is None:
            if st.held_reads:
                self._release_all(read.device, "interleaved")
            self._take_read(read)
        else:
            self._sequence(read)

    def _is_duplicate(self, read: CardRead) -> bool:
        window = self.settings.duplicate_window_s
        device, tid, code, at = read.device, read.transmission_id, card_code(read.card), read.at
        for seen_device, seen_tid, seen_code, seen_at in self.state.recent:
            if seen_tid == tid and seen_code == code and seen_device == device and at - seen_at <= window:
                return True
        return False

    def _on_read_failed(self, read: ReadFailed) -> None:
        if self._is_camera(read):
            return  # the camera abstains; only the reader's misread asks for a rescan
        if read.position is not None and self.state.rescan_alert is None:
            self._sequence(read)
            return
        self._release_all(read.device, "interleaved")
        self._misread(read)

    def _misread(self, read: ReadFailed) -> None:
        st = self.state
        fields = read_fields(read)
        if st.phase in (NO_SHOE, OVER):
            self._refuse_outside_shoe(read.at, read.source.value, fields)
        elif st.rescan_alert is None:
            hand = st.round.hand if st.round is not None else None
            self._alert(
                AlertCode.RESCAN_NEEDED,
                read.at,
                read.source.value,
                hand=hand,
                device=read.device,
                read=fields,
                reason=read.reason,
                reader_code=read.code,
            )

    def _refuse_outside_shoe(self, at: float, source: str, fields: dict[str, Any]) -> None:
        st = self.state
        if st.phase == OVER and st.shoe_end_reason == "cut_card":
            self._alert(AlertCode.CARD_AFTER_LAST_ROUND, at, source, device=fields["device"], read=fields)
        else:
            self._alert(AlertCode.NO_SHOE, at, source, device=fields["device"], read=fields)

    def _take_read(self, read: CardRead) -> None:
        """A reader's card, in dealing order: check it and place it."""
        st = self.state
        fields = read_fields(read)
        source = fields["source"]
        if st.phase in (NO_SHOE, OVER):
            if self.settings.device_starts_shoe and read.target is DeviceTarget.FIRST_CARD:
                self._start_shoe(read.at, None, None, source)
            else:
                self._refuse_outside_shoe(read.at, source, fields)
                return
        fill = st.camera_fill
        if (
            fill is not None
            and fill["card"] == fields["card"]
            and read.at - fill["at"] <= self.settings.camera.fill_confirm_window_s
        ):
            if read.target is not None and read.target.value == fill["slot"]:
                self._emit(
                    "card_confirmed",
                    read.at,
                    source,
                    {"hand": fill["hand"], "slot": fill["slot"], "card": fill["card"], "read": fields},
                    hand=fill["hand"],
                )
                return
            if read.target is None:
                self._alert(
                    AlertCode.AMBIGUOUS_RESCAN,
                    read.at,
                    source,
                    hand=fill["hand"],
                    device=read.device,
                    read=fields,
                    camera_slot=fill["slot"],
                )
                return
        if st.counts.get(fields["card"], 0) >= self.settings.decks:
            self._composition_ok(fields["card"], read.at, source, fields)  # raises the alert
            return
        self._place(self._plan(read.at), fields["card"], read.at, source, read=fields, target=read.target)

    def _composition_ok(self, code: str, at: float, source: str, fields: dict[str, Any]) -> bool:
        seen = self.state.counts.get(code, 0)
        if seen < self.settings.decks:
            return True
        self._alert(
            AlertCode.OVER_COMPOSITION,
            at,
            source,
            hand=self.state.round.hand if self.state.round is not None else None,
            device=fields.get("device"),
            read=fields,
            card=code,
            already_seen=seen,
            decks=self.settings.decks,
        )
        return False

    def _plan(self, at: float, *, detect_unneeded: bool = True) -> Placement:
        """Where the next card goes, by the shoe procedure and draw order alone."""
        st = self.state
        phase = st.phase
        if phase == ROUND:
            assert st.round is not None
            slot = st.round.next_slot()
            assert slot is not None, "a decided round never stays in progress"
            return _IN_ROUND[slot]
        if phase == INDICATOR:
            return _INDICATOR
        if phase == BURNING:
            return _OPENING_BURN
        window = self.settings.unneeded_card_window_s
        recent = detect_unneeded and window > 0 and st.decided_at is not None and at - st.decided_at <= window
        if recent and st.unneeded_count == 0:
            return _UNNEEDED_BURN
        if recent and st.unneeded_count == 1:
            return _UNNEEDED_P1
        if st.round_burn_remaining > 0:
            return _ROUND_BURN
        return _NEW_ROUND

    def _place(
        self,
        plan: Placement,
        code: str,
        at: float,
        source: str,
        *,
        read: dict[str, Any] | None = None,
        target: DeviceTarget | None = None,
        cmd: SupervisorCommand | None = None,
        hand: int | None = None,
    ) -> None:
        """Emit a card's events: round opening, the card, its alerts, and what it decides."""
        st = self.state
        if plan.opens_round:
            next_hand = st.hand + 1
            self._emit(
                "round_opened",
                at,
                source,
                {"hand": next_hand, "bets": self._settler.offered(next_hand)},
                hand=next_hand,
            )
        data: dict[str, Any] = {"card": code, "slot": plan.slot, "source": source}
        round_hand: int | None = None
        if plan.slot == "indicator":
            data["burn_count"] = self.settings.burn_count(RANKS[code])
        elif plan.slot == "burn":
            data["burn"] = plan.burn
        else:
            round_hand = hand if hand is not None else st.hand
            data["round"] = round_hand
            if plan.unneeded:
                data["unneeded"] = True
            if source == "camera" and st.rescan_alert is not None:
                data["fills_rescan"] = True
        if read is not None:
            data["read"] = read
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        self._emit("card_dealt", at, source, data, hand=round_hand)
        device = None if read is None else read["device"]
        if plan.unneeded:
            became = "the next round's burn card" if plan.unneeded == 1 else "the next round's Player 1"
            self._alert(
                AlertCode.UNNEEDED_CARD,
                at,
                source,
                hand=st.hand if plan.unneeded == 1 else round_hand,
                device=device,
                card=code,
                became=became,
                rule=f"RULES.md dealing mistake {plan.unneeded}",
            )
        if target is not None and target not in _TARGET_AGREES[plan.slot]:
            self._alert(
                AlertCode.DEVICE_DISAGREEMENT,
                at,
                source,
                hand=round_hand,
                holds=round_hand if round_hand is not None else "next_round",
                device=device,
                card=code,
                engine_slot=plan.slot,
                device_target=target.value,
            )
        if st.rescan_alert is not None:
            reason = {"camera": "camera_filled", "supervisor": "assigned"}.get(source, "rescanned")
            self._clear_alert(st.rescan_alert, at, source, reason, cmd)
        if plan.slot in ("indicator", "burn") and plan.burn in (None, "opening") and st.phase == READY:
            self._offer(st.hand + 1, at, source)
        elif round_hand is not None:
            rnd = st.round_for(round_hand)
            assert rnd is not None
            if rnd.next_slot() is None:
                decided_at = at if read is None else read["read_at"]
                if rnd is st.round:
                    self._decide(rnd, at, source, decided_at)
                else:
                    self._try_complete_held(rnd, at, source)

    def _offer(self, hand: int, at: float, source: str) -> None:
        self._emit("bets_offered", at, source, {"hand": hand, "bets": self._settler.offered(hand)}, hand=hand)

    # ------------------------------------------------------------------ round decisions
    def _blockers(self, rnd: RoundState) -> list[str]:
        reasons = [f"alert {a}" for a in rnd.holds]
        if rnd.awaiting_verdict:
            reasons.append("awaiting the reader's verdict")
        if self._needs_die and rnd.die is None:
            reasons.append("awaiting the super-round die")
        return reasons

    def _decide(self, rnd: RoundState, at: float, source: str, decided_at: float) -> None:
        """The round in progress is decided: complete it, or hold it while something blocks it."""
        blockers = self._blockers(rnd)
        if self.settings.await_device_verdict:
            blockers.append("awaiting the reader's verdict")
        if blockers:
            self._emit(
                "round_held",
                at,
                source,
                {
                    "hand": rnd.hand,
                    "cards": dict(rnd.cards),
                    "blocked_by": blockers,
                    "awaiting_verdict": self.settings.await_device_verdict,
                    "decided_at": decided_at,
                },
                hand=rnd.hand,
            )
        else:
            self._complete(rnd, at, source, decided_at)
        self._after_round(rnd.hand, at, source)

    def _after_round(self, hand: int, at: float, source: str) -> None:
        st = self.state
        if st.last_hand is not None and hand >= st.last_hand:
            self._end_shoe(at, source, "cut_card")
        else:
            self._offer(hand + 1, at, source)

    def _end_shoe(self, at: float, source: str, reason: str) -> None:
        st = self.state
        self._emit(
            "shoe_ended",
            at,
            source,
            {"shoe_id": st.shoe_id, "reason": reason, "hands": st.hand, "cards_out": st.cards_out},
        )

    def _complete(self, rnd: RoundState, at: float, source: str, decided_at: float | None) -> None:
        outcome, bets = self._settler.settle(*rnd.codes(), rnd.hand, rnd.die)
        self._emit(
            "round_completed",
            at,
            source,
            {
                "hand": rnd.hand,
                "cards": dict(rnd.cards),
                "sources": dict(rnd.sources),
                "outcome": outcome,
                "bets": bets,
                "super_round_die": rnd.die,
                "corrected": rnd.corrected,
                "decided_at": decided_at,
            },
            hand=rnd.hand,
        )

    def _try_complete_held(self, rnd: RoundState, at: float, source: str) -> None:
        if rnd.hand in self.state.held and rnd.next_slot() is None and not self._blockers(rnd):
            self._complete(rnd, at, source, None)

    # ------------------------------------------------------------------ camera
    def _camera_read(self, read: CardRead) -> None:
        """Camera arbitration: cross-check the reader; fill in only for a failed reader."""
        cfg = self.settings.camera
        if read.confidence is None or read.confidence < cfg.min_confidence:
            return  # below threshold the camera abstains
        st = self.state
        code = read.card.code
        fields = read_fields(read)
        source = read.source.value
        slot = read.target.value if read.target is not None and read.target.value in ROUND_SLOTS else None
        ref_hand: int | None = None
        ref_cards: dict[str, str] = {}
        if st.round is not None and st.round.cards:
            ref_hand, ref_cards = st.round.hand, st.round.cards
        elif (
            st.last_decided is not None
            and st.phase != ROUND
            and read.at - st.last_decided["at"] <= cfg.late_read_window_s
        ):
            # A camera read just after the round was decided still describes that round;
            # later, the boxes hold the next round's cards.
            ref_hand, ref_cards = st.last_decided["hand"], st.last_decided["cards"]
        if slot is not None and slot in ref_cards:
            if ref_cards[slot] != code:
                assert ref_hand is not None
                still_open = st.round_for(ref_hand) is not None
                self._alert(
                    AlertCode.CAMERA_DISAGREEMENT,
                    read.at,
                    source,
                    hand=ref_hand,
                    holds=ref_hand if still_open else None,
                    device=read.device,
                    read=fields,
                    slot=slot,
                    reader_card=ref_cards[slot],
                    camera_card=code,
                    round_already_completed=not still_open,
                )
            return
        reader_failed = st.rescan_alert is not None or any(d not in cfg.devices for d in st.disconnected)
        if not reader_failed or st.phase not in (READY, ROUND):
            return
        plan = self._plan(read.at)
        if plan.slot not in ROUND_SLOTS:
            return  # burn cards have no box on the layout: the reader must rescan them
        if slot is not None and slot != plan.slot:
            self._alert(
                AlertCode.CAMERA_SLOT_MISMATCH,
                read.at,
                source,
                hand=st.round.hand if st.round is not None else None,
                device=read.device,
                read=fields,
                expected_slot=plan.slot,
                camera_slot=slot,
            )
            return
        if not self._composition_ok(code, read.at, source, fields):
            return
        self._place(plan, code, read.at, source, read=fields)

    # ------------------------------------------------------------------ device signals
    def _on_cut_card(self, inp: CutCardDrawn) -> None:
        st = self.state
        source = inp.source.value
        if st.phase in (NO_SHOE, OVER) or st.cut_card_seen:
            self._alert(AlertCode.UNEXPECTED_CUT_CARD, inp.at, source, device=inp.device, raw=inp.raw)
            return
        during = st.round.hand if st.phase == ROUND and st.round is not None else None
        finish = self.settings.cut_card_policy.value == "finish_current_round"
        last = during if during is not None and finish else (during or st.hand) + 1
        self._emit(
            "cut_card",
            inp.at,
            source,
            {"during_hand": during, "policy": self.settings.cut_card_policy.value, "device": inp.device},
            hand=during,
        )
        self._emit("last_round", inp.at, source, {"hand": last}, hand=last)

    def _on_verdict(self, inp: ShoeVerdict) -> None:
        st = self.state
        verdict = {
            "outcome": inp.outcome.value,
            "player_pair": inp.player_pair,
            "banker_pair": inp.banker_pair,
            "raw": inp.raw,
            "device": inp.device,
        }
        source = Source.READER.value
        if inp.outcome is VerdictOutcome.FORCED_QUIT:
            hand = st.round.hand if st.round is not None else None
            self._alert(AlertCode.FORCED_QUIT, inp.at, source, hand=hand, holds=hand, device=inp.device)
            return
        awaiting = sorted(h for h, r in st.held.items() if r.awaiting_verdict)
        if awaiting:
            self._check_verdict(awaiting[0], st.held[awaiting[0]].cards, verdict, inp.at)
            return
        if st.round is not None and st.round.cards:
            self._alert(
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
            self._alert(AlertCode.MISSING_CARD, inp.at, source, device=inp.device, verdict=verdict)
            return
        self._check_verdict(st.last_decided["hand"], st.last_decided["cards"], verdict, inp.at)

    def _check_verdict(self, hand: int, cards: dict[str, str], verdict: dict[str, Any], at: float) -> None:
        st = self.state
        source = Source.READER.value
        probe = RoundState(hand=hand, opened_at=at, cards=dict(cards))
        outcome = RoundOutcome(*probe.sides())
        agrees = (
            verdict["outcome"] == outcome.winner.value
            and verdict["player_pair"] == outcome.player_pair
            and verdict["banker_pair"] == outcome.banker_pair
        )
        self._emit(
            "verdict_checked", at, source, {"hand": hand, "agrees": agrees, "verdict": verdict}, hand=hand
        )
        rnd = st.held.get(hand)
        if not agrees:
            self._alert(
                AlertCode.VERDICT_DISAGREEMENT,
                at,
                source,
                hand=hand,
                holds=hand if st.round_for(hand) is not None else None,
                device=verdict["device"],
                verdict=verdict,
                engine={
                    "winner": outcome.winner.value,
                    "player_pair": outcome.player_pair,
                    "banker_pair": outcome.banker_pair,
                },
                round_already_completed=st.round_for(hand) is None,
            )
        elif rnd is not None:
            self._try_complete_held(rnd, at, source)

    def _on_reader_signal(self, inp: ReaderSignal) -> None:
        st = self.state
        source = Source.READER.value
        self._emit(
            "reader_status",
            inp.at,
            source,
            {
                "kind": inp.kind.value,
                "code": inp.code,
                "detail": inp.detail,
                "device": inp.device,
                "raw": inp.raw,
            },
        )
        if inp.kind is ReaderSignalKind.ERROR_RAISED:
            self._alert(AlertCode.READER_ERROR, inp.at, source, device=inp.device, reader_code=inp.code)
        elif inp.kind is ReaderSignalKind.ERROR_CLEARED:
            for alert_id in st.open_alert_ids(AlertCode.READER_ERROR.value, inp.device):
                self._clear_alert(alert_id, inp.at, source, "reader cleared the error")
        elif inp.kind is ReaderSignalKind.REDEAL:
            hand = st.round.hand if st.round is not None else None
            self._alert(AlertCode.READER_REDEAL, inp.at, source, hand=hand, holds=hand, device=inp.device)

    def _on_connection(self, inp: DeviceConnection) -> None:
        st = self.state
        down = inp.device in st.disconnected
        if inp.connected == (not down):
            return  # no change
        self._emit(
            "device_connection",
            inp.at,
            Source.SYSTEM.value,
            {"device": inp.device, "connected": inp.connected, "detail": inp.detail},
        )
        if not inp.connected:
            self._alert(
                AlertCode.READER_DISCONNECTED,
                inp.at,
                Source.SYSTEM.value,
                device=inp.device,
                detail=inp.detail,
            )
        else:
            for alert_id in st.open_alert_ids(AlertCode.READER_DISCONNECTED.value, inp.device):
                self._clear_alert(alert_id, inp.at, Source.SYSTEM.value, "device reconnected")

    # ------------------------------------------------------------------ supervisor commands
    def _on_command(self, cmd: SupervisorCommand) -> None:
        for device in self._held_devices():
            self._release_all(device, "command")
        handler = getattr(self, f"_cmd_{cmd.action}", None) if cmd.action in args_.ACTIONS else None
        if handler is None:
            if cmd.action in args_.SERVICE_ACTIONS:
                self._refuse(
                    cmd, f"'{cmd.action}' is a reader command handled by the service, not the engine"
                )
            else:
                self._refuse(cmd, f"unknown action {cmd.action!r}; accepted: {', '.join(args_.ACTIONS)}")
            return
        if not isinstance(cmd.args, dict):
            self._refuse(cmd, "args must be an object")
            return
        try:
            outcome = handler(cmd)
        except args_.ArgError as exc:
            self._refuse(cmd, str(exc))
            return
        if isinstance(outcome, str):
            self._refuse(cmd, outcome)
            return
        self._emit(
            "command_accepted",
            cmd.at,
            Source.SUPERVISOR.value,
            {"command_id": cmd.command_id, "action": cmd.action, "actor": cmd.actor, "reason": None},
        )
        outcome()

    def _refuse(self, cmd: SupervisorCommand, reason: str) -> None:
        self._emit(
            "command_refused",
            cmd.at,
            Source.SUPERVISOR.value,
            {"command_id": cmd.command_id, "action": cmd.action, "actor": cmd.actor, "reason": reason},
        )

    def _start_shoe(self, at: float, shoe_id: str | None, cmd: SupervisorCommand | None, source: str) -> None:
        st = self.state
        if st.phase not in (NO_SHOE, OVER):
            self._end_shoe(at, source, "replaced")
        new_id = shoe_id or f"shoe-{st.shoes_started + 1}-{round(at * 1000)}"
        data: dict[str, Any] = {
            "shoe_id": new_id,
            "decks": self.settings.decks,
            "variant": self.variant.name,
            "started_by": "device" if cmd is None else "supervisor",
            "actor": None if cmd is None else cmd.actor,
            "command_id": None if cmd is None else cmd.command_id,
        }
        self._emit("shoe_started", at, source, data, shoe_id=new_id)

    def _cmd_new_shoe(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"shoe_id"})
        shoe_id = args_.opt_shoe_id(cmd.args)
        st = self.state
        if st.phase == ROUND:
            return f"round {st.hand} is in progress: finish or void it first"
        if st.held:
            return f"held round(s) {sorted(st.held)} await a decision: resolve or void them first"
        if shoe_id is not None and shoe_id == st.shoe_id:
            return f"shoe id {shoe_id!r} is the current shoe's id"
        return lambda: self._start_shoe(cmd.at, shoe_id, cmd, Source.SUPERVISOR.value)

    def _target_round(self, cmd: SupervisorCommand) -> RoundState | str:
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            if st.round is not None:
                return st.round
            if len(st.held) == 1:
                return next(iter(st.held.values()))
            return (
                "no round in progress"
                if not st.held
                else f"several rounds are held {sorted(st.held)}: give hand"
            )
        rnd = st.round_for(hand)
        if rnd is None:
            return f"hand {hand} is neither in progress nor held"
        return rnd

    def _cmd_void_round(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"hand", "reason"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        completed = False
        if hand is not None and st.round_for(hand) is None:
            if st.last_decided is None or st.last_decided["hand"] != hand:
                return f"hand {hand} is not in progress, held, or the last completed round"
            completed = True
            target_hand = hand
            cards = dict(st.last_decided["cards"])
        else:
            target = self._target_round(cmd)
            if isinstance(target, str):
                return target
            target_hand, cards = target.hand, dict(target.cards)
        return lambda: self._void_round(cmd, target_hand, cards, reason, completed)

    def _void_round(
        self, cmd: SupervisorCommand, hand: int, cards: dict[str, str], reason: str, completed: bool
    ) -> None:
        st = self.state
        source = Source.SUPERVISOR.value
        was_current = st.round is not None and st.round.hand == hand
        for alert_id in [a for a, d in st.alerts.items() if d.get("holds") == hand]:
            self._clear_alert(alert_id, cmd.at, source, f"round {hand} voided", cmd)
        self._emit(
            "round_voided",
            cmd.at,
            source,
            {
                "hand": hand,
                "cards": cards,
                "reason": reason,
                "was_completed": completed,
                "actor": cmd.actor,
                "command_id": cmd.command_id,
            },
            hand=hand,
        )
        if was_current and st.phase != OVER:
            self._after_round(hand, cmd.at, source)

    def _cmd_void_shoe(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"reason"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        if st.shoe_id is None or (st.phase == OVER and not st.held and st.shoe_end_reason != "cut_card"):
            return "no shoe to void"

        def effect() -> None:
            source = Source.SUPERVISOR.value
            voided: list[int] = []
            for rnd in [*([st.round] if st.round is not None else []), *st.held.values()]:
                voided.append(rnd.hand)
                for alert_id in [a for a, d in st.alerts.items() if d.get("holds") == rnd.hand]:
                    self._clear_alert(alert_id, cmd.at, source, "shoe voided", cmd)
                self._emit(
                    "round_voided",
                    cmd.at,
                    source,
                    {
                        "hand": rnd.hand,
                        "cards": dict(rnd.cards),
                        "reason": f"shoe voided: {reason}",
                        "was_completed": False,
                        "actor": cmd.actor,
                        "command_id": cmd.command_id,
                    },
                    hand=rnd.hand,
                )
            for alert_id in list(st.next_round_holds):
                if alert_id in st.alerts:
                    self._clear_alert(alert_id, cmd.at, source, "shoe voided", cmd)
            self._emit(
                "shoe_voided",
                cmd.at,
                source,
                {
                    "shoe_id": st.shoe_id,
                    "reason": reason,
                    "voided_hands": voided,
                    "actor": cmd.actor,
                    "command_id": cmd.command_id,
                },
            )
            self._end_shoe(cmd.at, source, "voided")

        return effect

    def _cmd_assign_card(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"card", "slot", "hand"})
        card = args_.req_card(cmd.args, "card")
        slot = args_.slot_arg(cmd.args, "slot", args_.CARD_SLOT_NAMES, False)
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        st = self.state
        if st.phase in (NO_SHOE, OVER) and hand is None:
            return "no shoe is being dealt"
        if st.counts.get(card.code, 0) >= self.settings.decks:
            decks = self.settings.decks
            return f"card {card.code} has already appeared {decks} times in this {decks}-deck shoe"
        if hand is not None and (st.round is None or st.round.hand != hand):
            rnd = st.held.get(hand)
            if rnd is None:
                return f"hand {hand} is neither in progress nor held"
            needed = rnd.next_slot()
            if needed is None:
                return f"held round {hand} needs no more cards"
            plan = Placement(needed)
        else:
            plan = self._plan(cmd.at, detect_unneeded=False)
        if slot is not None and slot != plan.slot:
            return f"the next card goes to {plan.slot}, not {slot}"
        return lambda: self._place(plan, card.code, cmd.at, Source.SUPERVISOR.value, cmd=cmd, hand=hand)

    def _correct(
        self, cmd: SupervisorCommand, rnd: RoundState, after: dict[str, str], action: str
    ) -> Effect | str:
        """Validate a rearrangement of a round's cards and return its effect.

        Cards new to the round are "supplied" (checked against the shoe's composition and
        counted); cards no longer in it are "removed" (they stay counted: they left the shoe).
        """
        ordered = {s: after[s] for s in ROUND_SLOTS if s in after}
        probe = RoundState(hand=rnd.hand, opened_at=rnd.opened_at, cards=ordered)
        try:
            next_slot(*probe.sides())
        except ValueError as exc:
            return f"the corrected round would be illegal: {exc}"
        if ordered == rnd.cards:
            return "the correction changes nothing"
        spare = Counter(rnd.cards.values())
        supplied: list[str] = []
        for slot, code in ordered.items():
            if spare[code] > 0:
                spare[code] -= 1
            else:
                supplied.append(slot)
        removed = sorted(spare.elements())
        new_counts = Counter(ordered[s] for s in supplied)
        decks = self.settings.decks
        for code, n in new_counts.items():
            if self.state.counts.get(code, 0) + n > decks:
                return f"card {code} would appear more than {decks} times in this {decks}-deck shoe"

        def effect() -> None:
            source = Source.SUPERVISOR.value
            self._emit(
                "round_corrected",
                cmd.at,
                source,
                {
                    "hand": rnd.hand,
                    "action": action,
                    "before": dict(rnd.cards),
                    "after": ordered,
                    "supplied": supplied,
                    "removed": removed,
                    "args": dict(cmd.args),
                    "actor": cmd.actor,
                    "command_id": cmd.command_id,
                },
                hand=rnd.hand,
            )
            if rnd is self.state.round and rnd.next_slot() is None:
                self._decide(rnd, cmd.at, source, cmd.at)

        return effect

    def _cmd_rearrange(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"cards", "hand"})
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        return self._correct(cmd, rnd, args_.req_slot_cards(cmd.args, "cards"), "rearrange")

    def _cmd_move_card(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"from", "to", "hand"})
        src, dst = args_.req_slot(cmd.args, "from"), args_.req_slot(cmd.args, "to")
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        if src not in rnd.cards:
            return f"slot {src} of hand {rnd.hand} holds no card"
        if dst in rnd.cards:
            return f"slot {dst} of hand {rnd.hand} already holds {rnd.cards[dst]}: use swap"
        after = {s: c for s, c in rnd.cards.items() if s != src} | {dst: rnd.cards[src]}
        return self._correct(cmd, rnd, after, "move_card")

    def _cmd_swap(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"a", "b", "sides", "hand"})
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        if args_.opt_flag(cmd.args, "sides"):
            if "a" in cmd.args or "b" in cmd.args:
                return "give either sides=true or slots a and b, not both"
            mirror = {"P1": "B1", "B1": "P1", "P2": "B2", "B2": "P2", "P3": "B3", "B3": "P3"}
            after = {mirror[s]: c for s, c in rnd.cards.items()}
        else:
            a, b = args_.req_slot(cmd.args, "a"), args_.req_slot(cmd.args, "b")
            if a == b or a not in rnd.cards or b not in rnd.cards:
                return f"swap needs two different filled slots of hand {rnd.hand}; filled: {list(rnd.cards)}"
            after = dict(rnd.cards)
            after[a], after[b] = rnd.cards[b], rnd.cards[a]
        return self._correct(cmd, rnd, after, "swap")

    def _cmd_acknowledge_alert(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"alert_id"})
        alert_id = args_.opt_text(cmd.args, "alert_id", 100)
        st = self.state
        if alert_id is None:
            raise args_.ArgError("argument 'alert_id' is required")
        alert = st.alerts.get(alert_id)
        if alert is None:
            return f"no open alert {alert_id!r}"
        if alert.get("holds") is not None and (
            alert["holds"] == "next_round" or st.round_for(alert["holds"]) is not None
        ):
            return "this alert holds a round: use resolve_hold, a correction or void_round"
        if alert["code"] == AlertCode.READER_DISCONNECTED.value and alert.get("device") in st.disconnected:
            return f"device {alert.get('device')!r} is still disconnected"
        return lambda: self._clear_alert(alert_id, cmd.at, Source.SUPERVISOR.value, "acknowledged", cmd)

    def _cmd_resolve_hold(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"hand"})
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            candidates = sorted(st.held) + (
                [st.round.hand] if st.round is not None and st.round.holds else []
            )
            if len(candidates) != 1:
                return (
                    "no held round" if not candidates else f"several rounds are held {candidates}: give hand"
                )
            hand = candidates[0]
        rnd = st.round_for(hand)
        if rnd is None or (rnd is st.round and not rnd.holds):
            return f"hand {hand} is not held"
        needed = rnd.next_slot()
        if rnd is not st.round and needed is not None:
            return f"held round {hand} still needs {needed}: supply it with assign_card or rearrange"
        if self._needs_die and rnd.die is None and rnd is not st.round:
            return f"hand {hand} needs the super-round die: send super_round_die"
        resolved_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR.value
            for alert_id in [a for a in rnd.holds if a in st.alerts]:
                self._clear_alert(alert_id, cmd.at, source, "hold resolved", cmd)
            self._emit(
                "hold_resolved",
                cmd.at,
                source,
                {"hand": resolved_hand, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=resolved_hand,
            )
            if rnd is not st.round:
                self._try_complete_held(rnd, cmd.at, source)

        return effect

    def _cmd_rescan_ack(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, set())
        alert_id = self.state.rescan_alert
        if alert_id is None:
            return "no rescan is pending"
        return lambda: self._clear_alert(alert_id, cmd.at, Source.SUPERVISOR.value, "rescan_ack", cmd)

    def _cmd_super_round_die(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"value", "hand"})
        die = self.variant.super_round
        if not self._needs_die or die is None:
            return f"variant {self.variant.name!r} has no super round"
        value = args_.req_int(cmd.args, "value", 1, die.die_faces)
        st = self.state
        if st.phase in (NO_SHOE, OVER) and not st.held:
            return "no shoe is being dealt"
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            hand = st.round.hand if st.round is not None else st.hand + 1
        rnd = st.round_for(hand)
        if rnd is None and hand != st.hand + 1:
            return f"hand {hand} is not in progress, held or next"
        if (rnd.die if rnd is not None else st.dies.get(hand)) is not None:
            return f"hand {hand} already has its die"
        target_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR.value
            self._emit(
                "super_round_die",
                cmd.at,
                source,
                {"hand": target_hand, "value": value, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=target_hand,
            )
            held = st.held.get(target_hand)
            if held is not None:
                self._try_complete_held(held, cmd.at, source)

        return effect

    # ------------------------------------------------------------------ views
    def _round_view(self, rnd: RoundState) -> dict[str, Any]:
        view = rnd.to_dict()
        player, banker = rnd.sides()
        view["player_total"] = sum(c.points for c in player) % 10
        view["banker_total"] = sum(c.points for c in banker) % 10
        view["next_slot"] = rnd.next_slot()
        view["blocked_by"] = self._blockers(rnd)
        return view
