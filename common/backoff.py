"""Retry delays: exponential backoff with jitter, shared by every reconnect loop.

A broker restart or a power cut brings every table (and every reader of a table) back
at the same instant; fixed delays would make them all retry in step. Each delay here
grows by ``factor`` from ``initial`` up to ``maximum`` (the *ceiling*) and is drawn
uniformly from ``[ceiling * low, ceiling * high]``:

* ``low=0.5, high=1.0`` (the default) is "equal jitter": never more than the ceiling;
* :meth:`Backoff.symmetric` (``1 - jitter`` .. ``1 + jitter``) spreads around it.

The ceiling stops growing once it reaches ``maximum``, so a device that stays away
for days never overflows a float.
"""

from __future__ import annotations

import math
import random


class Backoff:
    """Successive retry delays; :meth:`reset` after a successful attempt."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        factor: float = 2.0,
        low: float = 0.5,
        high: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        for name, value in (("initial", initial), ("maximum", maximum), ("factor", factor)):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"backoff {name} must be a positive number, got {value!r}")
        if factor < 1:
            raise ValueError(f"backoff factor must be at least 1, got {factor!r}")
        if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
            raise ValueError(f"backoff jitter bounds need 0 <= low <= high, got {low!r}, {high!r}")
        self.initial = min(initial, maximum)  # a first delay above the cap is the cap
        self.maximum = maximum
        self.factor = factor
        self.low = low
        self.high = high
        self._rng = rng or random.Random()
        self._ceiling = self.initial

    @classmethod
    def symmetric(
        cls,
        initial: float,
        maximum: float,
        *,
        factor: float = 2.0,
        jitter: float = 0.25,
        rng: random.Random | None = None,
    ) -> Backoff:
        """Delays scaled by a random factor in ``[1 - jitter, 1 + jitter]`` (0 <= jitter <= 1)."""
        if not 0 <= jitter <= 1:
            raise ValueError(f"backoff jitter must be within 0..1, got {jitter!r}")
        return cls(initial, maximum, factor=factor, low=1 - jitter, high=1 + jitter, rng=rng)

    def next_delay(self) -> float:
        """The delay before the next attempt; grows until :meth:`reset`."""
        ceiling = self._ceiling
        self._ceiling = min(self.maximum, ceiling * self.factor)
        return self._rng.uniform(ceiling * self.low, ceiling * self.high)

    def reset(self) -> None:
        """The last attempt worked: start from ``initial`` next time."""
        self._ceiling = self.initial
