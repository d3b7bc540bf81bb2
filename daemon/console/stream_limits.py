"""How many live streams (server-sent events, one thread each) the console serves at once.

Each open floor, table or dealer page holds one stream and its thread. A session may hold
``per_session`` of them and the console ``total``; one more is refused (HTTP 429 for the
session's own limit, 503 when the console is full) instead of costing another thread.
"""

from __future__ import annotations

import threading
from http import HTTPStatus


class StreamLimits:
    """Counts the open streams by session; thread-safe."""

    def __init__(self, per_session: int, total: int) -> None:
        self.per_session = per_session
        self.total = total
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, session_id: str) -> tuple[HTTPStatus, str] | None:
        """Take a place for one stream of ``session_id``; None when taken, else the refusal
        (status and text). A place taken must be given back with :meth:`release`."""
        with self._lock:
            mine = self._open.get(session_id, 0)
            if mine >= self.per_session:
                return (
                    HTTPStatus.TOO_MANY_REQUESTS,
                    f"this session already has {mine} live pages open (at most {self.per_session}): "
                    "close one",
                )
            if sum(self._open.values()) >= self.total:
                return (
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"the console serves {self.total} live pages already: try again later",
                )
            self._open[session_id] = mine + 1
            return None

    def release(self, session_id: str) -> None:
        with self._lock:
            left = self._open.get(session_id, 0) - 1
            if left > 0:
                self._open[session_id] = left
            else:
                self._open.pop(session_id, None)

    def open_count(self, session_id: str | None = None) -> int:
        """Streams open now, of one session or in all."""
        with self._lock:
            if session_id is not None:
                return self._open.get(session_id, 0)
            return sum(self._open.values())
