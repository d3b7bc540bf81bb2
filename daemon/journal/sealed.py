"""A squeeze table's sealed cards in the journal (``daemon/engine/squeeze.py``).

The journal stores each event whole, its sealed member (card faces, reads, nonces) included: the
table PC is protected by its OS, and a restart folds the sealed cards back. Nothing the journal
hands out keeps that member but the auditor's ``journal export``, which also marks each committed
card with when it was revealed (:func:`reveal_marks`, :func:`mark_reveal`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from daemon.engine.squeeze import commitment

RevealKey = tuple[str | None, int, str]
"""``(shoe_id, round, slot)`` of a committed round card."""


def reveal_marks(db: sqlite3.Connection) -> dict[RevealKey, tuple[float, int]]:
    """When (``at``) and by which event (``seq``) each committed card was revealed."""
    marks: dict[RevealKey, tuple[float, int]] = {}
    for seq, at, shoe_id, body in db.execute(
        "SELECT seq, at, shoe_id, body FROM events WHERE kind = 'card_revealed' ORDER BY seq"
    ):
        data = json.loads(body).get("data", {})
        marks[(shoe_id, int(data["round"]), str(data["slot"]))] = (float(at), int(seq))
    return marks


def mark_reveal(record: dict[str, Any], marks: dict[RevealKey, tuple[float, int]]) -> None:
    """Give an exported squeeze ``card_dealt`` its ``revealed`` mark: ``{"at", "seq"}`` of its
    ``card_revealed``, or null (never revealed on the players' topic: a burn, a voided round)."""
    data = record.get("data")
    if record.get("kind") != "card_dealt" or not isinstance(data, dict) or "commitment" not in data:
        return
    found = marks.get((record.get("shoe_id"), data.get("round"), data.get("slot")))  # type: ignore[arg-type]
    record["revealed"] = None if found is None else {"at": found[0], "seq": found[1]}


def sealed_mismatch(table_id: str, shoe_id: str | None, data: dict[str, Any]) -> str | None:
    """Why a stored squeeze ``card_dealt``'s sealed card does not match its published commitment
    (the hash covers the commitment, not the sealed member: this check covers the member), or None."""
    sealed = data.get("sealed")
    if not isinstance(sealed, dict) or "commitment" not in data:
        return None
    try:
        expected = commitment(
            table_id=table_id,
            shoe_id=shoe_id or "",
            hand=int(data["round"]),
            slot=str(data["slot"]),
            card=str(sealed["card"]),
            nonce=str(sealed["nonce"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return f"its sealed card cannot be checked ({exc})"
    return None if expected == data["commitment"] else "its sealed card does not match its commitment"
