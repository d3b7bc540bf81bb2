"""Journal compaction: delete what the audit retention no longer needs, and give the space
back to the file system.

What may go: delivered (or dead-lettered) events journaled before the retention cutoff,
below the first undelivered event and, while the game server's acknowledgement is required
(``delivery.server_ack.enabled``, :mod:`daemon.journal.server_ack`), at or below the ``seq``
the server acknowledged, whose shoe is neither the current one (that of the newest engine
event) nor a shoe that still has an event waiting; then inputs older than the cutoff and
older than the input of every event kept. A PUBACK is only the broker's word: an event the
server has not acknowledged may still have to be sent again.

Cost when there is nothing to do: three index look-ups, no scan. When there is work, rows go
in batches of :data:`BATCH_ROWS`, each its own short transaction, and free pages are returned
:data:`VACUUM_PAGES` at a time, so the publisher's delivery marks never wait long for the
lock. The service runs compaction on its engine thread between inputs (hourly): a card read
meanwhile waits in the input queue for the compaction to end (measured: 0.72 s to delete
40,000 events; a table past its retention deletes about an hour's worth, ~1,000 events, per
run).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass

from daemon.journal import server_ack
from daemon.journal.records import ORIGIN_ENGINE
from daemon.journal.transaction import Transaction

BATCH_ROWS = 2000
VACUUM_PAGES = 1000

# Created on every open (IF NOT EXISTS), so journals made before they existed get them too.
# compacted_seqs logs every seq compaction deleted, as merged ranges: a missing seq outside
# them is a lost or deleted row (daemon/journal/integrity.py), not compaction's doing.
COMPACTION_SCHEMA = """
CREATE INDEX IF NOT EXISTS events_journaled_at ON events(journaled_at);
CREATE INDEX IF NOT EXISTS events_shoe ON events(shoe_id, seq) WHERE shoe_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS compacted_seqs(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS compacted_seqs_last ON compacted_seqs(last_seq);
"""


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction removed."""

    events_deleted: int
    inputs_deleted: int
    pages_freed: int


def compact(db: sqlite3.Connection, lock: threading.RLock, cutoff: float) -> CompactionResult:
    """Remove events and inputs journaled before ``cutoff`` that the rules above allow, and
    shrink the file by the pages they held."""
    events_deleted = _delete_events(db, lock, cutoff)
    inputs_deleted = _delete_inputs(db, lock, cutoff)
    pages_freed = release_free_pages(db, lock)
    if events_deleted or inputs_deleted or pages_freed:
        truncate_wal(db, lock)
    return CompactionResult(events_deleted, inputs_deleted, pages_freed)


def truncate_wal(db: sqlite3.Connection, lock: threading.RLock) -> None:
    """Checkpoint the WAL into the file and truncate it, if no reader holds it now.

    A TRUNCATE checkpoint waits for readers (``journal verify``, ``export``, ``check-config``)
    up to the busy timeout, under the journal lock: it runs with no wait instead, and when a
    reader is there it stays undone until the next compaction (SQLite's automatic
    checkpoints go on meanwhile)."""
    with lock:
        (timeout,) = db.execute("PRAGMA busy_timeout").fetchone()
        db.execute("PRAGMA busy_timeout=0")
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            db.execute(f"PRAGMA busy_timeout={int(timeout)}")


def _delete_events(db: sqlite3.Connection, lock: threading.RLock, cutoff: float) -> int:
    with lock:
        oldest = db.execute("SELECT journaled_at FROM events ORDER BY journaled_at LIMIT 1").fetchone()
        if oldest is None or oldest[0] >= cutoff:
            return 0
        first_pending = db.execute(
            "SELECT seq FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL ORDER BY seq LIMIT 1"
        ).fetchone()
        if first_pending is None:
            last = db.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
            limit_seq = int(last[0])
        else:
            limit_seq = int(first_pending[0])
        server_limit = server_ack.compaction_limit(db)
        if server_limit is not None:
            limit_seq = min(limit_seq, server_limit)
        kept_shoes = _shoes_kept(db, cutoff, limit_seq)
    kept = json.dumps(sorted(kept_shoes))
    deleted = 0
    while True:
        with Transaction(db, lock):
            seqs = [
                int(row[0])
                for row in db.execute(
                    "SELECT seq FROM events WHERE journaled_at < ? "
                    "AND seq < ? AND (delivered_at IS NOT NULL OR dead_letter IS NOT NULL) "
                    "AND (shoe_id IS NULL OR shoe_id NOT IN (SELECT value FROM json_each(?))) "
                    "ORDER BY journaled_at LIMIT ?",
                    (cutoff, limit_seq, kept, BATCH_ROWS),
                )
            ]
            if seqs:
                _log_deleted(db, seqs)
                db.execute(
                    "DELETE FROM events WHERE seq IN (SELECT value FROM json_each(?))", (json.dumps(seqs),)
                )
        deleted += len(seqs)
        if len(seqs) < BATCH_ROWS:
            return deleted


def _log_deleted(db: sqlite3.Connection, seqs: list[int]) -> None:
    """Add the deleted ``seqs`` to ``compacted_seqs``, merging each run with the ranges it touches."""
    ordered = sorted(seqs)
    runs: list[tuple[int, int]] = []
    for seq in ordered:
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    for first, last in runs:
        before = db.execute(
            "SELECT first_seq FROM compacted_seqs WHERE last_seq = ?", (first - 1,)
        ).fetchone()
        after = db.execute("SELECT last_seq FROM compacted_seqs WHERE first_seq = ?", (last + 1,)).fetchone()
        if after is not None:
            db.execute("DELETE FROM compacted_seqs WHERE first_seq = ?", (last + 1,))
            last = int(after[0])
        if before is not None:
            db.execute("UPDATE compacted_seqs SET last_seq = ? WHERE first_seq = ?", (last, int(before[0])))
        else:
            db.execute("INSERT INTO compacted_seqs(first_seq, last_seq) VALUES (?, ?)", (first, last))


def _shoes_kept(db: sqlite3.Connection, cutoff: float, limit_seq: int) -> set[str]:
    """Shoes among the old events that must stay whole: the current shoe, and any shoe with an
    event at or after ``limit_seq`` (waiting, or newer than something waiting)."""
    kept: set[str] = set()
    current = db.execute(
        "SELECT shoe_id FROM events WHERE origin = ? AND shoe_id IS NOT NULL ORDER BY seq DESC LIMIT 1",
        (ORIGIN_ENGINE,),
    ).fetchone()
    if current is not None:
        kept.add(str(current[0]))
    old_shoes = db.execute(
        "SELECT DISTINCT shoe_id FROM events WHERE journaled_at < ? AND shoe_id IS NOT NULL", (cutoff,)
    ).fetchall()
    for (shoe_id,) in old_shoes:
        later = db.execute(
            "SELECT 1 FROM events WHERE shoe_id = ? AND seq >= ? LIMIT 1", (shoe_id, limit_seq)
        ).fetchone()
        if later is not None:
            kept.add(str(shoe_id))
    return kept


def _delete_inputs(db: sqlite3.Connection, lock: threading.RLock, cutoff: float) -> int:
    with lock:
        oldest = db.execute(
            "SELECT journaled_at FROM inputs WHERE id = (SELECT min(id) FROM inputs)"
        ).fetchone()
        if oldest is None or oldest[0] >= cutoff:
            return 0
        # Input ids grow with seq, so the first event that names an input names the oldest
        # input still needed.
        needed = db.execute(
            "SELECT input_id FROM events WHERE input_id IS NOT NULL ORDER BY seq LIMIT 1"
        ).fetchone()
    below = None if needed is None else int(needed[0])
    deleted = 0
    while True:
        with Transaction(db, lock):
            if below is None:
                count = db.execute(
                    "DELETE FROM inputs WHERE id IN (SELECT id FROM inputs WHERE journaled_at < ? "
                    "ORDER BY id LIMIT ?)",
                    (cutoff, BATCH_ROWS),
                ).rowcount
            else:
                count = db.execute(
                    "DELETE FROM inputs WHERE id IN (SELECT id FROM inputs WHERE id < ? AND journaled_at < ? "
                    "ORDER BY id LIMIT ?)",
                    (below, cutoff, BATCH_ROWS),
                ).rowcount
        deleted += count
        if count < BATCH_ROWS:
            return deleted


def release_free_pages(db: sqlite3.Connection, lock: threading.RLock) -> int:
    """Return the file's free pages to the file system (``auto_vacuum=INCREMENTAL``).

    ``PRAGMA incremental_vacuum`` frees one page per step of its statement, and Python's
    ``execute`` steps a statement that returns no rows only once: it must run through
    ``executescript``, which steps it to the end."""
    freed = 0
    while True:
        with lock:
            before = int(db.execute("PRAGMA freelist_count").fetchone()[0])
            if before == 0:
                return freed
            db.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES});")
            after = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        freed += before - after
        if after >= before:  # not an incremental-vacuum file (made before auto_vacuum was set)
            return freed
