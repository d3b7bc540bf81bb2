"""Playing cards with their full identity (rank and suit) and baccarat point values.

Canonical text form is two characters, rank then suit: ``A 2-9 T J Q K`` and
``c d h s`` (``"8s"`` is the eight of spades, ``"Th"`` the ten of hearts). The
parser also accepts ``10`` for ten and upper-case suits, and rejects anything
else with a message naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from functools import cache


class Rank(IntEnum):
    """Card rank; the value is the rank order A..K = 1..13 used by first-card bets."""

    ACE = 1
    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13

    @property
    def points(self) -> int:
        """Baccarat point value: A = 1, 2-9 face value, 10/J/Q/K = 0."""
        return self.value if self.value < 10 else 0

    @property
    def symbol(self) -> str:
        return _SYMBOL_OF_RANK[self]


class Suit(StrEnum):
    """Card suit; each member is its one-letter code, used in text and file names."""

    CLUBS = "c"
    DIAMONDS = "d"
    HEARTS = "h"
    SPADES = "s"

    @property
    def symbol(self) -> str:
        return self.value


_RANK_SYMBOLS = "A23456789TJQK"
_RANK_BY_SYMBOL = {s: Rank(i + 1) for i, s in enumerate(_RANK_SYMBOLS)}
_SYMBOL_OF_RANK = {rank: symbol for symbol, rank in _RANK_BY_SYMBOL.items()}
_SUIT_BY_SYMBOL = {s.value: s for s in Suit}


class CardParseError(ValueError):
    """Raised when a text does not name a card."""


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """One playing card. Equality is exact identity (rank and suit)."""

    rank: Rank
    suit: Suit

    @property
    def points(self) -> int:
        return self.rank.points

    @property
    def code(self) -> str:
        """Canonical two-character code, e.g. ``"8s"``."""
        return _SYMBOL_OF_RANK[self.rank] + self.suit  # (not ``rank.symbol``: one call less per read)

    def __str__(self) -> str:
        return self.code

    @staticmethod
    def parse(text: str) -> Card:
        """Parse ``"8s"``, ``"Th"``, ``"10h"``, ``"QD"``; raise CardParseError otherwise."""
        return _parse(text)


@cache
def _parse(text: str) -> Card:
    if not isinstance(text, str):
        raise CardParseError(f"card code must be a string, got {type(text).__name__}")
    raw = text.strip()
    if len(raw) < 2:
        raise CardParseError(f"card code {text!r} is too short: expected rank then suit, e.g. '8s'")
    rank_part, suit_part = raw[:-1].upper(), raw[-1].lower()
    if rank_part == "10":
        rank_part = "T"
    rank = _RANK_BY_SYMBOL.get(rank_part)
    if rank is None:
        raise CardParseError(f"card code {text!r}: unknown rank {raw[:-1]!r} (expected A 2-9 T J Q K)")
    suit = _SUIT_BY_SYMBOL.get(suit_part)
    if suit is None:
        raise CardParseError(f"card code {text!r}: unknown suit {raw[-1]!r} (expected c d h s)")
    return Card(rank, suit)


ALL_CARDS: tuple[Card, ...] = tuple(Card(r, s) for s in Suit for r in Rank)
"""The 52 distinct cards of one deck."""


def hand_total(cards: Sequence[Card]) -> int:
    """Baccarat total of a hand: the sum of point values modulo 10."""
    return sum(c.points for c in cards) % 10
