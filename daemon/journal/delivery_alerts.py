"""The delivery side's open alerts, kept in their own small table as they are journaled.

A delivery-side ``alert_raised`` (origin ``delivery``) makes its ``alert_id`` the open alert of
its code; an ``alert_cleared`` naming that id closes it. The table ``open_delivery_alerts``
holds one row per code with an open alert, written in the same transaction as the event, so
a start reads the open alerts with one look-up instead of walking the journal's history
(which grows with the retention). Compaction leaves the table alone: an alert stays open
until it is cleared, even once its raise was compacted away.

A journal made before the table existed gets it on open (:func:`migrate`): one pass over its
delivery events, along the partial index ``events_delivery`` (delivery events only), once.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from daemon.journal.records import ORIGIN_DELIVERY

DELIVERY_ALERTS_SCHEMA = """
CREATE INDEX IF NOT EXISTS events_delivery ON events(seq) WHERE origin = 'delivery';
CREATE TABLE IF NOT EXISTS open_delivery_alerts(
    code TEXT PRIMARY KEY,
    alert_id TEXT NOT NULL,
    seq INTEGER NOT NULL
);
"""
MIGRATED_KEY = "open_delivery_alerts_from_seq"
"""Meta key set once the table was filled from the journal's history (its value: the
``next_seq`` then, for the record)."""
RAISED = "alert_raised"
CLEARED = "alert_cleared"


def record(db: sqlite3.Connection, seq: int, kind: str, body: dict[str, Any]) -> None:
    """Follow one delivery event in the table (inside the caller's transaction)."""
    if kind not in (RAISED, CLEARED):
        return
    data = body.get("data")
    if not isinstance(data, dict):
        return
    code, alert_id = data.get("code"), data.get("alert_id")
    if not isinstance(code, str) or not isinstance(alert_id, str):
        return
    if kind == RAISED:
        db.execute(
            "INSERT OR REPLACE INTO open_delivery_alerts(code, alert_id, seq) VALUES (?, ?, ?)",
            (code, alert_id, seq),
        )
    else:
        db.execute("DELETE FROM open_delivery_alerts WHERE code = ? AND alert_id = ?", (code, alert_id))


def migrate(db: sqlite3.Connection, next_seq: int) -> None:
    """Fill the table from the delivery events already journaled, once (inside the caller's
    transaction); a journal that has done it already is left as it is."""
    done = db.execute("SELECT 1 FROM meta WHERE key = ?", (MIGRATED_KEY,)).fetchone()
    if done is not None:
        return
    db.execute("DELETE FROM open_delivery_alerts")
    cursor = 0
    while True:
        rows = db.execute(
            "SELECT seq, kind, body FROM events WHERE origin = 'delivery' AND seq > ? "
            "ORDER BY seq LIMIT 1000",
            (cursor,),
        ).fetchall()
        if not rows:
            break
        for seq, kind, text in rows:
            cursor = int(seq)
            try:
                body = json.loads(text)
            except ValueError:
                continue
            if isinstance(body, dict):
                record(db, cursor, str(kind), body)
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (MIGRATED_KEY, str(next_seq)))


def open_alerts(db: sqlite3.Connection) -> dict[str, str]:
    """The open delivery-side alert of each code: ``{code: alert_id}``."""
    return {
        str(code): str(alert_id)
        for code, alert_id in db.execute("SELECT code, alert_id FROM open_delivery_alerts ORDER BY code")
    }


__all__ = ["DELIVERY_ALERTS_SCHEMA", "ORIGIN_DELIVERY", "migrate", "open_alerts", "record"]
