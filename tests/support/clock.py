"""A clock the test sets by hand: pass it where the product takes ``clock``/``monotonic``."""

from __future__ import annotations

DAY = 86400.0


class Clock:
    """Returns ``now``; the test moves it (``clock.now += DAY``)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
