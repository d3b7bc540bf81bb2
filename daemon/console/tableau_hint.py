"""What the dealer must do next in a round, by the tableau (``daemon/rules/tableau.py``).

A pure function of the round's cards by slot: the next slot to deal with a sentence for the
layout ("Player draws", "Banker stands"), or the round decided.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from common.cards import Card, CardParseError, hand_total
from common.slots import OPENING_SLOTS, Slot
from daemon.rules.tableau import banker_draws, player_draws


@dataclass(frozen=True, slots=True)
class NextCard:
    """``slot`` to deal next (None when the round's cards are complete) and what to tell."""

    slot: Slot | None
    text: str


def next_card(cards: Mapping[str, str], hidden: Collection[str] = ()) -> NextCard:
    """The tableau's next step for a round holding ``cards`` (``{"P1": "8s", ...}``) and, on a
    squeeze table, the ``hidden`` slots dealt face down: the next opening slot while any is
    missing; else, while a card is face down, only that the reveal comes first (the tableau's
    answer would tell what the hidden cards are)."""
    if hidden:
        return _face_down_step(cards, hidden)
    try:
        parsed = {slot: Card.parse(code) for slot, code in cards.items()}
    except CardParseError as exc:
        return NextCard(None, f"unreadable card: {exc}")
    for slot in OPENING_SLOTS:
        if slot not in parsed:
            side = "Player" if slot.is_player else "Banker"
            return NextCard(slot, f"Deal {side} card {slot[1]} ({slot})")
    player = hand_total([parsed[Slot.P1], parsed[Slot.P2]])
    banker = hand_total([parsed[Slot.B1], parsed[Slot.B2]])
    if player >= 8 or banker >= 8:
        return NextCard(None, "Natural: both stand")
    if player_draws(player, banker):
        if Slot.P3 not in parsed:
            return NextCard(Slot.P3, "Player draws")
        third: int | None = parsed[Slot.P3].points
        said = "Player drew"
    else:
        third = None
        said = "Player stands"
    if banker_draws(player, banker, third):
        if Slot.B3 not in parsed:
            return NextCard(Slot.B3, f"{said}; Banker draws")
        return NextCard(None, f"{said}; Banker drew")
    return NextCard(None, f"{said}; Banker stands")


def _face_down_step(cards: Mapping[str, str], hidden: Collection[str]) -> NextCard:
    """What a squeeze round with cards face down needs next, telling nothing about their faces."""
    for slot in OPENING_SLOTS:
        if slot not in cards and slot not in hidden:
            side = "Player" if slot.is_player else "Banker"
            return NextCard(slot, f"Deal {side} card {slot[1]} ({slot}) face down")
    return NextCard(None, f"Face down: {', '.join(sorted(hidden))}; waiting for the reveal")
