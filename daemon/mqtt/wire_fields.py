"""Field types shared by the signed messages the table receives (commands, server acks).

Each is a pydantic ``Annotated`` type, so a model states the rule once in its field's type
and every message refuses the same bad input with the same words.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def _finite_seconds(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("must be a finite number (seconds since the Unix epoch)")
    return float(value)


def integral(value: Any) -> Any:
    """An integral JSON number as the integer it is (``37.0`` is 37: JSON has one number type
    and some servers' libraries write every number as a double); anything else unchanged, for
    the field's own check to refuse."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def _hmac_hex(value: str) -> str:
    if not _HEX64.match(value):
        raise ValueError("must be 64 hex digits (HMAC-SHA256)")
    return value


EpochSeconds = Annotated[float, BeforeValidator(_finite_seconds)]
"""Seconds since the Unix epoch: a finite JSON number (not a boolean, NaN or infinity)."""

HmacSignature = Annotated[str, AfterValidator(_hmac_hex)]
"""An HMAC-SHA256 signature: 64 hex digits."""
