"""The game server's acknowledgement as the journal keeps it.

Three ``meta`` rows:

* ``server_ack_required``: ``1`` while the publisher runs with ``delivery.server_ack.enabled``
  (written at every start, so turning it off unblocks compaction at the next start);
* ``server_ack_seq``: the highest ``seq`` the game server acknowledged as durably processed
  (0: none yet);
* ``server_ack_event_id``: the ``event_id`` it acknowledged with it (the epoch it names).

Compaction (:mod:`daemon.journal.compaction`) never deletes an event above ``server_ack_seq``
while ``server_ack_required`` is ``1``. The acknowledgement is written with
``synchronous=NORMAL`` like the delivery marks: a crash may lose the newest one, which only
means events are published again (the server deduplicates by ``event_id``).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

from daemon.journal.transaction import Transaction

REQUIRED_KEY = "server_ack_required"
SEQ_KEY = "server_ack_seq"
EVENT_ID_KEY = "server_ack_event_id"


@dataclass(frozen=True, slots=True)
class ServerAck:
    """What the journal holds about the server's acknowledgement."""

    required: bool
    seq: int
    """0 when the server never acknowledged anything."""
    event_id: str | None


def read(db: sqlite3.Connection) -> ServerAck:
    """The stored acknowledgement (rows missing: not required, nothing acknowledged)."""
    rows = dict(
        db.execute(
            "SELECT key, value FROM meta WHERE key IN (?, ?, ?)", (REQUIRED_KEY, SEQ_KEY, EVENT_ID_KEY)
        ).fetchall()
    )
    try:
        seq = max(0, int(rows.get(SEQ_KEY, "0")))
    except ValueError:
        seq = 0  # unreadable: acknowledged nothing, so every event is kept and sent again
    return ServerAck(rows.get(REQUIRED_KEY) == "1", seq, rows.get(EVENT_ID_KEY))


def set_required(db: sqlite3.Connection, lock: threading.RLock, required: bool) -> None:
    """Record whether events must wait for the server (the publisher's setting)."""
    with Transaction(db, lock):
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (REQUIRED_KEY, "1" if required else "0")
        )


def write(db: sqlite3.Connection, lock: threading.RLock, seq: int, event_id: str) -> None:
    """Store a newer acknowledgement (the caller checked it against the journal)."""
    with lock:
        db.execute("PRAGMA synchronous=NORMAL")
        try:
            with Transaction(db, lock):
                db.executemany(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                    [(SEQ_KEY, str(seq)), (EVENT_ID_KEY, event_id)],
                )
        finally:
            db.execute("PRAGMA synchronous=FULL")


def compaction_limit(db: sqlite3.Connection) -> int | None:
    """The lowest ``seq`` compaction must keep because the server has not acknowledged it,
    or None when the server's acknowledgement is not required."""
    ack = read(db)
    return ack.seq + 1 if ack.required else None
