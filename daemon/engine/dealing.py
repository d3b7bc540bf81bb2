"""The shoe procedure: where the next card goes (indicator, burns, unneeded cards, the draw
order), placing it, refusing what cannot be placed, deciding and completing rounds, and
starting and ending shoes (``README.md``, "State machine"; daemon/rules/RULES.md, the shoe
procedure and dealing mistakes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.inputs import DeviceTarget, Source, SupervisorCommand
from common.slots import OPENING_SLOTS, ROUND_SLOTS, Slot
from daemon.alerts import AlertCode
from daemon.engine.aggregate import AFTER_LAST_ROUND, JOURNAL_FULL, NO_SHOE, RefusalEpisodes
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.flow_timing import unneeded_in_time
from daemon.engine.payloads import ReadFields
from daemon.engine.phases import (
    LAST_ROUND_ENDS,
    NEXT_ROUND,
    OUTSIDE_SHOE,
    BurnKind,
    CardPlace,
    FlowPhase,
    Phase,
    ShoeEnd,
)
from daemon.engine.rounds import RoundState
from daemon.engine.settings import GameFlow
from daemon.engine.settle import RANKS
from daemon.engine.shoe import ShoeSetup
from daemon.engine.squeeze import sealed_card, unrevealed
from daemon.engine.state import TableState

# Which device targets agree with which engine slot.
TARGET_AGREES: dict[str, frozenset[DeviceTarget]] = {
    CardPlace.INDICATOR: frozenset({DeviceTarget.FIRST_CARD}),
    CardPlace.BURN: frozenset({DeviceTarget.BURN, DeviceTarget.BURN_COUNT}),
    **{slot: frozenset({DeviceTarget(slot)}) for slot in ROUND_SLOTS},
}


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the engine puts the next card."""

    slot: Slot | CardPlace
    burn: BurnKind | None = None  # for burn cards
    opens_round: bool = False
    unneeded: int = 0  # 1 or 2: daemon/rules/RULES.md dealing mistakes 1 and 2
    flow: bool = False  # told by the betting window (game_flow betting_window), not by time


_INDICATOR = Placement(CardPlace.INDICATOR)
_OPENING_BURN = Placement(CardPlace.BURN, burn=BurnKind.OPENING)
_ROUND_BURN = Placement(CardPlace.BURN, burn=BurnKind.ROUND)
_UNNEEDED_BURN = Placement(CardPlace.BURN, burn=BurnKind.UNNEEDED, unneeded=1)
_UNNEEDED_P1 = Placement(Slot.P1, opens_round=True, unneeded=2)
_NEW_ROUND = Placement(Slot.P1, opens_round=True)
# game_flow betting_window: before betting closes, a card is never a round's card
EXPOSED = Placement(CardPlace.EXPOSED)  # betting is open: RULES.md mistake 7, never placed (sequencer)
AWAITING_REVEAL = Placement(CardPlace.EXPOSED)  # squeeze: the round needs no card, only reveals
_FLOW_UNNEEDED = Placement(CardPlace.BURN, burn=BurnKind.UNNEEDED, unneeded=1, flow=True)
_FLOW_UNNEEDED_MORE = Placement(CardPlace.BURN, burn=BurnKind.UNNEEDED, unneeded=2, flow=True)
_SIGNALLED_BURN = Placement(CardPlace.BURN, burn=BurnKind.SIGNALLED)  # a slotless reader's BURN_STARTED mark
_IN_ROUND = {slot: Placement(slot) for slot in ROUND_SLOTS}
_NO_ROUND = frozenset({CardPlace.INDICATOR, CardPlace.BURN})
"""The places of cards that belong to no round."""
_OPENS_SHOE = frozenset({None, BurnKind.OPENING})
"""The indicator and the opening burn: after the last of them, the first round's bets are offered."""

# Bound once: ``Phase.X`` / ``EventKind.X`` go through the enum metaclass's ``__getattr__``
# (~0.1 µs in Python 3.11), and every card is planned and placed.
_PHASE_INDICATOR = Phase.INDICATOR
_PHASE_BURNING = Phase.BURNING
_PHASE_READY = Phase.READY
_PHASE_ROUND = Phase.ROUND
_CARD_DEALT = EventKind.CARD_DEALT
_ROUND_OPENED = EventKind.ROUND_OPENED
_BETS_OFFERED = EventKind.BETS_OFFERED
_ROUND_COMPLETED = EventKind.ROUND_COMPLETED
_BETTING_WINDOW = GameFlow.BETTING_WINDOW
_FLOW_BETTING = FlowPhase.BETTING
_FLOW_DEALING = FlowPhase.DEALING
_CAMERA = Source.CAMERA
_PLACE_INDICATOR = CardPlace.INDICATOR
_PLACE_BURN = CardPlace.BURN


