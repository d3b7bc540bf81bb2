"""Logged-in sessions: a random cookie token, an idle and an absolute expiry, a CSRF token.

The session id lives in an HttpOnly, SameSite=Strict cookie (Secure under TLS); every
state-changing request must also carry the session's CSRF token (a form field or the
``X-CSRF-Token`` header), which a page of another site cannot read.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class Session:
    """One person's login."""

    session_id: str
    user: str
    csrf: str
    started: float
    last_seen: float


class SessionStore:
    """Sessions in memory (a console restart logs everyone out)."""

    def __init__(self, idle_s: float, max_s: float, clock: Callable[[], float]) -> None:
        self._idle_s = idle_s
        self._max_s = max_s
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, user: str) -> Session:
        now = self._clock()
        session = Session(secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._expire(now)
            self._sessions[session.session_id] = session
        return session

    def get(self, session_id: str | None, touch: bool = True) -> Session | None:
        """The live session of this cookie value, or None (unknown or expired)."""
        if not session_id:
            return None
        now = self._clock()
        with self._lock:
            self._expire(now)
            session = self._sessions.get(session_id)
            if session is not None and touch:
                session.last_seen = now
            return session

    def end(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def end_user(self, user: str) -> None:
        """Log a person out everywhere (their user entry was removed)."""
        with self._lock:
            for sid in [s for s, v in self._sessions.items() if v.user == user]:
                del self._sessions[sid]

    def _expire(self, now: float) -> None:
        dead = [
            sid
            for sid, s in self._sessions.items()
            if now - s.last_seen > self._idle_s or now - s.started > self._max_s
        ]
        for sid in dead:
            del self._sessions[sid]


def csrf_ok(session: Session, presented: str | None) -> bool:
    """Whether the request carries this session's CSRF token (constant-time compare)."""
    return presented is not None and hmac.compare_digest(session.csrf.encode(), presented.encode())
