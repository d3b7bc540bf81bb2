"""One round's state (its cards by slot and what keeps it from completing) and the card
tables it is read with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.cards import ALL_CARDS, Card
from common.slots import BANKER_SLOTS, OPENING_SLOTS, PLAYER_SLOTS, Slot
from daemon.engine.commands import round_id_parts
from daemon.engine.payloads import LooseCard, ResultLine
from daemon.rules.tableau import banker_draws, player_draws

_OPENING = OPENING_SLOTS
_P1, _P2, _P3, _B1, _B2, _B3 = Slot.P1, Slot.P2, Slot.P3, Slot.B1, Slot.B2, Slot.B3
_POINTS = {card.code: card.points for card in ALL_CARDS}
# The tableau of daemon.rules.tableau, tabulated once for every case (index 10: no third card).
_PLAYER_DRAWS = [[player_draws(p, b) for b in range(10)] for p in range(10)]
_BANKER_DRAWS = [
    [[banker_draws(p, b, t if t < 10 else None) for t in range(11)] for b in range(10)] for p in range(10)
]


def result_line(hand: int, outcome: dict[str, Any]) -> ResultLine:
    """A completed round as the shoe's history keeps it (bead plate, big road, pair marks):
    ``totals``, ``pairs`` and ``naturals`` are ``[player, banker]``."""
    return {
        "hand": hand,
        "winner": outcome["winner"],
        "totals": [outcome["player_total"], outcome["banker_total"]],
        "pairs": [outcome["player_pair"], outcome["banker_pair"]],
        "naturals": [outcome["player_natural"], outcome["banker_natural"]],
    }


def side_codes(cards: dict[str, str]) -> tuple[list[str], list[str]]:
    """The Player's and the Banker's card codes of a round's ``cards`` by slot, in deal order."""
    return [cards[s] for s in PLAYER_SLOTS if s in cards], [cards[s] for s in BANKER_SLOTS if s in cards]


def find_loose(
    loose: list[LooseCard], code: str, place: str, hand: int, *, oldest_hand: int | None = None
) -> int | None:
    """Where the first counted card ``code`` in no round (at ``place``) that a correction of round
    ``hand`` may move is in ``loose``: drawn while round ``hand - 1`` or ``hand`` was the last one
    opened (just before the round, or after it was decided; ``oldest_hand`` may raise that lower
    bound); None if there is none."""
    lowest = hand - 1 if oldest_hand is None else max(hand - 1, oldest_hand)
    for index, entry in enumerate(loose):
        if entry["card"] == code and entry["place"] == place and lowest <= entry["hand"] <= hand:
            return index
    return None


def rounds_skipped(last_round_id: object, round_id: object) -> int:
    """How many server round ids lie between ``last_round_id`` and ``round_id`` (same prefix, a
    higher number): rounds dealt that the edge never saw. 0 when they cannot be compared."""
    if not isinstance(last_round_id, str) or not isinstance(round_id, str):
        return 0
    before, after = round_id_parts(last_round_id), round_id_parts(round_id)
    if before is None or after is None or before[0] != after[0]:
        return 0
    return max(0, after[1] - before[1] - 1)


def oldest_loose_hand(place: str, slot: str, hand: int) -> int | None:
    """The oldest round a loose card moved into slot ``slot`` of round ``hand`` may have been drawn
    in (:func:`find_loose`'s ``oldest_hand``; None: the default, the round before).

    An unneeded card burned after the previous round goes into this round only as its Player 1
    (dealing mistake 2: of two unneeded cards the second is the next round's Player 1, the first
    its burn); into any other slot only a card burned during this round moves (its real last card
    after a misread dealt on): another card of that code is a new one, counted."""
    return hand if place == "burn" and slot != Slot.P1 else None


@dataclass
class RoundState:
    """One round: its cards by slot (in deal order) and what keeps it from completing."""

    hand: int
    opened_at: float
    cards: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    holds: list[str] = field(default_factory=list)
    awaiting_verdict: bool = False
    die: int | None = None
    corrected: bool = False
    lost_before: int = 0
    """Rounds of the shoe dealt unseen before this one opened: its physical round number is
    ``hand + lost_before`` (side-bet hand limits, ``README.md`` "Hand numbers after lost rounds")."""

    @property
    def physical(self) -> int:
        """The round's number among the rounds physically dealt from the shoe."""
        return self.hand + self.lost_before

    def sides(self) -> tuple[tuple[Card, ...], tuple[Card, ...]]:
        """The Player's and the Banker's cards, in deal order."""
        cards = self.cards
        player = tuple(Card.parse(cards[s]) for s in PLAYER_SLOTS if s in cards)
        banker = tuple(Card.parse(cards[s]) for s in BANKER_SLOTS if s in cards)
        return player, banker

    def codes(self) -> tuple[list[str], list[str]]:
        """The Player's and the Banker's card codes, in deal order."""
        return side_codes(self.cards)

    def next_slot(self) -> Slot | None:
        """The slot the round needs next, or None when it is decided.

        The cards are a legal deal prefix by construction (placed in draw order, or a
        correction checked with ``daemon.rules.outcome.next_slot``), so point values and
        the tabulated tableau decide it.
        """
        cards = self.cards
        n = len(cards)
        if n < 4:
            return _OPENING[n]
        p = (_POINTS[cards[_P1]] + _POINTS[cards[_P2]]) % 10
        b = (_POINTS[cards[_B1]] + _POINTS[cards[_B2]]) % 10
        if _P3 not in cards and _PLAYER_DRAWS[p][b]:
            return _P3
        if _B3 in cards:
            return None
        third = _POINTS[cards[_P3]] if _P3 in cards else 10
        return _B3 if _BANKER_DRAWS[p][b][third] else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "hand": self.hand,
            "opened_at": self.opened_at,
            "cards": dict(self.cards),
            "sources": dict(self.sources),
            "holds": list(self.holds),
            "awaiting_verdict": self.awaiting_verdict,
            "super_round_die": self.die,
            "corrected": self.corrected,
        }
