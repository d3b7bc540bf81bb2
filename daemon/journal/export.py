"""The journal's events as JSON lines, for an auditor (``baccarat-edge journal export``).

One object per event, in ``seq`` order: the stored event body (``kind``, ``at``, ``shoe_id``,
``hand``, ``source``, ``data``) with ``seq``, ``event_id``, ``table_id``, ``origin``,
``journaled_at``, ``delivered_at`` (null until acknowledged) and ``dead_letter`` (null, or the
broker's refusal), and the event chain's ``epoch``, ``prev_hash`` and ``hash`` (null for events
journaled before the chain): an auditor can recompute each hash from the line
(:mod:`daemon.journal.chain`). The journal stores no signatures: ``sig`` is computed over the envelope
when an event is published, so it is not in the export.

A squeeze table's events keep their sealed member (``data.sealed``: card faces, reads, nonces),
which the hash does not cover (it covers ``data`` without it, as published); each committed card's
``card_dealt`` line has ``revealed``: ``{"at", "seq"}`` of its ``card_revealed``, or null.

The file is opened read-only (the daemon may be running; a damaged file is read as far as it
can be), so exporting never changes a journal.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TextIO

from daemon.journal.errors import JournalError
from daemon.journal.integrity import check_file
from daemon.journal.sealed import mark_reveal, reveal_marks

BATCH = 500


class ExportInterrupted(JournalError):
    """Reading stopped part-way (a damaged page): the events written before it stand."""

    def __init__(self, message: str, written: int) -> None:
        super().__init__(message)
        self.written = written


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an existing journal file; :class:`JournalError` if it is
    missing or cannot be a journal."""
    if check_file(path):
        raise JournalError(f"journal {path}: no such file")
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise JournalError(f"journal {path} cannot be opened: {exc}") from None


def export_events(path: Path, out: TextIO, from_seq: int = 1, to_seq: int | None = None) -> int:
    """Write the events with ``from_seq <= seq <= to_seq`` to ``out``, one JSON object per line;
    returns how many. Raises :class:`JournalError` when the file cannot be read at all, and
    :class:`ExportInterrupted` naming the last seq written when reading fails part-way."""
    db = open_read_only(path)
    written = 0
    cursor = from_seq - 1
    last = to_seq if to_seq is not None else -1
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'table_id'").fetchone()
        table_id = None if row is None else str(row[0])
        columns = {str(r[1]) for r in db.execute("PRAGMA table_info(events)")}
        chain = "epoch, prev_hash, hash" if "hash" in columns else "NULL, NULL, NULL"  # before the chain
        marks = reveal_marks(db)
        while True:
            rows = db.execute(
                "SELECT seq, event_id, origin, body, journaled_at, delivered_at, dead_letter, "  # noqa: S608
                f"{chain} FROM events WHERE seq > ? AND (? < 0 OR seq <= ?) ORDER BY seq LIMIT ?",
                (cursor, last, last, BATCH),
            ).fetchall()
            if not rows:
                return written
            for seq, event_id, origin, body, journaled_at, delivered_at, dead_letter, *links in rows:
                record = json.loads(body)
                record.update(
                    seq=seq,
                    event_id=event_id,
                    table_id=table_id,
                    origin=origin,
                    journaled_at=journaled_at,
                    delivered_at=delivered_at,
                    dead_letter=dead_letter,
                    epoch=links[0],
                    prev_hash=links[1],
                    hash=links[2],
                )
                mark_reveal(record, marks)
                out.write(json.dumps(record, sort_keys=True, allow_nan=False) + "\n")
                written += 1
                cursor = int(seq)
    except (sqlite3.Error, ValueError) as exc:
        where = f"after seq {cursor}" if written else "before the first event"
        raise ExportInterrupted(
            f"journal {path}: reading stopped {where} ({written} event(s) written): {exc}", written
        ) from None
    finally:
        db.close()
