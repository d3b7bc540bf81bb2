"""Suit colours and look-alike pairs, in the label numbers the templates use.

Suit labels are indexes into ``SUIT_ORDER`` (``"cdhs"``); face labels are indexes into
``ALL_CARDS``. Club/spade and diamond/heart are each other's *look-alike*: the same
colour, shapes a few pixels apart once blurred.
"""

from __future__ import annotations

from common.cards import ALL_CARDS, Card, Suit
from drivers.camera.templates import SUIT_ORDER

RED_SUITS = frozenset({Suit.DIAMONDS, Suit.HEARTS})
RED_LABELS = frozenset({SUIT_ORDER.index("d"), SUIT_ORDER.index("h")})
BLACK_LABELS = frozenset({SUIT_ORDER.index("c"), SUIT_ORDER.index("s")})
SAME_COLOUR = {
    SUIT_ORDER.index(a): SUIT_ORDER.index(b) for a, b in (("c", "s"), ("s", "c"), ("d", "h"), ("h", "d"))
}
"""Suit label → the label of its same-colour look-alike."""


def suit_index(card: Card) -> int:
    """The suit label of ``card``."""
    return SUIT_ORDER.index(card.suit.value)


def look_alike_label(label: int) -> int:
    """Index in ``ALL_CARDS`` of the same rank in the same-colour look-alike suit."""
    card = ALL_CARDS[label]
    return ALL_CARDS.index(Card(card.rank, Suit(SUIT_ORDER[SAME_COLOUR[suit_index(card)]])))
