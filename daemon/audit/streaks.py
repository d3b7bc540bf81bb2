"""The statistics the irregular-shoe detectors look at, each the longest run of some kind.

A shoe is handled as ``bytes``, one byte per card in dealt order (:func:`encode`: the card's
index in ``ALL_CARDS``), because the table keeps its recent shoes and compares every new shoe
with them: in this form a stretch of cards is a ``bytes`` slice, hashed and compared in C.
Every function returns a :class:`Run`: its length and where it starts (0-based index into
the shoe); an empty shoe gives a run of length 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TypeVar

from common.cards import ALL_CARDS, Card
from daemon.audit.factory_order import FACTORY_ORDER

T = TypeVar("T")

_CODE_OF_CARD = {card: i for i, card in enumerate(ALL_CARDS)}
_RANK_OF_CODE = bytes(int(card.rank) for card in ALL_CARDS).ljust(256, b"\xff")
_SUIT_OF_CODE = bytes("cdhs".index(card.suit) for card in ALL_CARDS).ljust(256, b"\xff")
_FACTORY_PLACE_OF_CODE = bytes(FACTORY_ORDER.index(card) for card in ALL_CARDS).ljust(256, b"\xff")


def encode(cards: Sequence[Card]) -> bytes:
    """The shoe as one byte per card (the card's index in ``ALL_CARDS``)."""
    return bytes([_CODE_OF_CARD[c] for c in cards])


def decode(codes: bytes) -> tuple[Card, ...]:
    """The cards back from :func:`encode`'s bytes; ValueError names a byte that is no card."""
    bad = next((b for b in codes if b >= len(ALL_CARDS)), None)
    if bad is not None:
        raise ValueError(f"byte {bad} is not a card code (0-{len(ALL_CARDS) - 1})")
    return tuple(ALL_CARDS[b] for b in codes)


@dataclass(frozen=True, slots=True)
class Run:
    """The longest run found: ``length`` items starting at index ``start``."""

    length: int
    start: int

    @property
    def stop(self) -> int:
        """One past the run's last index."""
        return self.start + self.length


def longest_run(
    items: Sequence[T], *, linked: Callable[[T, T], bool], counts: Callable[[T], bool] = lambda _: True
) -> Run:
    """The longest stretch in which each item is ``linked`` to the one before (first wins ties).

    Only items that ``counts`` accepts start a run; with none, the run has length 0.
    """
    best = Run(0, 0)
    start: int | None = None
    for i, item in enumerate(items):
        if start is not None and linked(items[i - 1], item):
            pass
        elif counts(item):
            start = i
        else:
            start = None
            continue
        if i - start + 1 > best.length:
            best = Run(i - start + 1, start)
    return best


def longest_equal_run(keys: bytes) -> Run:
    """The longest stretch of equal bytes (first wins ties)."""
    best = Run(0, 0)
    at = 0
    for _, group in groupby(keys):
        length = sum(1 for _ in group)
        if length > best.length:
            best = Run(length, at)
        at += length
    return best


def longest_same_rank(codes: bytes) -> Run:
    """The longest stretch of cards of one rank."""
    return longest_equal_run(codes.translate(_RANK_OF_CODE))


def longest_same_suit(codes: bytes) -> Run:
    """The longest stretch of cards of one suit."""
    return longest_equal_run(codes.translate(_SUIT_OF_CODE))


def longest_factory_run(codes: bytes) -> Run:
    """The longest stretch in which each card follows the one before in factory order.

    Forward (each card the successor of the one before) or backward (each its predecessor);
    the longer of the two is returned (forward on a tie).
    """
    places = codes.translate(_FACTORY_PLACE_OF_CODE)
    forward = longest_run(places, linked=lambda a, b: b == a + 1)
    backward = longest_run(places, linked=lambda a, b: b == a - 1)
    return backward if backward.length > forward.length else forward


@dataclass(frozen=True, slots=True)
class RepeatedRun:
    """A stretch of ``length`` cards at ``start`` in this shoe, dealt the same earlier.

    ``earlier_shoe`` indexes the history given (0 = the oldest), ``earlier_start`` is where
    the same cards start in that shoe.
    """

    length: int
    start: int
    earlier_shoe: int
    earlier_start: int


def longest_repeated_run(codes: bytes, history: Sequence[bytes], *, k: int) -> RepeatedRun | None:
    """The longest stretch of at least ``k`` cards that also appears, in order, in an earlier shoe.

    Every ``k``-card window of the history is indexed once; each window of this shoe that
    hits is grown as far as both shoes agree. None when no ``k``-card window repeats.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    index: dict[bytes, list[tuple[int, int]]] = {}
    for h, earlier in enumerate(history):
        for j in range(len(earlier) - k + 1):
            index.setdefault(earlier[j : j + k], []).append((h, j))
    best: RepeatedRun | None = None
    for i in range(len(codes) - k + 1):
        for h, j in index.get(codes[i : i + k], ()):
            length = _grow(codes, history[h], i, j, k)
            if best is None or length > best.length:
                best = RepeatedRun(length, i, h, j)
    return best


def _grow(codes: bytes, earlier: bytes, i: int, j: int, k: int) -> int:
    length = k
    while i + length < len(codes) and j + length < len(earlier) and codes[i + length] == earlier[j + length]:
        length += 1
    return length
