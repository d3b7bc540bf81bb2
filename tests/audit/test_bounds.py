"""The exact bounds of the cross-shoe detectors: arithmetic by hand, and never below the truth."""

from __future__ import annotations

import math
import random
from itertools import pairwise

from common.cards import ALL_CARDS
from daemon.audit.bounds import factory_bound, slug_bound, smallest_length
from daemon.audit.streaks import encode, longest_factory_run, longest_repeated_run


def test_factory_bound_arithmetic() -> None:
    # 2 directions x 414 starting places x (8/415)(8/414)
    expected = 2 * 414 * (8 / 415) * (8 / 414)
    assert math.isclose(factory_bound(decks=8, dealt=416, length=3), expected)


def test_slug_bound_arithmetic() -> None:
    expected = (100 - 4) * ((50 - 4) + (60 - 4)) * (8 / 416) * (8 / 415) * (8 / 414) * (8 / 413) * (8 / 412)
    assert math.isclose(slug_bound(decks=8, dealt=100, history_lengths=[50, 60], length=5), expected)


def test_bounds_fall_with_length_and_are_capped_at_one() -> None:
    values = [factory_bound(decks=6, dealt=312, length=n) for n in range(1, 10)]
    assert values[0] == 1.0
    assert all(a >= b for a, b in pairwise(values))
    assert smallest_length(lambda n: 1 / n, 0.25, longest=10) == 4
    assert smallest_length(lambda n: 1.0, 0.25, longest=10) == 11


def test_factory_bound_is_not_below_a_simulated_rate() -> None:
    """One deck, runs of 3: the bound (0.038) must cover the rate seen over 20,000 shuffles."""
    rng = random.Random(7)
    deck = list(ALL_CARDS)
    shoes = 20_000
    hits = 0
    for _ in range(shoes):
        rng.shuffle(deck)
        hits += longest_factory_run(encode(deck)).length >= 3
    rate = hits / shoes
    assert rate > 0.02  # the event is common enough here to compare
    assert factory_bound(decks=1, dealt=52, length=3) >= rate


def test_slug_bound_is_not_below_a_simulated_rate() -> None:
    """One deck against one earlier deck, runs of 2."""
    rng = random.Random(11)
    earlier = list(ALL_CARDS)
    rng.shuffle(earlier)
    deck = list(ALL_CARDS)
    shoes = 5_000
    hits = 0
    for _ in range(shoes):
        rng.shuffle(deck)
        hits += longest_repeated_run(encode(deck), [encode(earlier)], k=2) is not None
    rate = hits / shoes
    assert rate > 0.2
    assert slug_bound(decks=1, dealt=52, history_lengths=[52], length=2) >= rate