def missing_slots(rnd: RoundState) -> list[str]:
    """The slots a round cut short lacks, as far as its cards tell: the opening slots not dealt,
    else the third card it needs next (a missing Player third card may call for a Banker one too)."""
    absent = [slot.value for slot in OPENING_SLOTS if slot not in rnd.cards]
    if absent:
        return absent
    needed = rnd.next_slot()
    return [] if needed is None else [needed.value]


class Dealing:
    """Placing cards by the shoe procedure and draw order; deciding rounds; shoe start and end."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    refusals: RefusalEpisodes
    table_id: str
    """The table's id, which a squeeze table's card commitments are bound to."""

    def __init__(
        self,
        *,
        state: TableState,
        shoe: ShoeSetup,
        emitter: Emitter,
        refusals: RefusalEpisodes,
        table_id: str = "",
    ) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.refusals = refusals
        self.table_id = table_id

    def refuse_outside_shoe(self, at: float, source: str, fields: ReadFields) -> None:
        st = self.state
        after_last = st.phase == Phase.OVER and st.shoe_end_reason in LAST_ROUND_ENDS
        code = AlertCode.CARD_AFTER_LAST_ROUND if after_last else AlertCode.NO_SHOE
        episode = st.open_alert_ids(code, fields["device"])  # one open alert per episode
        reason = AFTER_LAST_ROUND if after_last else NO_SHOE
        if episode and self.refusals.absorb(reason, episode[-1], fields["card"], fields):
            return
        self.emitter.alert(code, at, source, device=fields["device"], read=fields, refused=1)

    def refuse_for_storage(self, code: str, at: float, source: str, fields: ReadFields) -> None:
        """The journal is full and this card would open a round: refuse it, never place it.

        It physically left the shoe, so it counts against the composition (unless it is
        already over it: a misread or foreign card); one alert counts every refused card.
        """
        st = self.state
        if self.refusals.absorb(JOURNAL_FULL, st.storage_alert, code, fields):
            return  # past the episode's listed cards: tallied into a cards_refused summary
        seen = st.counts.get(code, 0)
        counted = seen < self.shoe.settings.decks
        refused = st.storage_refused + 1 if st.storage_alert is not None else 1
        alert_id = st.storage_alert
        if alert_id is None:
            alert_id = self.emitter.alert(
                AlertCode.JOURNAL_FULL_CARD_REFUSED,
                at,
                source,
                device=fields.get("device"),
                detail=st.storage_detail,
                refused=1,
            )
        data: dict[str, Any] = {
            "card": code,
            "reason": "journal_full",
            "counted": counted,
            "refused": refused,
            "alert_id": alert_id,
            "read": fields,
        }
        if not counted:
            data["not_counted_because"] = self.shoe.over_composition_text(seen)
        self.emitter.emit(EventKind.CARD_REFUSED, at, source, data)
        if st.rescan_alert is not None:  # the unread card was read: refused, but no longer unknown
            self.emitter.clear_alert(st.rescan_alert, at, source, "rescanned, refused (journal full)")

    def composition_ok(
        self,
        code: str,
        at: float,
        source: str,
        fields: ReadFields,
        *,
        holds: int | str | None = None,
    ) -> bool:
        """Whether another ``code`` fits in the shoe; if not, raise ``over_composition``
        (holding ``holds``: a hand, ``NEXT_ROUND``, or nothing)."""
        seen = self.state.counts.get(code, 0)
        if seen < self.shoe.settings.decks:
            return True
        self.emitter.alert(
            AlertCode.OVER_COMPOSITION,
            at,
            source,
            hand=self.state.round.hand if self.state.round is not None else None,
            holds=holds,
            device=fields.get("device"),
            read=fields,
            card=code,
            already_seen=seen,
            decks=self.shoe.settings.decks,
        )
        return False

    def refuse_over_composition(self, code: str, at: float, source: str, fields: ReadFields) -> None:
        """A reader's card over the shoe's composition (misread or foreign card).

        It physically occupies the slot the draw order gives it, so taking the next card in
        its place would shift the round (daemon/rules/RULES.md: never accepted silently). Like a misread,
        the slot waits for a valid rescan (``rescan_needed``: no card is accepted meanwhile),
        and the alert holds the round (or the next one, between rounds) for a supervisor.
        """
        st = self.state
        hand = st.round.hand if st.round is not None else None
        self.composition_ok(code, at, source, fields, holds=hand if hand is not None else NEXT_ROUND)
        if st.rescan_alert is None:
            self.emitter.alert(
                AlertCode.RESCAN_NEEDED,
                at,
                source,
                hand=hand,
                device=fields.get("device"),
                read=fields,
                reason="over_composition",
                reader_code=None,
            )

    def plan(self, at: float, *, detect_unneeded: bool = True) -> Placement:
        """Where the next card goes, by the shoe procedure and draw order alone."""
        st = self.state
        phase = st.phase
        if phase == _PHASE_ROUND:
            assert st.round is not None
            slot = st.round.next_slot()
            if slot is None:  # (only on a squeeze table: a decided round stays until revealed)
                return AWAITING_REVEAL
            return _IN_ROUND[slot]
        if phase == _PHASE_INDICATOR:
            return _INDICATOR
        if phase == _PHASE_BURNING:
            return _OPENING_BURN
        if st.burn_signalled:
            return _SIGNALLED_BURN
        if self.shoe.settings.game_flow is _BETTING_WINDOW:
            return self._plan_by_betting_window(at)
        window = self.shoe.settings.unneeded_card_window_s
        recent = detect_unneeded and window > 0 and st.decided_at is not None and at - st.decided_at <= window
        if recent and st.unneeded_count == 0:
            return _UNNEEDED_BURN
        if recent and st.unneeded_count == 1:
            return _UNNEEDED_P1
        if st.round_burn_remaining > 0:
            return _ROUND_BURN
        return _NEW_ROUND

    def _plan_by_betting_window(self, at: float) -> Placement:
        """Between rounds, with ``game_flow: betting_window``: the betting window says what the next
        card is; a card soon after the last decision is its unneeded card even if betting has
        reopened (``README.md``, "Game flow")."""
        st = self.state
        flow = st.flow_phase
        if flow == _FLOW_BETTING and not unneeded_in_time(st, self.shoe.settings.betting, at):
            return EXPOSED
        if st.round_burn_remaining > 0:
            return _ROUND_BURN  # (an unneeded card counts as the next round's burn: RULES.md mistake 1)
        if flow == _FLOW_DEALING:
            return _NEW_ROUND
        return _FLOW_UNNEEDED if st.unneeded_count == 0 else _FLOW_UNNEEDED_MORE

    def place(
        self,
        plan: Placement,
        code: str,
        at: float,
        source: str,
        *,
        read: ReadFields | None = None,
        target: DeviceTarget | None = None,
        cmd: SupervisorCommand | None = None,
        hand: int | None = None,
        from_outside_game: bool = False,
    ) -> None:
        """Emit a card's events: round opening, the card, its alerts, and what it decides.
        ``from_outside_game``: the card was counted when it was drawn (exposed during betting, made
        the round's by a late close): it is moved into the round, not counted again."""
        st = self.state
        if plan.opens_round:
            self._open_round(at, source)
        slot = plan.slot
        data: dict[str, Any] = {"card": code, "slot": slot, "source": source}
        round_hand: int | None = None
        # (if/elif on bound members, not ``match``: a ``case CardPlace.X`` looks the member up on
        # the enum class for every card)
        if isinstance(slot, Slot):
            round_hand = hand if hand is not None else st.hand
            data["round"] = round_hand
            if plan.unneeded:
                data["unneeded"] = True
            if source == _CAMERA and st.rescan_alert is not None:
                data["fills_rescan"] = True
        elif slot is _PLACE_INDICATOR:
            data["burn_count"] = self.shoe.settings.burn_count(RANKS[code])
        elif slot is _PLACE_BURN:
            data["burn"] = plan.burn
        else:
            raise AssertionError(f"a card for {slot} is never placed")  # exposed during betting
        if read is not None:
            data["read"] = read
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        if from_outside_game:
            data["from_outside_game"] = True
        if self.emitter.squeeze and slot is not _PLACE_INDICATOR:
            data = sealed_card(data, self.table_id, st.shoe_id or "", round_hand or st.hand)
        self.emitter.emit(_CARD_DEALT, at, source, data, hand=round_hand)
        device = None if read is None else read["device"]
        if plan.unneeded:
            self._unneeded_alert(plan, code, at, source, device=device, round_hand=round_hand)
        if target is not None and target not in TARGET_AGREES[plan.slot]:
            self.emitter.alert(
                AlertCode.DEVICE_DISAGREEMENT,
                at,
                source,
                hand=round_hand,
                holds=round_hand if round_hand is not None else NEXT_ROUND,
                device=device,
                card=code,
                engine_slot=plan.slot,
                device_target=target,
            )
        if st.rescan_alert is not None:
            reason = {"camera": "camera_filled", "supervisor": "assigned"}.get(source, "rescanned")
            self.emitter.clear_alert(st.rescan_alert, at, source, reason, cmd=cmd)
        self._after_card(plan, at, source, round_hand, decided_at=at if read is None else read["read_at"])

    def _open_round(self, at: float, source: str) -> None:
        st = self.state
        next_hand = st.hand + 1
        bets = self.shoe.settler.offered(next_hand + st.rounds_lost)  # the physical round number
        opened: dict[str, Any] = {"hand": next_hand, "bets": bets}
        if st.flow_round_id is not None and st.flow_phase == _FLOW_DEALING:
            opened["round_id"] = st.flow_round_id
        self.emitter.emit(_ROUND_OPENED, at, source, opened, hand=next_hand)

    def _unneeded_alert(
        self,
        plan: Placement,
        code: str,
        at: float,
        source: str,
        *,
        device: str | None,
        round_hand: int | None,
    ) -> None:
        """The alert of a card the round did not need (daemon/rules/RULES.md dealing mistakes 1-2)."""
        st = self.state
        if plan.flow:
            # Betting had not closed: this card is no round's card, whatever its timing. A first one
            # is the next round's burn (RULES.md mistake 1: nothing to decide); after it, the dealer
            # may have made it the next round's Player 1 (mistake 2): that round is held.
            self.emitter.alert(
                AlertCode.CARD_BEFORE_BETTING_CLOSED,
                at,
                source,
                hand=st.hand or None,
                holds=NEXT_ROUND if plan.unneeded == 2 else None,
                device=device,
                card=code,
                became="a burn card: betting for the next round had not closed, so it is never that round's "
                "Player 1 (if the dealer used it so, correct the held round)",
                rule=f"RULES.md dealing mistake {plan.unneeded}",
            )
            return
        became = "the next round's burn card" if plan.unneeded == 1 else "the next round's Player 1"
        # Told from the next round's Player 1 by time only: the round it opens (or, for a
        # burn, the next one) is held until a supervisor accepts or corrects the reading.
        self.emitter.alert(
            AlertCode.UNNEEDED_CARD,
            at,
            source,
            hand=st.hand if plan.unneeded == 1 else round_hand,
            holds=NEXT_ROUND if plan.unneeded == 1 else round_hand,
            device=device,
            card=code,
            became=became,
            rule=f"RULES.md dealing mistake {plan.unneeded}",
        )

    def _after_card(
        self, plan: Placement, at: float, source: str, round_hand: int | None, *, decided_at: float
    ) -> None:
        """What a placed card decides: the bets of the first round after the opening burn, or its round."""
        st = self.state
        if plan.slot in _NO_ROUND and plan.burn in _OPENS_SHOE and st.phase == _PHASE_READY:
            self.offer(st.hand + 1, at, source)
        elif round_hand is not None:
            rnd = st.round_for(round_hand)
            assert rnd is not None
            if rnd.next_slot() is None and not (self.emitter.squeeze and unrevealed(st, rnd)):
                if rnd is st.round:
                    self.decide(rnd, at, source, decided_at)
                else:
                    self.try_complete_held(rnd, at, source)

    def offer(self, hand: int, at: float, source: str) -> None:
        """The bets offered on ``hand``: by its physical round number (lost rounds counted)."""
        bets = self.shoe.settler.offered(hand + self.state.rounds_lost)
        self.emitter.emit(_BETS_OFFERED, at, source, {"hand": hand, "bets": bets}, hand=hand)

    def decide(self, rnd: RoundState, at: float, source: str, decided_at: float) -> None:
        """The round in progress is decided: complete it, or hold it while something blocks it."""
        blockers = self.shoe.blockers(rnd)
        if self.shoe.settings.await_device_verdict:
            blockers.append("awaiting the reader's verdict")
        if blockers:
            self.emitter.emit(
                EventKind.ROUND_HELD,
                at,
                source,
                {
                    "hand": rnd.hand,
                    "cards": dict(rnd.cards),
                    "blocked_by": blockers,
                    "awaiting_verdict": self.shoe.settings.await_device_verdict,
                    "decided_at": decided_at,
                },
                hand=rnd.hand,
            )
        else:
            self._complete(rnd, at, source, decided_at)
        self.after_round(rnd.hand, at, source)

    def cut_short(self, at: float, source: str, *, next_round_id: str | None, betting_source: str) -> None:
        """The next round's betting opened while the round in progress still needs cards: that round
        is over on the table (``README.md``, "Game flow"). It is held with the cards read so far,
        naming the slots it lacks, and never completed with later cards: they are the next round's.
        """
        st = self.state
        rnd = st.round
        assert rnd is not None
        assert st.phase == _PHASE_ROUND
        if st.rescan_alert is not None:  # the unread card's slot is one of the missing slots now
            self.emitter.clear_alert(st.rescan_alert, at, source, "round cut short: its slot is missing")
        self.emitter.alert(
            AlertCode.ROUND_CUT_SHORT,
            at,
            source,
            hand=rnd.hand,
            holds=rnd.hand,
            round_id=st.round_ids.get(rnd.hand),
            next_round_id=next_round_id,
            cards=dict(rnd.cards),
            missing=missing_slots(rnd),
            betting_source=betting_source,
        )
        self.emitter.emit(
            EventKind.ROUND_HELD,
            at,
            source,
            {
                "hand": rnd.hand,
                "cards": dict(rnd.cards),
                "blocked_by": self.shoe.blockers(rnd),
                "awaiting_verdict": False,
                "decided_at": at,
            },
            hand=rnd.hand,
        )
        self.after_round(rnd.hand, at, source)

    def after_round(self, hand: int, at: float, source: str) -> None:
        """Round ``hand`` was decided, voided or cut short: the shoe's end, or the next round's bets."""
        ends = self.last_round_end(hand)
        if ends is not None:
            self.end_shoe(at, source, ends)
        else:
            self.offer(hand + 1, at, source)

    def last_round_end(self, hand: int) -> ShoeEnd | None:
        """Why round ``hand`` is the shoe's last (the cut card's, or the configured limit counting
        the rounds lost before it), or None when another round follows it."""
        st = self.state
        limit = self.shoe.settings.max_rounds_per_shoe
        if st.last_hand is not None and hand >= st.last_hand:
            return ShoeEnd.CUT_CARD
        if limit is not None and hand + st.rounds_lost >= limit:
            return ShoeEnd.ROUND_LIMIT
        return None

    def end_shoe(self, at: float, source: str, reason: ShoeEnd) -> None:
        st = self.state
        self.emitter.emit(
            EventKind.SHOE_ENDED,
            at,
            source,
            {"shoe_id": st.shoe_id, "reason": reason, "hands": st.hand, "cards_out": st.cards_out},
        )

    def _complete(self, rnd: RoundState, at: float, source: str, decided_at: float | None) -> None:
        outcome, bets = self.shoe.settler.settle(*rnd.codes(), rnd.physical, rnd.die)
        self.emitter.emit(
            _ROUND_COMPLETED,
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

    def try_complete_held(self, rnd: RoundState, at: float, source: str) -> None:
        if self.emitter.squeeze and unrevealed(self.state, rnd):
            return  # a squeeze round completes once every card of it was revealed
        if rnd.hand in self.state.held and rnd.next_slot() is None and not self.shoe.blockers(rnd):
            self._complete(rnd, at, source, None)

    def start_shoe(self, at: float, shoe_id: str | None, cmd: SupervisorCommand | None, source: str) -> None:
        st = self.state
        if st.phase not in OUTSIDE_SHOE:
            self.end_shoe(at, source, ShoeEnd.REPLACED)
        new_id = shoe_id or f"shoe-{st.shoes_started + 1}-{round(at * 1000)}"
        data: dict[str, Any] = {
            "shoe_id": new_id,
            "decks": self.shoe.configured_settings.decks,
            "variant": self.shoe.configured_variant.name,
            "variant_digest": self.shoe.configured_variant.digest,
            "started_by": "device" if cmd is None else "supervisor",
            "actor": None if cmd is None else cmd.actor,
            "command_id": None if cmd is None else cmd.command_id,
        }
        self.emitter.emit(EventKind.SHOE_STARTED, at, source, data, shoe_id=new_id)
        self.shoe.use(data)
