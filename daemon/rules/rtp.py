"""Exact odds of every bet of a variant: P(win/push/lose), expected return, house edge, RTP.

Each bet is resolved once per distinct round class of the exact enumeration
(:mod:`daemon.rules.enumerate`), weighted by how many 6-card sequences produce it,
so the figures are exact fractions, not samples.

Conventions:

* Expected return is the net result per unit staked (``Resolution.multiplier``
  averaged); house edge is its negative; RTP = 1 + expected return. For Cow Cow a
  losing bet can lose up to 9 units; the figures stay per unit staked.
* A Dragon/Tiger bet on a first-card tie counts as a loss (of half the stake).
* Super-round payouts (Super 98, seed 002): the die is thrown after betting closes and
  is independent of the cards; each face is taken as equally likely, so with a
  12-sided die and super faces 8 and 9 a round is super with probability 1/6 and the
  bet's figures are ``5/6 * normal + 1/6 * super``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from daemon.rules.enumerate import Enumeration
from daemon.rules.resolution import Resolution, fraction_text
from daemon.rules.variants import Variant


def _figure(value: Fraction, percent: bool = True) -> dict[str, object]:
    figure: dict[str, object] = {"fraction": fraction_text(value), "float": float(value)}
    if percent:
        figure["percent"] = float(value * 100)
    return figure


@dataclass(frozen=True)
class BetOdds:
    """Exact odds of one bet."""

    name: str
    kind: str
    max_hand: int | None
    p_win: Fraction
    p_push: Fraction
    p_lose: Fraction
    expected_return: Fraction

    @property
    def house_edge(self) -> Fraction:
        return -self.expected_return

    @property
    def rtp(self) -> Fraction:
        """Return to player: 1 + expected return per unit staked."""
        return 1 + self.expected_return

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "max_hand": self.max_hand,
            "p_win": _figure(self.p_win),
            "p_push": _figure(self.p_push),
            "p_lose": _figure(self.p_lose),
            "expected_return": _figure(self.expected_return),
            "house_edge": _figure(self.house_edge),
            "rtp": _figure(self.rtp),
        }


@dataclass(frozen=True)
class _Tally:
    win: Fraction
    push: Fraction
    lose: Fraction
    expected: Fraction


def _tally(by_resolution: Counter[Resolution], total: int) -> _Tally:
    win = push = lose = expected = Fraction(0)
    for resolution, n in by_resolution.items():
        share = Fraction(n, total)
        expected += share * resolution.multiplier
        if resolution.outcome == "win":
            win += share
        elif resolution.outcome == "push":
            push += share
        else:
            lose += share
    return _Tally(win, push, lose, expected)


def variant_odds(variant: Variant, enumeration: Enumeration) -> list[BetOdds]:
    """Exact odds of every bet of ``variant`` over the enumerated shoe, in file order."""
    rounds = list(enumeration.items())
    odds: list[BetOdds] = []
    for bet in variant.bets:
        normal: Counter[Resolution] = Counter()
        for facts, n in rounds:
            normal[bet.resolve(facts, False)] += n
        tally = _tally(normal, enumeration.total)
        if bet.uses_super_round and variant.super_round is not None:
            boosted: Counter[Resolution] = Counter()
            for facts, n in rounds:
                boosted[bet.resolve(facts, True)] += n
            q = variant.super_round.probability
            s = _tally(boosted, enumeration.total)
            tally = _Tally(
                (1 - q) * tally.win + q * s.win,
                (1 - q) * tally.push + q * s.push,
                (1 - q) * tally.lose + q * s.lose,
                (1 - q) * tally.expected + q * s.expected,
            )
        odds.append(
            BetOdds(bet.name, bet.kind, bet.max_hand, tally.win, tally.push, tally.lose, tally.expected)
        )
    return odds
