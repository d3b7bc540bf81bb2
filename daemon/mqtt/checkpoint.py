"""The reference consumer's durable checkpoint: one SQLite file (WAL, ``synchronous=FULL``).

Per table it holds the *position* — the highest ``seq`` it processed with every lower one
(contiguous), with that event's ``event_id``: what it acknowledges to the table — and every
processed event's ``seq``, ``event_id``, content digest and chain ``hash``/``epoch``, so that
after a restart a copy is still told from a conflict (the same ``seq`` or ``event_id`` with
other content) and the next event's ``prev_hash`` can be checked. Events a table lost in a
journal rollback are moved to ``lost`` (reported, never deleted; one the table then sends
again unchanged is *recovered*: taken out of ``lost``, not processed twice). The rollback
alerts acted upon are kept (``rollbacks``), so none is acted upon twice.

Writes go into one open transaction; :meth:`Checkpoint.commit` makes them durable. Only a
committed position is acknowledged: a consumer that dies before the commit has acknowledged
nothing of what it had not committed, and the table sends it again.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS position(
    table_id TEXT PRIMARY KEY,
    epoch_id TEXT,
    epoch INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT
);
CREATE TABLE IF NOT EXISTS processed(
    table_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    digest BLOB,
    kind TEXT NOT NULL,
    PRIMARY KEY (table_id, seq)
);
CREATE TABLE IF NOT EXISTS lost(
    table_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    epoch_id TEXT,
    noted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rollbacks(
    table_id TEXT NOT NULL,
    alert_event_id TEXT NOT NULL,
    restore_seq INTEGER NOT NULL,
    lost_epoch TEXT,
    noted_at REAL NOT NULL,
    PRIMARY KEY (table_id, alert_event_id)
);
"""
_CHAIN_COLUMNS = ("hash", "epoch")


@dataclass(frozen=True, slots=True)
class Position:
    """Where a consumer stands in one table's stream."""

    epoch_id: str | None
    """The epoch id (``new_journal_id``) of the last epoch change seen; None before any."""
    epoch: int
    seq: int
    """Highest ``seq`` processed with every lower one (0: none)."""
    event_id: str | None
    """The ``event_id`` of ``seq`` (what the acknowledgement names)."""


@dataclass(frozen=True, slots=True)
class Processed:
    """One processed event as the checkpoint remembers it."""

    event_id: str
    digest: bytes | None
    """None for a dead-lettered ``seq`` skipped on its alert's word."""
    kind: str
    hash: str | None = None
    """The event's chain hash (None: unchained, or dead-lettered)."""
    epoch: str | None = None
    """The event's epoch (None: unchained, or dead-lettered)."""


