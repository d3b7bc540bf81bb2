"""Slow, independent counters used to cross-check the fast enumeration.

They share nothing with ``daemon.rules.enumerate``: one plays every permutation of a
small shoe through ``play_round``; the other walks point values with the third-card
rule written out again from RULES.md and multiplies by the falling factorial of the
cards a round leaves unused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import permutations
from math import perm

from common.cards import Card
from daemon.rules.outcome import RoundFacts, play_round

# RULES.md, again: Banker total -> Player third-card values on which the Banker draws.
_BANKER_DRAWS = {0: set(range(10)), 1: set(range(10)), 2: set(range(10))}
_BANKER_DRAWS |= {3: set(range(10)) - {8}, 4: set(range(2, 8)), 5: set(range(4, 8)), 6: {6, 7}, 7: set()}


def brute_force_joint(shoe: dict[Card, int]) -> Counter[RoundFacts]:
    """Every ordered choice of 6 physical cards, played one by one."""
    cards = [card for card, n in shoe.items() for _ in range(n)]
    joint: Counter[RoundFacts] = Counter()
    for sequence in permutations(cards, 6):
        outcome, _ = play_round(sequence)
        joint[outcome.facts] += 1
    return joint


def point_counts(point_copies: list[int]) -> Counter[tuple[int, int, int, int]]:
    """Sequences by (player total, banker total, player cards, banker cards), from point counts."""
    size = sum(point_copies)
    result: Counter[tuple[int, int, int, int]] = Counter()
    left = list(point_copies)

    def take(value: int) -> int:
        ways = left[value]
        left[value] -= 1
        return ways

    def finish(key: tuple[int, int, int, int], used: int, ways: int) -> None:
        result[key] += ways * perm(size - used, 6 - used)

    for v1 in range(10):
        w1 = take(v1)
        for v2 in range(10):
            w2 = w1 * take(v2)
            for v3 in range(10):
                w3 = w2 * take(v3)
                for v4 in range(10):
                    w4 = w3 * take(v4)
                    if w4 > 0:
                        _after_four(v1, v2, v3, v4, w4, take, left, finish)
                    left[v4] += 1
                left[v3] += 1
            left[v2] += 1
        left[v1] += 1
    return result


def _after_four(
    v1: int,
    v2: int,
    v3: int,
    v4: int,
    ways: int,
    take: Callable[[int], int],
    left: list[int],
    finish: Callable[[tuple[int, int, int, int], int, int], None],
) -> None:
    p, b = (v1 + v3) % 10, (v2 + v4) % 10
    if p >= 8 or b >= 8:
        finish((p, b, 2, 2), 4, ways)
        return
    if p >= 6:
        if b >= 6:
            finish((p, b, 2, 2), 4, ways)
            return
        for v6 in range(10):
            w = ways * take(v6)
            if w:
                finish((p, (b + v6) % 10, 2, 3), 5, w)
            left[v6] += 1
        return
    for v5 in range(10):
        w5 = ways * take(v5)
        if w5:
            p3 = (p + v5) % 10
            if v5 in _BANKER_DRAWS[b]:
                for v6 in range(10):
                    w6 = w5 * take(v6)
                    if w6:
                        finish((p3, (b + v6) % 10, 3, 3), 6, w6)
                    left[v6] += 1
            else:
                finish((p3, b, 3, 2), 5, w5)
        left[v5] += 1
