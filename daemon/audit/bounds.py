"""Exact upper bounds for the cross-shoe detectors (a slug repeated, a deck in factory order).

Both detectors look for a stretch of cards that one specific earlier sequence predicts, so
the chance under a fair shuffle has a closed-form bound. In a fair shoe of ``N`` cards made of
``d`` decks, whatever cards came before, the next card is any one given card with probability
at most ``d / (N - j)`` after ``j`` cards. So one given sequence of ``L`` cards appears at one
given position with probability at most ``prod(d / (N - j) for j < L)``, and the chance that
it appears anywhere is at most that times the number of (position, sequence) pairs tried
(the union bound). The bound is exact arithmetic, never below the true probability, and
tight when it is small, which is the only region a threshold uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def _sequence_bound(*, decks: int, shoe_cards: int, length: int, first_free: bool) -> float:
    """At most the chance that ``length`` cards at one position match one given sequence."""
    p = 1.0
    for j in range(1 if first_free else 0, length):
        p *= decks / (shoe_cards - j)
    return p


def slug_bound(*, decks: int, dealt: int, history_lengths: Sequence[int], length: int) -> float:
    """Upper bound on P(some ``length`` dealt cards repeat, in order, a stretch of an earlier shoe).

    ``dealt`` cards of this shoe are compared with earlier shoes of ``history_lengths`` cards.
    """
    windows_here = max(0, dealt - length + 1)
    windows_before = sum(max(0, m - length + 1) for m in history_lengths)
    shoe_cards = decks * 52
    pairs = windows_here * windows_before
    return min(
        1.0, pairs * _sequence_bound(decks=decks, shoe_cards=shoe_cards, length=length, first_free=False)
    )


def factory_bound(*, decks: int, dealt: int, length: int) -> float:
    """Upper bound on P(some ``length`` dealt cards run in factory order, forward or backward).

    The first card of the run is free; each of the next ``length - 1`` must be one given card.
    """
    starts = max(0, dealt - length + 1)
    shoe_cards = decks * 52
    return min(
        1.0, 2 * starts * _sequence_bound(decks=decks, shoe_cards=shoe_cards, length=length, first_free=True)
    )


def smallest_length(bound_of_length: Callable[[int], float], alpha: float, *, longest: int) -> int:
    """The shortest run length whose bound is at most ``alpha`` (``longest + 1`` if none is)."""
    for length in range(1, longest + 1):
        if bound_of_length(length) <= alpha:
            return length
    return longest + 1
