"""Reconnect delays: exponential backoff with jitter, so a room of tables does not retry in step."""

from __future__ import annotations

import random

from drivers.settings import ReconnectSettings


class Backoff:
    """Successive delays ``initial * factor**n`` capped at ``max_delay``, each jittered."""

    def __init__(self, settings: ReconnectSettings, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._rng = rng or random.Random()
        self._attempt = 0

    def next_delay(self) -> float:
        """The delay before the next attempt; grows until :meth:`reset`."""
        s = self.settings
        base = min(s.max_delay, s.initial_delay * s.factor**self._attempt)
        self._attempt += 1
        return base * self._rng.uniform(1 - s.jitter, 1 + s.jitter)

    def reset(self) -> None:
        """The device is back: start from the initial delay next time."""
        self._attempt = 0
