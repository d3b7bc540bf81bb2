"""Snapshots of the engine's folded state, kept in the journal file beside the events.

A restart folds the newest usable snapshot and only the engine events after it, so the time
to READY does not grow with the journal. The journal treats a snapshot's body as opaque text
(the engine's :mod:`daemon.engine.checkpoint` makes and reads it); what it keeps with it:

* ``seq``, ``event_id`` and ``body_sha256``: the last engine event the snapshot covers, its id
  (which names the epoch) and the SHA-256 of its stored body. A snapshot is used only if that
  very event is still in the journal (:func:`covered_event_problem`): a journal rolled back,
  replaced or compacted past it falls back to the full fold;
* ``key``: what the snapshot is valid for (the engine's fold code and table settings);
* ``taken_at``: the journal clock when it was stored;
* ``row_sha256``: the SHA-256 of the row itself (:func:`row_digest`: every field above and the
  body). A row whose checksum does not match (a flipped bit that still leaves valid JSON, a
  ``cards_out`` of 104 read as 105) is never used: :func:`row_problem` names it, the start
  raises ``engine_snapshot_unusable`` and folds the events instead. A row stored before the
  checksum existed has none and is not used either (the next start stores a checked one).

They live in the same SQLite file, so a backup or a snapshot revert of the journal takes its
snapshots with it: they never describe events the file does not hold. Only the newest
:data:`KEEP` are kept (each is a few kB). ``journal verify`` re-folds the events and compares
(:mod:`daemon.service.engine_restore`).
"""

from __future__ import annotations

import hashlib
import json
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
    body TEXT NOT NULL,
    row_sha256 TEXT
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
    row_sha256: str | None = None
    """The checksum stored with the row (None: stored by a version before checksums)."""


def row_digest(*, seq: int, event_id: str, body_sha256: str, key: str, taken_at: float, body: str) -> str:
    """SHA-256 (hex) of a snapshot row: its fields in a fixed order, as canonical JSON (a float
    by its shortest exact form, so what SQLite stores and returns hashes the same)."""
    text = json.dumps([seq, event_id, body_sha256, key, taken_at, body], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_problem(snapshot: StoredSnapshot) -> str | None:
    """Why the row of ``snapshot`` cannot be trusted as stored (None: its checksum matches)."""
    if snapshot.row_sha256 is None:
        return "it was stored without a checksum (by an older version)"
    expected = row_digest(
        seq=snapshot.seq,
        event_id=snapshot.event_id,
        body_sha256=snapshot.body_sha256,
        key=snapshot.key,
        taken_at=snapshot.taken_at,
        body=snapshot.body,
    )
    if expected != snapshot.row_sha256:
        return "its checksum does not match its row (the stored snapshot was altered or damaged)"
    return None


def migrate_snapshots(db: sqlite3.Connection) -> None:
    """Give a journal made before row checksums the ``row_sha256`` column (its rows keep none:
    they are not used, and the next start stores a checked snapshot)."""
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(snapshots)")}
    if "row_sha256" not in columns:
        db.execute("ALTER TABLE snapshots ADD COLUMN row_sha256 TEXT")


def body_digest(body: str) -> str:
    """SHA-256 (hex) of an event's stored body text."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def list_snapshots(db: sqlite3.Connection) -> list[StoredSnapshot]:
    """Every stored snapshot, newest (highest ``seq``) first; none in a journal without the table."""
    present = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").fetchone()
    if present is None:
        return []
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(snapshots)")}
    checksum = "row_sha256" if "row_sha256" in columns else "NULL"  # a file read-only, not migrated
    rows = db.execute(
        f"SELECT id, seq, event_id, body_sha256, key, taken_at, body, {checksum} FROM snapshots "  # noqa: S608
        "ORDER BY seq DESC, id DESC"
    ).fetchall()
    return [
        StoredSnapshot(
            int(i), int(s), str(e), str(h), str(k), float(t), str(b), None if c is None else str(c)
        )
        for i, s, e, h, k, t, b, c in rows
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
            checksum = row_digest(
                seq=seq, event_id=str(row[0]), body_sha256=digest, key=key, taken_at=taken_at, body=body
            )
            cur = self._db.execute(
                "INSERT INTO snapshots(seq, event_id, body_sha256, key, taken_at, body, row_sha256) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, str(row[0]), digest, key, taken_at, body, checksum),
            )
            self._db.execute(
                "DELETE FROM snapshots WHERE id NOT IN "
                "(SELECT id FROM snapshots ORDER BY seq DESC, id DESC LIMIT ?)",
                (KEEP,),
            )
        return StoredSnapshot(
            int(cur.lastrowid or 0), seq, str(row[0]), digest, key, taken_at, body, checksum
        )

    def newest_first(self) -> list[StoredSnapshot]:
        """The stored snapshots, newest first (at most :data:`KEEP`)."""
        with self._lock:
            return list_snapshots(self._db)

    def problem(self, snapshot: StoredSnapshot) -> str | None:
        """:func:`covered_event_problem` on the open journal."""
        with self._lock:
            return covered_event_problem(self._db, snapshot)
