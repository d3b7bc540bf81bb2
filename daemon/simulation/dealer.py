"""The virtual dealer: shuffle N decks, deal a shoe by the rules, inject faults.

:func:`plan_shoe` deals (indicator and burn, rounds by the third-card rule, the cut
card, optional per-round burn) and injects the dealing mistakes and device faults
asked for, as a :class:`drivers.simulate.ShoePlan` of timed device actions;
:func:`make_fixture` encodes such a plan for one protocol
(:func:`drivers.simulate.encode_plan`) and wraps it as a fixture file. The dealer
lives on the daemon side because it needs the game rules (``daemon.rules``); the
device side (actions, per-protocol encoders, :class:`drivers.simulate.VirtualShoe`)
lives in ``drivers/simulate.py``.

Faults (``KIND@HAND``): ``misread`` (cannot read, then the rescan),
``unneeded_card`` and ``two_unneeded_cards`` (RULES.md mistakes 1 and 2; the unneeded
card holds the next round, which a supervisor ``resolve_hold`` releases once it is decided),
``double_pull`` / ``triple_pull`` (mistake 3: cards pulled together; a reader that
names slots reports them out of order), ``missing_card`` (mistake 5: a card not
scanned, supplied by a supervisor ``assign_card``), ``card_exposed`` (mistake 7: a
supervisor voids the round), ``foreign_card`` (an extra physical card: over the
shoe's composition when it is a copy too many), ``repeats`` (more resends),
``bad_checksum`` (first transmission corrupted), ``corrupt_card_frame`` (Angel Eye
only: every transmission of Banker 1's frame corrupted, so the card never arrives; the
engine asks for a rescan and a supervisor supplies it with ``assign_card``), ``garbage`` (noise on the
line), ``unplug`` (the device goes away in the middle of a frame and comes back),
``outside_game_card`` (Angel Eye only: during the betting before the hand a card
leaves the locked shoe, a ``d`` frame; RULES.md mistake 7, a card exposed during betting).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from common.cards import ALL_CARDS, Card
from common.inputs import DeviceTarget
from common.slots import ROUND_SLOTS, Slot
from daemon.rules.outcome import RoundOutcome, Winner, next_slot
from drivers.fixtures import GENERATED_PROVENANCE, Fixture, FixtureHeader, UsbIdentity
from drivers.simulate import SIM_PRODUCT_ID, SIM_VENDOR_ID, Action, ShoePlan, encode_plan


class Fault(StrEnum):
    """A dealing mistake or device fault the virtual dealer can inject (see the module docstring)."""

    MISREAD = "misread"
    UNNEEDED_CARD = "unneeded_card"
    TWO_UNNEEDED_CARDS = "two_unneeded_cards"
    DOUBLE_PULL = "double_pull"
    TRIPLE_PULL = "triple_pull"
    MISSING_CARD = "missing_card"
    CARD_EXPOSED = "card_exposed"
    FOREIGN_CARD = "foreign_card"
    REPEATS = "repeats"
    BAD_CHECKSUM = "bad_checksum"
    GARBAGE = "garbage"
    UNPLUG = "unplug"
    OUTSIDE_GAME_CARD = "outside_game_card"
    CORRUPT_CARD_FRAME = "corrupt_card_frame"


ANGEL_EYE_ONLY = frozenset(
    {Fault.REPEATS, Fault.BAD_CHECKSUM, Fault.OUTSIDE_GAME_CARD, Fault.CORRUPT_CARD_FRAME}
)


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """A fault injected in one hand of the shoe."""

    kind: Fault
    hand: int

    @staticmethod
    def parse(text: str) -> FaultSpec:
        """``"misread@3"`` → misread in hand 3; raise ValueError naming what is wrong."""
        kind, sep, hand = text.partition("@")
        try:
            fault = Fault(kind)
        except ValueError:
            known = ", ".join(f.value for f in Fault)
            raise ValueError(f"unknown fault {kind!r} (known: {known})") from None
        if not sep or not hand.isdigit() or int(hand) < 1:
            raise ValueError(f"fault {text!r}: expected KIND@HAND with HAND a positive hand number")
        return FaultSpec(fault, int(hand))

    def __str__(self) -> str:
        return f"{self.kind.value}@{self.hand}"


@dataclass(frozen=True, slots=True)
class DealSettings:
    """How the virtual dealer deals (mirror of the table's settings it must agree with)."""

    decks: int = 8
    seed: int = 1
    max_hands: int | None = None
    cut_card_from_end: int = 16
    indicator_counts: bool = False
    ace_burns: int = 1
    face_burns: int = 10
    burn_before_each_round: bool = False
    round_burn_cards: int = 1
    cut_card_policy: str = "finish_current_round"
    shoe_id: str | None = None

    def burn_count(self, rank: int) -> int:
        value = self.ace_burns if rank == 1 else self.face_burns if rank >= 10 else rank
        return value - 1 if self.indicator_counts else value

    def table_settings(self) -> dict[str, Any]:
        """The engine ``table:`` section that agrees with this dealer."""
        return {
            "decks": self.decks,
            "burn": {"indicator_counts": self.indicator_counts, "ace_burns": self.ace_burns,
                     "face_burns": self.face_burns},
            "burn_before_each_round": self.burn_before_each_round,
            "round_burn_cards": self.round_burn_cards,
            "cut_card_policy": self.cut_card_policy,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds of simulated time between the dealer's moves."""

    card: float = 1.0
    burn: float = 0.6
    round_gap: float = 15.0
    first_round: float = 10.0
    verdict: float = 0.5
    rescan: float = 1.5


_SLOT_TARGET: dict[str, DeviceTarget] = {s: DeviceTarget(s) for s in ROUND_SLOTS}


def plan_shoe(deal: DealSettings, faults: Iterable[FaultSpec] = (), timing: Timing | None = None) -> ShoePlan:
    """Deal one shoe by the rules, with ``faults`` injected; deterministic for a given seed."""
    timing = timing or Timing()
    rng = random.Random(deal.seed)
    cards = [c for _ in range(deal.decks) for c in ALL_CARDS]
    rng.shuffle(cards)
    by_hand: dict[int, set[Fault]] = {}
    for spec in faults:
        by_hand.setdefault(spec.hand, set()).add(spec.kind)
    plan = ShoePlan()
    acts = plan.actions
    cut_index = max(0, len(cards) - deal.cut_card_from_end)
    t = 0.0
    shoe_id = deal.shoe_id or f"sim-{deal.seed}"
    acts.append(Action(t, "start"))
    acts.append(Action(t, "supervisor", supervisor={"action": "new_shoe", "args": {"shoe_id": shoe_id}}))
    pos = 0
    cut_seen = False

    def take() -> Card:
        nonlocal pos
        card = cards[pos]
        pos += 1
        return card

    t += 2.0
    indicator = take()
    acts.append(Action(t, "draw", card=indicator, target=DeviceTarget.FIRST_CARD, index=1))
    for i in range(deal.burn_count(int(indicator.rank))):
        t += timing.burn
        acts.append(Action(t, "draw", card=take(), target=DeviceTarget.BURN, index=i + 1))
    t += timing.first_round
    hand = 0
    last_hand: int | None = None
    carried_p1: Card | None = None
    confirm_hand: int | None = None  # the round an unneeded card holds, for the supervisor to confirm
    while True:
        if not cut_seen and pos >= cut_index:
            cut_seen = True
            acts.append(Action(t - 1.0, "cut", hand=hand))
            plan.cut_hand = hand
            last_hand = hand + 1
        if last_hand is not None and hand >= last_hand:
            plan.ended_by_cut_card = True
            break
        if deal.max_hands is not None and hand >= deal.max_hands:
            break
        if len(cards) - pos < 6 + (deal.round_burn_cards if deal.burn_before_each_round else 0):
            break
        hand += 1
        kinds = by_hand.get(hand, set())
        if Fault.OUTSIDE_GAME_CARD in kinds:
            acts.append(Action(t - 5.0, "outside", card=take(), hand=hand))  # drawn while locked for betting
        if deal.burn_before_each_round and carried_p1 is None:
            for i in range(deal.round_burn_cards):
                acts.append(Action(t, "draw", card=take(), target=DeviceTarget.BURN, index=i + 1, hand=hand))
                t += timing.burn
        if Fault.FOREIGN_CARD in kinds:
            cards.insert(pos, cards[0])  # a copy of the indicator: one too many in a 1-deck shoe
        if Fault.GARBAGE in kinds:
            acts.append(Action(t - 0.5, "garbage", hand=hand))
        player: list[Card] = []
        banker: list[Card] = []
        dealt: list[tuple[str, Card]] = []
        cut_before: int | None = None  # the cut card comes out just before this card of the round
        while (slot := next_slot(player, banker)) is not None:
            if slot is Slot.P1 and carried_p1 is not None:
                card, carried_p1 = carried_p1, None
                player.append(card)
                continue  # drawn already, as the second unneeded card of the previous round
            if not cut_seen and pos >= cut_index:
                cut_seen = True
                cut_before = len(dealt)
                plan.cut_hand = hand
                # before the round's first card (even after its burn) is still between rounds
                between = cut_before == 0
                last_hand = hand if deal.cut_card_policy == "finish_current_round" or between else hand + 1
            card = take()
            (player if slot.is_player else banker).append(card)
            dealt.append((slot.value, card))
        t = _emit_round(acts, dealt, hand, kinds, t=t, timing=timing, cut_before=cut_before)
        if Fault.CARD_EXPOSED in kinds:
            pos -= max(0, len(dealt) - 2)  # voided after two cards: the rest stay in the shoe
            if cut_before is not None and cut_before >= 2:
                cut_seen, last_hand, plan.cut_hand = False, None, None
            t += timing.round_gap
            continue
        if confirm_hand == hand:
            # The unneeded card before this round holds it: the supervisor, who watched the
            # dealer draw it, accepts the engine's reading once the round is decided.
            confirm = {"action": "resolve_hold", "args": {"hand": hand}}
            acts.append(Action(t + timing.verdict / 2, "supervisor", hand=hand, supervisor=confirm))
            confirm_hand = None
        outcome = RoundOutcome(tuple(player), tuple(banker))
        winner = {Winner.PLAYER: "player", Winner.BANKER: "banker", Winner.TIE: "tie"}[outcome.winner]
        acts.append(Action(t + timing.verdict, "verdict", hand=hand,
                           verdict=(winner, outcome.player_pair, outcome.banker_pair)))  # fmt: skip
        extra = 2 if Fault.TWO_UNNEEDED_CARDS in kinds else 1 if Fault.UNNEEDED_CARD in kinds else 0
        if extra and len(cards) - pos > 8:
            confirm_hand = hand + 1
            acts.append(
                Action(t + timing.card, "draw", card=take(), target=DeviceTarget.BURN, index=1, hand=hand)
            )
            if extra == 2:
                carried_p1 = take()
                acts.append(Action(t + timing.card * 1.8, "draw", card=carried_p1, target=DeviceTarget.P1,
                                   hand=hand + 1))  # fmt: skip
        t += timing.round_gap
    acts.append(Action(t, "tick"))
    acts.sort(key=lambda a: a.t)
    plan.hands = hand
    plan.cards_used = pos
    plan.remaining = tuple(cards[pos:])
    return plan


def _emit_round(
    acts: list[Action], dealt: list[tuple[str, Card]], hand: int, kinds: set[Fault], *, t: float,
    timing: Timing, cut_before: int | None,
) -> float:  # fmt: skip
    """Append the draws of one round with its faults; return the time the round was decided."""
    draws = [Action(0, "draw", card=c, target=_SLOT_TARGET[s], hand=hand) for s, c in dealt]
    if Fault.CARD_EXPOSED in kinds:
        for i, draw in enumerate(draws[:2]):
            if i == cut_before:
                acts.append(Action(t - 0.3, "cut", hand=hand))
            acts.append(_at(draw, t))
            t += timing.card
        void = {"action": "void_round", "args": {"hand": hand, "reason": "card exposed during betting"}}
        acts.append(Action(t, "supervisor", hand=hand, supervisor=void))
        acts.append(Action(t + 0.2, "verdict", hand=hand, verdict=("forced_quit", False, False)))
        return t
    times = [t + i * timing.card for i in range(len(draws))]
    order = list(range(len(draws)))
    if Fault.DOUBLE_PULL in kinds and len(draws) >= 4:
        times[3] = times[2] + 0.05
        order[2], order[3] = 3, 2  # the reader reports the lower card first
    if Fault.TRIPLE_PULL in kinds and len(draws) >= 5:
        times[3], times[4] = times[2] + 0.05, times[2] + 0.1
        order[2:5] = [4, 2, 3]
    shift = 0.0
    for position, i in enumerate(order):
        draw = draws[i]
        at = times[position] + shift
        if i == cut_before:
            acts.append(Action(at - 0.3, "cut", hand=hand))
        if Fault.MISREAD in kinds and i == 1:
            acts.append(Action(at, "misread", hand=hand))
            shift += timing.rescan
            at += timing.rescan
        if Fault.UNPLUG in kinds and i == 1:
            acts.append(_at(draw, at, kind="unplug"))
            shift += 3.0
            at += 3.0
        if Fault.CORRUPT_CARD_FRAME in kinds and i == 1:
            assert draw.card is not None
            acts.append(Action(at, "draw", card=draw.card, target=draw.target, hand=hand, corrupt_all=True))
            acts.append(Action(at + 0.5, "supervisor", hand=hand, supervisor={
                "action": "assign_card",
                "args": {"card": draw.card.code, "slot": Slot.B1, "hand": hand}}))  # fmt: skip
            continue
        if Fault.MISSING_CARD in kinds and i == 1:
            assert draw.card is not None
            acts.append(Action(at + 0.5, "supervisor", hand=hand, supervisor={
                "action": "assign_card",
                "args": {"card": draw.card.code, "slot": Slot.B1, "hand": hand}}))  # fmt: skip
            continue
        acts.append(
            Action(at, "draw", card=draw.card, target=draw.target, hand=hand,
                   resend=3 if Fault.REPEATS in kinds else 0, corrupt_first=Fault.BAD_CHECKSUM in kinds)
        )  # fmt: skip
    return times[-1] + shift


def _at(action: Action, t: float, kind: str | None = None) -> Action:
    return Action(t, kind or action.kind, card=action.card, target=action.target, index=action.index,
                  hand=action.hand)  # fmt: skip


def make_fixture(
    name: str,
    protocol: str,
    deal: DealSettings,
    faults: Sequence[FaultSpec] = (),
    *,
    description: str = "",
    covers: Sequence[str] = (),
    timing: Timing | None = None,
    extend: Callable[[ShoePlan], None] | None = None,
) -> Fixture:
    """Deal, encode and wrap a shoe as a fixture (metadata says it is generated); ``extend`` may
    append actions after the dealt shoe (e.g. a remainder count)."""
    bad = [str(f) for f in faults if f.kind in ANGEL_EYE_ONLY and protocol != "angel_eye"]
    if bad:
        raise ValueError(f"fault(s) {', '.join(bad)} only exist on the Angel Eye protocol")
    plan = plan_shoe(deal, faults, timing)
    if extend is not None:
        extend(plan)
    steps = encode_plan(plan, protocol, deal.seed)
    usb = UsbIdentity(vendor_id=SIM_VENDOR_ID, product_id=SIM_PRODUCT_ID) if protocol == "usb_hid" else None
    header = FixtureHeader(
        name=name,
        description=description,
        protocol=protocol,  # type: ignore[arg-type]
        transport="usb" if protocol == "usb_hid" else "serial",
        origin="generated",
        provenance=GENERATED_PROVENANCE,
        table=deal.table_settings(),
        usb=usb,
        generator={
            "tool": "drivers.simulate",  # as every committed fixture says it (the encoder's module)
            "seed": deal.seed,
            "decks": deal.decks,
            "max_hands": deal.max_hands,
            "cut_card_from_end": deal.cut_card_from_end,
            "faults": [str(f) for f in faults],
            "hands": plan.hands,
            "cut_hand": plan.cut_hand,
            "cards_used": plan.cards_used,
        },
        covers=list(covers),
    )  # fmt: skip
    return Fixture(header=header, steps=tuple(steps))
