"""The statistics the irregular-shoe detectors look at, each the longest run of some kind.

A shoe is handled as ``bytes``, one byte per card in dealt order (:func:`encode`: the card's
index in ``ALL_CARDS``), because the table keeps its recent shoes and compares every new shoe
with them: in this form a stretch of cards is a ``bytes`` slice, hashed and compared in C.
Every function returns a :class:`Run`: its length and where it starts (0-based index into
the shoe); an empty shoe gives a run of length 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from typing import TypeVar

from common.cards import ALL_CARDS, Card
from daemon.audit.factory_order import FACTORY_ORDER

T = TypeVar("T")

_CODE_OF_CARD = {card: i for i, card in enumerate(ALL_CARDS)}
_RANK_OF_CODE = bytes(int(card.rank) for card in ALL_CARDS).ljust(256, b"\xff")
_SUIT_OF_CODE = bytes("cdhs".index(card.suit) for card in ALL_CARDS).ljust(256, b"\xff")
_FACTORY_PLACE_OF_CODE = bytes(FACTORY_ORDER.index(card) for card in ALL_CARDS).ljust(256, b"\xff")
# the place the next (previous) card in factory order has; 0xFF past either end of the order
_FACTORY_NEXT_PLACE_OF_CODE = bytes(
    FACTORY_ORDER.index(card) + 1 if card != FACTORY_ORDER[-1] else 0xFF for card in ALL_CARDS
).ljust(256, b"\xfe")
_FACTORY_PREVIOUS_PLACE_OF_CODE = bytes(
    FACTORY_ORDER.index(card) - 1 if card != FACTORY_ORDER[0] else 0xFF for card in ALL_CARDS
).ljust(256, b"\xfe")


def encode(cards: Sequence[Card]) -> bytes:
    """The shoe as one byte per card (the card's index in ``ALL_CARDS``)."""
    return bytes([_CODE_OF_CARD[c] for c in cards])


_BYTE_OF_CODE = {card.code: i for i, card in enumerate(ALL_CARDS)}


def encode_codes(codes: Iterable[str]) -> bytes:
    """:func:`encode` of cards given by their two-character codes ("8s"), as events carry them."""
    return bytes([_BYTE_OF_CODE[c] for c in codes])


_FACTORY_BOTH_WAYS = (encode(FACTORY_ORDER), encode(FACTORY_ORDER[::-1]))


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


@lru_cache(maxsize=64)
def _equal_run_pattern(length: int) -> re.Pattern[bytes]:
    return re.compile(rb"(.)\1{%d}" % (length - 1), re.DOTALL)


def reaches_equal_run(keys: bytes, length: int) -> bool:
    """Whether some stretch of ``length`` equal bytes exists (a regular-expression search in C)."""
    if length <= 1:
        return len(keys) >= length
    return _equal_run_pattern(length).search(keys) is not None


def ranks_of(codes: bytes) -> bytes:
    """Each card's rank (1-13), one byte per card."""
    return codes.translate(_RANK_OF_CODE)


def suits_of(codes: bytes) -> bytes:
    """Each card's suit (0-3), one byte per card."""
    return codes.translate(_SUIT_OF_CODE)


def longest_same_rank(codes: bytes) -> Run:
    """The longest stretch of cards of one rank."""
    return longest_equal_run(ranks_of(codes))


def longest_same_suit(codes: bytes) -> Run:
    """The longest stretch of cards of one suit."""
    return longest_equal_run(suits_of(codes))


def reaches_factory_run(codes: bytes, length: int) -> bool:
    """Whether some stretch of ``length`` cards runs in factory order, forwards or backwards.

    Each card is mapped to its place in the order, and to the place its successor (or
    predecessor) would have; the two byte strings are XORed as integers (in C), so a link
    between neighbours is a zero byte and a run of ``length`` cards is ``length - 1`` zeros.
    """
    if length <= 1:
        return len(codes) >= length
    if len(codes) < length:
        return False
    places = codes.translate(_FACTORY_PLACE_OF_CODE)[1:]
    needle = b"\x00" * (length - 1)
    for neighbour in (_FACTORY_NEXT_PLACE_OF_CODE, _FACTORY_PREVIOUS_PLACE_OF_CODE):
        expected = codes.translate(neighbour)[:-1]
        links = (int.from_bytes(places) ^ int.from_bytes(expected)).to_bytes(len(places))
        if needle in links:
            return True
    return False


def longest_factory_run(codes: bytes) -> Run:
    """The longest stretch in which each card follows the one before in factory order.

    Forward (each card the successor of the one before) or backward (each its predecessor).
    Such a stretch is exactly a stretch of the factory order itself, or of the order
    reversed, so this is :func:`longest_repeated_run` against those two sequences.
    """
    if not codes:
        return Run(0, 0)
    found = longest_repeated_run(codes, _FACTORY_BOTH_WAYS, k=1)
    return Run(0, 0) if found is None else Run(found.length, found.start)


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

    A common stretch of ``k`` cards contains, in the earlier shoe, a window of
    ``w = ceil(k / 2)`` cards starting at a multiple of ``k - w + 1``, and that window is also
    one of this shoe's. So this shoe's windows and the earlier shoes' sampled windows are
    intersected (in C), and only the few windows in both are grown both ways, wherever they
    occur, as far as the two shoes agree. None when no stretch of ``k`` cards repeats.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    w = (k + 1) // 2
    step = k - w + 1
    mine = {codes[i : i + w] for i in range(len(codes) - w + 1)}
    best: RepeatedRun | None = None
    for h, earlier in enumerate(history):
        sampled = [earlier[j : j + w] for j in range(0, len(earlier) - w + 1, step)]
        for window in sorted(mine.intersection(sampled)):
            for j in _places(earlier, window):
                for i in _places(codes, window):
                    back = _agree_backward(codes, earlier, i, j)
                    length = back + _agree_forward(codes, earlier, i, j)
                    if length >= k and (best is None or length > best.length):
                        best = RepeatedRun(length, i - back, h, j - back)
    return best


def _places(haystack: bytes, needle: bytes) -> list[int]:
    found = []
    at = haystack.find(needle)
    while at >= 0:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def _agree_forward(codes: bytes, earlier: bytes, i: int, j: int) -> int:
    n = 0
    while i + n < len(codes) and j + n < len(earlier) and codes[i + n] == earlier[j + n]:
        n += 1
    return n


def _agree_backward(codes: bytes, earlier: bytes, i: int, j: int) -> int:
    n = 0
    while i - n - 1 >= 0 and j - n - 1 >= 0 and codes[i - n - 1] == earlier[j - n - 1]:
        n += 1
    return n
