"""Snapshots of the engine's folded state, kept in the journal file beside the events.

A restart folds the newest usable snapshot and only the engine events after it, so the time
to READY does not grow with the journal. The journal treats a snapshot's body as opaque text
(the engine's :mod:`daemon.engine.checkpoint` makes and reads it); what it keeps with it:

* ``seq``, ``event_id`` and ``body_sha256``: the last engine event the snapshot covers, its id
  (which names the epoch) and the SHA-256 of its stored body. A snapshot is used only if that
  very event is still in the journal (:func:`covered_event_problem`): a journal rolled back,
  replaced or compacted past it falls back to the full fold;
* ``key``: what the snapshot is valid for (the engine's fold code and table settings);
* ``taken_at``: the journal clock when it was stored.

They live in the same SQLite file, so a backup or a snapshot revert of the journal takes its
snapshots with it: they never describe events the file does not hold. Only the newest
:data:`KEEP` are kept (each is a few kB). ``journal verify`` re-folds the events and compares
(:mod:`daemon.service.engine_restore`).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from dataclasses import dataclass

from daemon.journal.records import ORIGIN_ENGINE
from daemon.journal.transaction import Transaction

SNAPSHOT_SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshots(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    key TEXT NOT NULL,
    taken_at REAL NOT NULL,
    body TEXT NOT NULL
);
"""
KEEP = 3
"""Snapshots kept: the newest is used; older ones are a fallback and let ``journal verify``
check each against the one before it and the events between."""


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """One stored snapshot and the event it covers."""

    id: int
    seq: int
    event_id: str
    body_sha256: str
    key: str
    taken_at: float
    body: str


def body_digest(body: str) -> str:
    """SHA-256 (hex) of an event's stored body text."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def list_snapshots(db: sqlite3.Connection) -> list[StoredSnapshot]:
    """Every stored snapshot, newest (highest ``seq``) first; none in a journal without the table."""
    present = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").fetchone()
    if present is None:
        return []
    rows = db.execute(
        "SELECT id, seq, event_id, body_sha256, key, taken_at, body FROM snapshots ORDER BY seq DESC, id DESC"
    ).fetchall()
    return [
        StoredSnapshot(int(i), int(s), str(e), str(h), str(k), float(t), str(b))
        for i, s, e, h, k, t, b in rows
    ]


def covered_event_problem(db: sqlite3.Connection, snapshot: StoredSnapshot) -> str | None:
    """Why ``snapshot`` does not describe this journal (None: the event it covers is here, the
    same engine event with the same id and body). One primary-key look-up."""
    row = db.execute("SELECT event_id, origin, body FROM events WHERE seq = ?", (snapshot.seq,)).fetchone()
    if row is None:
        return f"the event it covers (seq {snapshot.seq}) is not in the journal (compacted or rolled back)"
    event_id, origin, body = row
    if origin != ORIGIN_ENGINE:
        return f"seq {snapshot.seq} is not an engine event"
    if event_id != snapshot.event_id:
        return f"seq {snapshot.seq} has another event id (another epoch: the journal was rolled back)"
    if body_digest(str(body)) != snapshot.body_sha256:
        return f"the event at seq {snapshot.seq} is not the one it was taken after (its body differs)"
    return None


class SnapshotStore:
    """The open journal's snapshots (:attr:`Journal.snapshots`), on its connection and lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def save(self, seq: int, key: str, body: str, taken_at: float) -> StoredSnapshot:
        """Store a snapshot covering the engine events up to ``seq`` (which must be an engine
        event in the journal), then forget all but the newest :data:`KEEP`."""
        with Transaction(self._db, self._lock):
            row = self._db.execute(
                "SELECT event_id, origin, body FROM events WHERE seq = ?", (seq,)
            ).fetchone()
            if row is None or row[1] != ORIGIN_ENGINE:
                raise ValueError(f"seq {seq} is not an engine event of this journal")
            digest = body_digest(str(row[2]))
            cur = self._db.execute(
                "INSERT INTO snapshots(seq, event_id, body_sha256, key, taken_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (seq, str(row[0]), digest, key, taken_at, body),
            )
            self._db.execute(
                "DELETE FROM snapshots WHERE id NOT IN "
                "(SELECT id FROM snapshots ORDER BY seq DESC, id DESC LIMIT ?)",
                (KEEP,),
            )
        return StoredSnapshot(int(cur.lastrowid or 0), seq, str(row[0]), digest, key, taken_at, body)

    def newest_first(self) -> list[StoredSnapshot]:
        """The stored snapshots, newest first (at most :data:`KEEP`)."""
        with self._lock:
            return list_snapshots(self._db)

    def problem(self, snapshot: StoredSnapshot) -> str | None:
        """:func:`covered_event_problem` on the open journal."""
        with self._lock:
            return covered_event_problem(self._db, snapshot)
