"""Exponential backoff with jitter for reconnecting to the broker.

paho's own ``reconnect_delay_set`` doubles the delay without jitter, so a broker restart
brings every table back at the same instant. Here each delay is drawn uniformly from
``[d/2, d]`` ("equal jitter") where ``d`` doubles from ``initial`` up to ``maximum``.
"""

from __future__ import annotations

import random


class Backoff:
    """Successive reconnect delays; :meth:`reset` after a successful connection."""

    def __init__(self, initial: float, maximum: float, rng: random.Random | None = None) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self._rng = rng or random.Random()
        self._attempt = 0

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * (2.0**self._attempt))
        self._attempt = min(self._attempt + 1, 62)
        return self._rng.uniform(ceiling / 2.0, ceiling)

    def reset(self) -> None:
        self._attempt = 0
