"""Rollbacks as the journal remembers them, and the game server's acknowledgement judged
against the event chain.

Two tables in the journal file:

* ``epochs``: every epoch started since this version (id, number, first ``seq``, when), the
  file's first one included. A restore can only have happened where an epoch starts (every
  open of an existing journal starts one), so these are the candidate restore points, and an
  epoch ends where the next one starts.
* ``rollbacks``: every rollback found (on open, from the marker; or from an acknowledgement),
  with its restore point, first lost ``seq``, lost epoch and the acknowledgement that showed
  it. The newest one stays *open* until the server acknowledges an event of this journal's
  own chain above its restore point: until then, an acknowledgement off the chain above the
  restore point is the server still speaking of the lost history (its retained message, or
  its backlog) and is recognised, not alerted again, across restarts. One alert per rollback.

:func:`judge_ack` decides what an acknowledgement says (pure but for its reads).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from enum import Enum

from daemon.journal.transaction import Transaction

ROLLBACK_SCHEMA = """
CREATE TABLE IF NOT EXISTS epochs(
    epoch_id TEXT PRIMARY KEY,
    number INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    started_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rollbacks(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    detected_by TEXT NOT NULL,
    detected_at REAL NOT NULL,
    restore_seq INTEGER NOT NULL,
    lost_through_seq INTEGER,
    lost_epoch TEXT,
    ack_seq INTEGER,
    ack_event_id TEXT,
    ack_hash TEXT,
    settled_at REAL
);
"""


@dataclass(frozen=True, slots=True)
class Rollback:
    """One rollback as recorded."""

    kind: str
    """``rollback`` or ``replaced`` (:class:`daemon.journal.continuity.ContinuityKind` values)."""
    detected_by: str
    """``marker`` (on open) or ``server_ack``."""
    restore_seq: int
    """The last ``seq`` the journal still holds from before the rollback (0: none)."""
    lost_through_seq: int | None
    """The highest ``seq`` known to have been issued before (the marker's or the ack's)."""
    lost_epoch: str | None
    """The epoch id of the lost history, when known."""


def record_epoch(db: sqlite3.Connection, epoch_id: str, *, number: int, first_seq: int, at: float) -> None:
    """Remember a new epoch (inside the caller's transaction)."""
    db.execute(
        "INSERT OR REPLACE INTO epochs(epoch_id, number, first_seq, started_at) VALUES (?, ?, ?, ?)",
        (epoch_id, number, first_seq, at),
    )


def record(
    db: sqlite3.Connection,
    lock: threading.RLock,
    rollback: Rollback,
    *,
    at: float,
    ack: tuple[int, str, str | None] | None = None,
) -> None:
    """Store a rollback (it is open until settled); ``ack`` is the ``(seq, event_id, hash)``
    that showed it. Older open ones are settled by it."""
    with Transaction(db, lock):
        db.execute("UPDATE rollbacks SET settled_at = ? WHERE settled_at IS NULL", (at,))
        db.execute(
            "INSERT INTO rollbacks(kind, detected_by, detected_at, restore_seq, lost_through_seq, "
            "lost_epoch, ack_seq, ack_event_id, ack_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rollback.kind,
                rollback.detected_by,
                at,
                rollback.restore_seq,
                rollback.lost_through_seq,
                rollback.lost_epoch,
                *(ack if ack is not None else (None, None, None)),
            ),
        )


def open_rollback(db: sqlite3.Connection) -> Rollback | None:
    """The newest rollback not settled yet, None when there is none."""
    row = db.execute(
        "SELECT kind, detected_by, restore_seq, lost_through_seq, lost_epoch FROM rollbacks "
        "WHERE settled_at IS NULL ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else Rollback(str(row[0]), str(row[1]), int(row[2]), row[3], row[4])


def settle(db: sqlite3.Connection, lock: threading.RLock, at: float) -> None:
    """The server acknowledged this journal's chain above the restore point: it follows."""
    with Transaction(db, lock):
        db.execute("UPDATE rollbacks SET settled_at = ? WHERE settled_at IS NULL", (at,))


def restore_point(db: sqlite3.Connection, confirmed_seq: int, below: int, lost_epoch: str | None) -> int:
    """Where the journal's history left the one the server saw, for an acknowledgement of
    ``below`` off the chain.

    The lost history shares every event through the restore point, and a restore point is
    where an epoch starts (minus one). An acknowledgement naming an epoch this journal holds
    is exact: the lost history went on in that epoch, which ends here where it ended. Else
    the earliest epoch start at or above ``confirmed_seq`` (the highest ``seq`` the server
    acknowledged on this chain) is taken: never above the real point, so nothing lost goes
    unnamed; an event named lost that the server then receives unchanged (same ``event_id``
    and ``hash``) was not lost, the contract says so."""
    if lost_epoch is not None:  # index look-ups only: this runs on the drain thread
        row = db.execute("SELECT first_seq FROM epochs WHERE epoch_id = ?", (lost_epoch,)).fetchone()
        if row is not None:
            after = db.execute("SELECT min(first_seq) FROM epochs WHERE first_seq > ?", (row[0],)).fetchone()
            if after is not None and after[0] is not None and int(after[0]) - 1 < below:
                return int(after[0]) - 1
    row = db.execute(
        "SELECT min(first_seq) FROM epochs WHERE first_seq - 1 >= ? AND first_seq - 1 < ?",
        (confirmed_seq, below),
    ).fetchone()
    if row is None or row[0] is None:
        return min(confirmed_seq, below - 1)
    return int(row[0]) - 1


class AckStatus(Enum):
    """What an acknowledgement says about the journal."""

    ON_CHAIN = "on_chain"
    """It names the event the journal holds at that ``seq`` (same id and hash)."""
    RECOGNISED = "recognised"
    """Off the chain, above the restore point of the open rollback: the lost history the
    table already signalled (ignored)."""
    ROLLBACK = "rollback"
    """Off the chain and not explained: a rollback the journal did not know of."""


@dataclass(frozen=True, slots=True)
class HeldEvent:
    """What the journal holds at the acknowledged ``seq``."""

    event_id: str
    hash: str | None


def judge_ack(
    held: HeldEvent | None, *, event_id: str, ack_hash: str | None, seq: int, pending: Rollback | None
) -> AckStatus:
    """Compare an acknowledgement of ``seq`` with the journal's chain (``held``: the journal's
    event there, None when it has none) and the open rollback."""
    on_chain = (
        held is not None
        and held.event_id == event_id
        and (ack_hash is None or held.hash is None or held.hash == ack_hash.lower())
    )
    if on_chain:
        return AckStatus.ON_CHAIN
    if pending is not None and seq > pending.restore_seq:
        return AckStatus.RECOGNISED
    return AckStatus.ROLLBACK
