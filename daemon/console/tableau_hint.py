"""What the dealer must do next in a round, by the tableau (``daemon/rules/tableau.py``).

A pure function of the round's cards by slot: the next slot to deal with a sentence for the
layout ("Player draws", "Banker stands"), or the round decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.cards import Card, CardParseError, hand_total
from daemon.rules.tableau import banker_draws, player_draws


@dataclass(frozen=True, slots=True)
class NextCard:
    """``slot`` to deal next (None when the round's cards are complete) and what to tell."""

    slot: str | None
    text: str


_OPENING = ("P1", "B1", "P2", "B2")


def next_card(cards: Mapping[str, str]) -> NextCard:
    """The tableau's next step for a round holding ``cards`` (``{"P1": "8s", ...}``)."""
    try:
        parsed = {slot: Card.parse(code) for slot, code in cards.items()}
    except CardParseError as exc:
        return NextCard(None, f"unreadable card: {exc}")
    for slot in _OPENING:
        if slot not in parsed:
            side = "Player" if slot.startswith("P") else "Banker"
            return NextCard(slot, f"Deal {side} card {slot[1]} ({slot})")
    player = hand_total([parsed["P1"], parsed["P2"]])
    banker = hand_total([parsed["B1"], parsed["B2"]])
    if player >= 8 or banker >= 8:
        return NextCard(None, "Natural: both stand")
    if player_draws(player, banker):
        if "P3" not in parsed:
            return NextCard("P3", "Player draws")
        third: int | None = parsed["P3"].points
        said = "Player drew"
    else:
        third = None
        said = "Player stands"
    if banker_draws(player, banker, third):
        if "B3" not in parsed:
            return NextCard("B3", f"{said}; Banker draws")
        return NextCard(None, f"{said}; Banker drew")
    return NextCard(None, f"{said}; Banker stands")
