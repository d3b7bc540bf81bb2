"""Failed log-ins per name: after a few, that name is locked for a while (online guessing).

The names of the user file are counted apart from made-up names. Made-up names live in a
bounded table that forgets its oldest entries first, so a flood of invented names (which
costs an attacker nothing) can neither grow memory nor push a real name's failures out:
a real name stays locked for :data:`LOCK_S` whatever else is tried meanwhile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

MAX_FAILURES = 5
LOCK_S = 60.0
MAX_UNKNOWN_NAMES = 10_000
"""Made-up names remembered at once (the oldest is forgotten first)."""


class LoginThrottle:
    """Counts failed log-ins; :meth:`locked` says whether a name may try again now."""

    def __init__(self, clock: Callable[[], float], known: Iterable[str] = ()) -> None:
        self._clock = clock
        self._known = frozenset(known)
        self._failures: dict[str, list[float]] = {}
        """Failures of the user file's names: at most one entry per person."""
        self._unknown: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def set_known(self, names: Iterable[str]) -> None:
        """The user file's names (after a re-read); failures of names still there are kept."""
        with self._lock:
            self._known = frozenset(names)
            self._failures = {n: t for n, t in self._failures.items() if n in self._known}

    def _table(self, name: str) -> dict[str, list[float]]:
        return self._failures if name in self._known else self._unknown

    def locked(self, name: str) -> bool:
        now = self._clock()
        with self._lock:
            table = self._table(name)
            recent = [t for t in table.get(name, []) if now - t < LOCK_S]
            if recent:
                table[name] = recent
            else:
                table.pop(name, None)
            return len(recent) >= MAX_FAILURES

    def failed(self, name: str) -> None:
        now = self._clock()
        with self._lock:
            if name in self._known:
                self._failures.setdefault(name, []).append(now)
                return
            times = self._unknown.pop(name, [])
            times.append(now)
            self._unknown[name] = times[-MAX_FAILURES:]
            while len(self._unknown) > MAX_UNKNOWN_NAMES:
                self._unknown.popitem(last=False)

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._table(name).pop(name, None)

    def remembered(self) -> int:
        """Names with failures remembered now (real and made-up)."""
        with self._lock:
            return len(self._failures) + len(self._unknown)
