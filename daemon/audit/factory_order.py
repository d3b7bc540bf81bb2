"""A fresh deck's factory order, and the card that follows each card in it.

A deck straight from its box is not shuffled: casino and retail decks come in "new deck
order". The order this module uses is the common one: Ace to King of spades, Ace to King of
diamonds, King to Ace of clubs, King to Ace of hearts. A deck dropped into the shoe
unshuffled deals runs of cards each the factory successor of the one before; a deck turned
over deals them in reverse, so the detector looks in both directions.
"""

from __future__ import annotations

from itertools import pairwise

from common.cards import Card, Rank, Suit

_ACE_TO_KING = tuple(Rank)
_KING_TO_ACE = tuple(reversed(_ACE_TO_KING))

FACTORY_ORDER: tuple[Card, ...] = (
    tuple(Card(r, Suit.SPADES) for r in _ACE_TO_KING)
    + tuple(Card(r, Suit.DIAMONDS) for r in _ACE_TO_KING)
    + tuple(Card(r, Suit.CLUBS) for r in _KING_TO_ACE)
    + tuple(Card(r, Suit.HEARTS) for r in _KING_TO_ACE)
)
"""The 52 cards of a new deck, top to bottom."""

NEXT_IN_FACTORY_ORDER: dict[Card, Card] = dict(pairwise(FACTORY_ORDER))
"""Each card's successor in a new deck (the last card has none)."""

PREVIOUS_IN_FACTORY_ORDER: dict[Card, Card] = {
    after: before for before, after in NEXT_IN_FACTORY_ORDER.items()
}
"""Each card's predecessor in a new deck (the first card has none)."""