class Checkpoint:
    """The durable position and processed events of one table."""

    def __init__(self, path: Path, table_id: str) -> None:
        self.path = path
        self.table_id = table_id
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        present = {str(row[1]) for row in self._db.execute("PRAGMA table_info(processed)")}
        for column in _CHAIN_COLUMNS:
            if column not in present:  # a checkpoint made before the chain
                self._db.execute(f"ALTER TABLE processed ADD COLUMN {column} TEXT")
        row = self._db.execute(
            "SELECT epoch_id, epoch, seq, event_id FROM position WHERE table_id = ?", (table_id,)
        ).fetchone()
        self.position = Position(None, 0, 0, None) if row is None else Position(*row)
        """The position including what is not committed yet."""
        self.committed = self.position
        # Kept in memory so the per-event work costs no SQL: the seqs listed lost that the table
        # may still send unchanged (above the position), and the newest processed event's hash.
        self._recoverable = {
            int(r[0])
            for r in self._db.execute(
                "SELECT seq FROM lost WHERE table_id = ? AND seq > ? AND event_id != 'unknown'",
                (table_id, self.position.seq),
            )
        }
        self._tip: tuple[int, str | None] | None = None
        """The position as last committed (what may be acknowledged)."""

    def processed(self, seq: int) -> Processed | None:
        """What was processed at ``seq`` (committed or not)."""
        row = self._db.execute(
            "SELECT event_id, digest, kind, hash, epoch FROM processed WHERE table_id = ? AND seq = ?",
            (self.table_id, seq),
        ).fetchone()
        return None if row is None else Processed(row[0], row[1], row[2], row[3], row[4])

    def add(
        self,
        seq: int,
        event_id: str,
        digest: bytes | None,
        kind: str,
        *,
        chain: tuple[str | None, str | None] = (None, None),
    ) -> None:
        """Record ``seq`` as processed (``chain``: its hash and epoch); it must be
        ``position.seq + 1``."""
        if seq != self.position.seq + 1:
            raise ValueError(f"seq {seq} is not the next one after {self.position.seq}")
        self._begin()
        self._db.execute(
            "INSERT OR REPLACE INTO processed(table_id, seq, event_id, digest, kind, hash, epoch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.table_id, seq, event_id, digest, kind, *chain),
        )
        p = self.position
        self.position = Position(p.epoch_id, p.epoch, seq, event_id)
        self._tip = (seq, chain[0])

    def hash_at(self, seq: int) -> str | None:
        """The chain hash of the event processed at ``seq`` (None: none, or unchained)."""
        tip = self._tip
        if tip is not None and tip[0] == seq:
            return tip[1]
        held = self.processed(seq)
        return None if held is None else held.hash

    def rebase(self, restore_seq: int, epoch_id: str | None, epoch: int) -> list[tuple[int, str, str]]:
        """The table's journal went back to ``restore_seq``: every processed event above it is
        moved to ``lost`` (returned as ``(seq, event_id, kind)``), and the position falls back
        to ``restore_seq`` at most."""
        self._begin()
        rows = self._db.execute(
            "SELECT seq, event_id, kind, epoch FROM processed WHERE table_id = ? AND seq > ? ORDER BY seq",
            (self.table_id, restore_seq),
        ).fetchall()
        now = time.time()
        self._db.executemany(
            "INSERT INTO lost(table_id, seq, event_id, kind, epoch_id, noted_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (self.table_id, seq, event_id, kind, lost_epoch, now)
                for seq, event_id, kind, lost_epoch in rows
            ],
        )
        self._db.execute("DELETE FROM processed WHERE table_id = ? AND seq > ?", (self.table_id, restore_seq))
        seq = min(self.position.seq, restore_seq)
        held = self.processed(seq) if seq > 0 else None
        self.position = Position(epoch_id, epoch, seq, None if held is None else held.event_id)
        self._recoverable.update(int(s) for s, _, _, _ in rows)
        self._tip = None
        return [(int(s), str(e), str(k)) for s, e, k, _ in rows]

    def skip_to(self, seq: int, reason: str) -> list[int]:
        """Seqs from the position through ``seq`` will never come (a replaced journal's): record
        each as lost with no content and move the position to ``seq``; returns them."""
        skipped = list(range(self.position.seq + 1, seq + 1))
        if not skipped:
            return []
        self._begin()
        now = time.time()
        self._db.executemany(
            "INSERT INTO lost(table_id, seq, event_id, kind, epoch_id, noted_at) "
            "VALUES (?, ?, ?, ?, NULL, ?)",
            [(self.table_id, s, "unknown", reason, now) for s in skipped],
        )
        self._db.executemany(
            "INSERT OR REPLACE INTO processed(table_id, seq, event_id, digest, kind) "
            "VALUES (?, ?, ?, NULL, ?)",
            [(self.table_id, s, "unknown", reason) for s in skipped],
        )
        p = self.position
        self.position = Position(p.epoch_id, p.epoch, seq, None)
        return skipped

    def recover(self, seq: int, event_id: str) -> bool:
        """The table sent ``seq`` again as ``event_id``, an event listed as lost: it was not
        lost. Take it out of ``lost``; True when it was listed."""
        if seq not in self._recoverable:
            return False  # nothing listed lost there: no SQL
        self._recoverable.discard(seq)
        self._begin()
        cursor = self._db.execute(
            "DELETE FROM lost WHERE table_id = ? AND seq = ? AND event_id = ?", (self.table_id, seq, event_id)
        )
        return cursor.rowcount > 0

    def was_lost(self, seq: int, event_id: str) -> bool:
        """``event_id`` at ``seq`` is listed as lost."""
        row = self._db.execute(
            "SELECT 1 FROM lost WHERE table_id = ? AND seq = ? AND event_id = ?",
            (self.table_id, seq, event_id),
        ).fetchone()
        return row is not None

    def note_rollback(self, alert_event_id: str, restore_seq: int, lost_epoch: str | None) -> bool:
        """Remember a rollback alert acted upon; False when it was acted upon before."""
        self._begin()
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO rollbacks(table_id, alert_event_id, restore_seq, lost_epoch, noted_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (self.table_id, alert_event_id, restore_seq, lost_epoch, time.time()),
        )
        return cursor.rowcount > 0

    def lost_history(self, epoch: str, seq: int) -> bool:
        """An event of ``epoch`` at ``seq`` belongs to a history a rollback alert declared lost
        (its epoch was lost above the restore point)."""
        row = self._db.execute(
            "SELECT 1 FROM rollbacks WHERE table_id = ? AND lost_epoch = ? AND restore_seq < ?",
            (self.table_id, epoch, seq),
        ).fetchone()
        return row is not None

    def note_epoch(self, epoch_id: str, epoch: int) -> None:
        """A new epoch without lost events (e.g. continuity unproven): remember its id."""
        p = self.position
        if p.epoch_id != epoch_id:
            self._begin()
            self.position = Position(epoch_id, epoch, p.seq, p.event_id)

    def commit(self) -> Position:
        """Make everything recorded durable; returns the committed position."""
        if self._db.in_transaction:
            p = self.position
            self._db.execute(
                "INSERT OR REPLACE INTO position(table_id, epoch_id, epoch, seq, event_id) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.table_id, p.epoch_id, p.epoch, p.seq, p.event_id),
            )
            self._db.execute("COMMIT")
            self.committed = p
        return self.committed

    def lost(self) -> list[tuple[int, str, str]]:
        """Every event recorded as lost by the table, ``(seq, event_id, kind)``."""
        rows = self._db.execute(
            "SELECT seq, event_id, kind FROM lost WHERE table_id = ? ORDER BY rowid", (self.table_id,)
        ).fetchall()
        return [(int(s), str(e), str(k)) for s, e, k in rows]

    def processed_seqs(self) -> list[tuple[int, str]]:
        """Every processed ``(seq, event_id)`` in order (committed or not)."""
        rows = self._db.execute(
            "SELECT seq, event_id FROM processed WHERE table_id = ? ORDER BY seq", (self.table_id,)
        ).fetchall()
        return [(int(s), str(e)) for s, e in rows]

    def close(self) -> None:
        """Commit and close."""
        self.commit()
        self._db.close()

    def _begin(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
