"""The rows of one append: inputs, then events with their ``seq``, ``event_id`` and chain links.

:meth:`daemon.journal.store.Journal.append` calls :func:`write_rows` inside its transaction; the
journal keeps the returned chain tip only once that transaction has committed.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from daemon.journal import chain, delivery_alerts
from daemon.journal.records import ORIGIN_DELIVERY, JournalableEvent, JournaledEvent

EVENT_ID_NAMESPACE = uuid.UUID("6f1d7c2e-2b8f-5a43-9c1e-baccaa7ed9e0")

InputRow = tuple[str, float, str, float]
"""``(type, at, body, journaled_at)`` of one engine input."""


def event_id_for(journal_id: str, table_id: str, seq: int) -> str:
    """The stable id of event ``seq``: a UUIDv5, so republishing never changes it. ``journal_id``
    is the epoch's id: a fresh journal, or a new epoch after a rollback, never reuses an id
    even though ``seq`` restarts or is issued again."""
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{journal_id}/{table_id}/{seq}"))


@dataclass(frozen=True)
class RowsToWrite:
    """One append: the inputs' rows and the events with their bodies (as dicts and as the
    stored JSON text), all from one origin, journaled at ``now``."""

    input_rows: list[InputRow]
    events: Sequence[JournalableEvent]
    bodies: list[dict[str, Any]]
    body_texts: list[str]
    origin: str
    now: float


def write_rows(
    db: sqlite3.Connection,
    rows: RowsToWrite,
    *,
    table_id: str,
    journal_id: str,
    chain_tip: str,
    out: list[JournaledEvent],
) -> str:
    """Insert ``rows`` (inside the caller's transaction), append the journaled events to ``out``
    and return the chain's new tip (``chain_tip`` when there were no events)."""
    last_input_id: int | None = None
    for row in rows.input_rows:
        cur = db.execute("INSERT INTO inputs(type, at, body, journaled_at) VALUES (?, ?, ?, ?)", row)
        last_input_id = cur.lastrowid
    if not rows.events:
        return chain_tip
    next_seq = int(db.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()[0])
    tip = chain_tip
    for event, body, text in zip(rows.events, rows.bodies, rows.body_texts, strict=True):
        seq = next_seq
        next_seq += 1
        event_id = event_id_for(journal_id, table_id, seq)
        prev_hash = tip
        tip = chain.hash_of_journaled(
            event,
            event_id=event_id,
            seq=seq,
            table_id=table_id,
            body_text=text,
            epoch=journal_id,
            prev_hash=prev_hash,
        )
        db.execute(
            "INSERT INTO events(seq, event_id, kind, at, shoe_id, hand, source, origin, body, "
            "journaled_at, delivered_at, dead_letter, input_id, epoch, prev_hash, hash) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?)",
            (
                seq,
                event_id,
                event.kind,
                float(event.at),
                event.shoe_id,
                event.hand,
                event.source,
                rows.origin,
                text,
                rows.now,
                last_input_id,
                journal_id,
                prev_hash,
                tip,
            ),
        )
        out.append(
            JournaledEvent(
                seq=seq,
                event_id=event_id,
                kind=event.kind,
                at=float(event.at),
                shoe_id=event.shoe_id,
                hand=event.hand,
                source=event.source,
                data=dict(event.data),
                origin=rows.origin,
                journaled_at=rows.now,
                body=body,
                epoch=journal_id,
                prev_hash=prev_hash,
                hash=tip,
            )
        )
        if rows.origin == ORIGIN_DELIVERY:
            delivery_alerts.record(db, seq, event.kind, body)
    db.execute("UPDATE meta SET value = ? WHERE key = 'next_seq'", (str(next_seq),))
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (chain.CHAIN_TIP_KEY, tip))
    return tip
