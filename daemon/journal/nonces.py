"""Command nonces: each signed command's nonce is remembered durably, so a replayed command
is refused even across a restart."""

from __future__ import annotations

import sqlite3
from enum import Enum


class NonceVerdict(Enum):
    """Result of :func:`remember_nonce`."""

    FRESH = "fresh"
    REUSED = "reused"
    CACHE_FULL = "cache_full"


def remember_nonce(
    db: sqlite3.Connection, nonce: str, ts: float, now: float, horizon_s: float, max_entries: int
) -> NonceVerdict:
    """Record ``nonce`` (inside the caller's transaction); REUSED if it was seen before.

    Nonces whose timestamp is older than ``now - horizon_s`` are forgotten: a command that old
    is refused on its timestamp anyway, so forgetting them does not reopen replay.
    """
    db.execute("DELETE FROM command_nonces WHERE ts < ?", (now - horizon_s,))
    if db.execute("SELECT 1 FROM command_nonces WHERE nonce = ?", (nonce,)).fetchone():
        return NonceVerdict.REUSED
    count = db.execute("SELECT count(*) FROM command_nonces").fetchone()[0]
    if count >= max_entries:
        return NonceVerdict.CACHE_FULL
    db.execute("INSERT INTO command_nonces(nonce, ts, seen_at) VALUES (?, ?, ?)", (nonce, ts, now))
    return NonceVerdict.FRESH
