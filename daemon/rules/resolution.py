"""How a bet settles: win, lose or push, and the net return per unit staked, exact.

A :class:`Resolution` is the net return per unit staked: a Banker win at 5% commission
is ``win +19/20``, a Player bet on a tie is ``push 0``, a plain loss ``lose -1``, a Cow
Cow loss on a winning 9 ``lose -9``, a Dragon bet on a first-card tie ``lose -1/2``
(half the stake refunded).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

OutcomeWord = Literal["win", "lose", "push"]


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one bet settles: win / lose / push and the net return per unit staked."""

    outcome: OutcomeWord
    multiplier: Fraction

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form: the exact fraction as text (``"19/20"``) plus a float."""
        return {
            "outcome": self.outcome,
            "multiplier": fraction_text(self.multiplier),
            "multiplier_float": float(self.multiplier),
        }


def fraction_text(value: Fraction) -> str:
    """``"19/20"``, ``"-1/2"``, or ``"8"`` for a whole number."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


PUSH = Resolution("push", Fraction(0))
LOSE = Resolution("lose", Fraction(-1))


def win(payout: Fraction) -> Resolution:
    """A win paying ``payout`` to 1."""
    return Resolution("win", payout)
