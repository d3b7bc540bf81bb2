"""Round progression and outcome: which slot is dealt next, and what a finished round is.

Draw order is Player 1, Banker 1, Player 2, Banker 2 (seed 003), then Player 3 if
the Player draws, then Banker 3 if the Banker draws. A round is decided the
moment no further card is required.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from common.cards import Card, hand_total
from common.slots import OPENING_SLOTS, Slot
from daemon.rules.tableau import banker_draws, player_draws


class Side(Enum):
    PLAYER = "player"
    BANKER = "banker"


class Winner(Enum):
    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"


_OPENING = OPENING_SLOTS


def next_slot(player: Sequence[Card], banker: Sequence[Card]) -> Slot | None:
    """The slot the next card goes to, or None when the round is decided.

    ``player`` and ``banker`` are the cards already dealt to each side, in order;
    they must be a legal prefix of a round (raises ValueError otherwise).
    """
    dealt = len(player) + len(banker)
    if dealt < 4:
        expected = _OPENING[dealt]
        if len(player) != (dealt + 1) // 2 or len(banker) != dealt // 2:
            raise ValueError(f"cards {len(player)}P/{len(banker)}B are not a legal deal prefix")
        return expected
    if len(player) not in (2, 3) or len(banker) not in (2, 3):
        raise ValueError(f"cards {len(player)}P/{len(banker)}B are not a legal round")
    p2, b2 = hand_total(player[:2]), hand_total(banker[:2])
    p_draws = player_draws(p2, b2)
    if len(player) == 2 and p_draws:
        if len(banker) != 2:
            raise ValueError("Banker cannot have a third card before the Player's third card")
        return Slot.P3
    if len(player) == 3 and not p_draws:
        raise ValueError("Player has a third card the tableau did not allow")
    third = player[2].points if len(player) == 3 else None
    b_draws = banker_draws(p2, b2, third)
    if len(banker) == 2 and b_draws:
        return Slot.B3
    if len(banker) == 3 and not b_draws:
        raise ValueError("Banker has a third card the tableau did not allow")
    return None


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """A finished round: the cards of each side in deal order and everything bets look at."""

    player: tuple[Card, ...]
    banker: tuple[Card, ...]

    @property
    def player_total(self) -> int:
        return hand_total(self.player)

    @property
    def banker_total(self) -> int:
        return hand_total(self.banker)

    @property
    def winner(self) -> Winner:
        p, b = self.player_total, self.banker_total
        return Winner.PLAYER if p > b else Winner.BANKER if b > p else Winner.TIE

    @property
    def winning_total(self) -> int:
        """The winner's total (on a tie, the tied total)."""
        return max(self.player_total, self.banker_total)

    @property
    def margin(self) -> int:
        return abs(self.player_total - self.banker_total)

    @property
    def player_natural(self) -> bool:
        return hand_total(self.player[:2]) >= 8

    @property
    def banker_natural(self) -> bool:
        return hand_total(self.banker[:2]) >= 8

    @property
    def natural(self) -> bool:
        return self.player_natural or self.banker_natural

    @property
    def card_count(self) -> int:
        return len(self.player) + len(self.banker)

    @property
    def player_pair(self) -> bool:
        return self.player[0].rank == self.player[1].rank

    @property
    def banker_pair(self) -> bool:
        return self.banker[0].rank == self.banker[1].rank

    @property
    def player_suited_pair(self) -> bool:
        return self.player[0] == self.player[1]

    @property
    def banker_suited_pair(self) -> bool:
        return self.banker[0] == self.banker[1]

    @property
    def identical_pairs(self) -> bool:
        """Both sides hold a pair and the two pairs are the same cards (rank and suit).

        Tiger Pair's top tier: e.g. Player 9♣ 9♥ and Banker 9♥ 9♣ (seeds 000, 004).
        """
        return (
            self.player_pair
            and self.banker_pair
            and sorted(c.code for c in self.player[:2]) == sorted(c.code for c in self.banker[:2])
        )

    @property
    def facts(self) -> RoundFacts:
        """Everything a bet can look at, without the cards themselves."""
        return RoundFacts(
            player_total=self.player_total,
            banker_total=self.banker_total,
            player_cards=len(self.player),
            banker_cards=len(self.banker),
            player_pair=self.player_pair,
            banker_pair=self.banker_pair,
            player_suited_pair=self.player_suited_pair,
            banker_suited_pair=self.banker_suited_pair,
            identical_pairs=self.identical_pairs,
            first_card_comparison=self.first_card_comparison,
        )

    @property
    def first_card_comparison(self) -> int:
        """Sign of (Banker first rank - Player first rank), ranks A..K = 1..13.

        +1 is a Dragon (Banker) win, -1 a Tiger (Player) win, 0 a tie.
        """
        d = int(self.banker[0].rank) - int(self.player[0].rank)
        return (d > 0) - (d < 0)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description of the outcome (used in round events)."""
        return {
            "player": [c.code for c in self.player],
            "banker": [c.code for c in self.banker],
            "player_total": self.player_total,
            "banker_total": self.banker_total,
            "winner": self.winner.value,
            "margin": self.margin,
            "player_natural": self.player_natural,
            "banker_natural": self.banker_natural,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
            "player_suited_pair": self.player_suited_pair,
            "banker_suited_pair": self.banker_suited_pair,
            "cards": self.card_count,
            "first_card": {1: "dragon", -1: "tiger", 0: "tie"}[self.first_card_comparison],
        }


@dataclass(frozen=True, slots=True)
class RoundFacts:
    """The facts of a finished round that bets depend on; hashable, so outcomes can be counted.

    Every bet in the catalogue resolves from these fields alone, which is what lets
    the exact enumeration price every bet: it counts rounds per distinct RoundFacts.
    A side's two-card natural is implied: a side that kept two cards and totals 8 or 9
    had a natural (a non-natural two-card hand only stands on 6 or 7, or the Banker on
    3-7 after a Player draw, never on 8-9).
    """

    player_total: int
    banker_total: int
    player_cards: int
    banker_cards: int
    player_pair: bool
    banker_pair: bool
    player_suited_pair: bool
    banker_suited_pair: bool
    identical_pairs: bool
    first_card_comparison: int

    @property
    def winner(self) -> Winner:
        p, b = self.player_total, self.banker_total
        return Winner.PLAYER if p > b else Winner.BANKER if b > p else Winner.TIE

    @property
    def winning_total(self) -> int:
        """The winner's total (on a tie, the tied total)."""
        return max(self.player_total, self.banker_total)

    @property
    def margin(self) -> int:
        return abs(self.player_total - self.banker_total)

    @property
    def player_natural(self) -> bool:
        return self.player_cards == 2 and self.player_total >= 8

    @property
    def banker_natural(self) -> bool:
        return self.banker_cards == 2 and self.banker_total >= 8

    @property
    def natural(self) -> bool:
        return self.player_natural or self.banker_natural

    @property
    def card_count(self) -> int:
        return self.player_cards + self.banker_cards

    def total_of(self, side: Side) -> int:
        return self.player_total if side is Side.PLAYER else self.banker_total

    def natural_of(self, side: Side) -> bool:
        return self.player_natural if side is Side.PLAYER else self.banker_natural

    def pair_of(self, side: Side) -> bool:
        return self.player_pair if side is Side.PLAYER else self.banker_pair

    def won_by(self, side: Side) -> bool:
        return self.winner.value == side.value


def play_round(cards: Iterable[Card]) -> tuple[RoundOutcome, int]:
    """Deal a round from ``cards`` in shoe order; return the outcome and how many cards it used.

    Raises ValueError if ``cards`` runs out before the round is decided.
    """
    player: list[Card] = []
    banker: list[Card] = []
    it = iter(cards)
    while (slot := next_slot(player, banker)) is not None:
        try:
            card = next(it)
        except StopIteration:
            raise ValueError(f"ran out of cards before slot {slot.value}") from None
        (player if slot.is_player else banker).append(card)
    return RoundOutcome(tuple(player), tuple(banker)), len(player) + len(banker)
