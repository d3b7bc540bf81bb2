"""Payout figures read exactly: ``0.95``, ``"0.95"`` and ``"19/20"`` are all 19/20.

Payouts are "X to 1" figures (net win per unit staked) held as exact fractions; a YAML
number such as ``0.95`` is read through its decimal text, not its binary value.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Annotated

from pydantic import BeforeValidator

MAX_PAYOUT = 1_000_000
"""No bet pays more than a million to one; anything above is a typo, not a setting."""


def _parse_number(value: object) -> Fraction:
    """Read a figure exactly: int, decimal number or text (``0.95``), or ``"a/b"``."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, float):
        # The decimal the operator wrote (0.95), not the binary float nearest to it.
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"must be a number, got {type(value).__name__}")
    try:
        if "/" in text:
            numerator, _, denominator = text.partition("/")
            parts = (Decimal(numerator), Decimal(denominator))
        else:
            parts = (Decimal(text), Decimal(1))
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number or a fraction like '19/20'") from None
    for part in parts:
        # Finite and of sane size before any exact conversion (1e999999999 would eat memory).
        if not part.is_finite() or abs(part.adjusted()) > 12:
            raise ValueError(f"{value!r} is not a finite number of sensible size")
    if parts[1] == 0:
        raise ValueError(f"{value!r} divides by zero")
    return Fraction(parts[0]) / Fraction(parts[1])


def _parse_payout(value: object) -> Fraction:
    result = _parse_number(value)
    if not 0 < result <= MAX_PAYOUT:
        raise ValueError(f"a payout must be greater than 0 and at most {MAX_PAYOUT}, got {value}")
    return result


def _parse_fraction_0_1(value: object) -> Fraction:
    """A share between 0 and 1 inclusive (commission, refund)."""
    result = _parse_number(value)
    if not 0 <= result <= 1:
        raise ValueError(f"must be between 0 and 1, got {value}")
    return result


Payout = Annotated[Fraction, BeforeValidator(_parse_payout)]
"""A payout figure "X to 1": the net win per unit staked, exact and > 0."""

Share = Annotated[Fraction, BeforeValidator(_parse_fraction_0_1)]
"""A share of the stake between 0 and 1 (commission, refund), exact."""
