"""The journal's read queries, one function each, on the journal's connection.

:class:`daemon.journal.store.Journal` calls these under its lock. Every query that returns
events selects :data:`EVENT_COLUMNS`, the column order :func:`event_from_row` reads; the SQL
text is constant (one literal column list, never data).
"""

from __future__ import annotations

import sqlite3

from common.inputs import EngineInput
from daemon.journal.codec import loads_input
from daemon.journal.records import ORIGIN_DELIVERY, JournaledEvent, event_from_row

EVENT_COLUMNS = (
    "seq, event_id, kind, at, shoe_id, hand, source, origin, body, journaled_at, delivered_at, dead_letter, "
    "epoch, prev_hash, hash"
)
"""The columns of an event row, in :func:`event_from_row`'s order."""

PAGE_ROWS = 500
"""Rows read per query when iterating the whole journal (the lock is released between pages)."""


def pending(db: sqlite3.Connection, after_seq: int, limit: int) -> list[JournaledEvent]:
    """Undelivered, not dead-lettered events with ``seq > after_seq``, in ``seq`` order."""
    rows = db.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ? AND delivered_at IS NULL "  # noqa: S608
        "AND dead_letter IS NULL ORDER BY seq LIMIT ?",
        (after_seq, limit),
    ).fetchall()
    return [event_from_row(r) for r in rows]


def delivered_between(db: sqlite3.Connection, first: int, last: int, limit: int) -> list[JournaledEvent]:
    """Events of ``first..last`` the broker acknowledged (not dead-lettered), in ``seq`` order."""
    rows = db.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE seq BETWEEN ? AND ? "  # noqa: S608
        "AND delivered_at IS NOT NULL AND dead_letter IS NULL ORDER BY seq LIMIT ?",
        (first, last, limit),
    ).fetchall()
    return [event_from_row(r) for r in rows]


def event_at(db: sqlite3.Connection, seq: int) -> JournaledEvent | None:
    """The event ``seq``, None when the journal does not hold it."""
    row = db.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE seq = ?", (seq,)).fetchone()  # noqa: S608
    return None if row is None else event_from_row(row)


def events_page(db: sqlite3.Connection, after_seq: int, origin: str | None) -> list[JournaledEvent]:
    """Up to :data:`PAGE_ROWS` events with ``seq > after_seq`` in order, of ``origin`` (any when None)."""
    if origin is None:
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",  # noqa: S608
            (after_seq, PAGE_ROWS),
        ).fetchall()
    elif origin == ORIGIN_DELIVERY:
        # The literal lets SQLite use the partial index of delivery events (a few among many).
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE origin = 'delivery' AND seq > ? "  # noqa: S608
            "ORDER BY seq LIMIT ?",
            (after_seq, PAGE_ROWS),
        ).fetchall()
    else:
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > ? AND origin = ? "  # noqa: S608
            "ORDER BY seq LIMIT ?",
            (after_seq, origin, PAGE_ROWS),
        ).fetchall()
    return [event_from_row(r) for r in rows]


def inputs_page(db: sqlite3.Connection, after_id: int) -> list[tuple[int, EngineInput]]:
    """Up to :data:`PAGE_ROWS` stored inputs with row id ``> after_id``, in journal order."""
    rows = db.execute(
        "SELECT id, body FROM inputs WHERE id > ? ORDER BY id LIMIT ?", (after_id, PAGE_ROWS)
    ).fetchall()
    return [(int(row_id), loads_input(body)) for row_id, body in rows]


def dead_letters(db: sqlite3.Connection) -> list[JournaledEvent]:
    """Every dead-lettered event, in ``seq`` order."""
    rows = db.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE dead_letter IS NOT NULL ORDER BY seq"  # noqa: S608
    ).fetchall()
    return [event_from_row(r) for r in rows]
