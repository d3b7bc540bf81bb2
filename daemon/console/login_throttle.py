"""Failed log-ins per name: after a few, that name is locked for a while (online guessing)."""

from __future__ import annotations

import threading
from collections.abc import Callable

MAX_FAILURES = 5
LOCK_S = 60.0


class LoginThrottle:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def locked(self, name: str) -> bool:
        now = self._clock()
        with self._lock:
            recent = [t for t in self._failures.get(name, []) if now - t < LOCK_S]
            self._failures[name] = recent
            return len(recent) >= MAX_FAILURES

    def failed(self, name: str) -> None:
        with self._lock:
            if len(self._failures) > 10_000:  # a flood of made-up names cannot grow this forever
                self._failures.clear()
            self._failures.setdefault(name, []).append(self._clock())

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(name, None)
