"""The event chain: every event carries the hash of the one before it, so no restore can fake
a history.

Each journaled event gets three chain members, stored in its row and published in its
envelope:

* ``epoch``: the id of the journal epoch that issued it (a fresh random id at every open of
  an existing journal, :mod:`daemon.journal.continuity`);
* ``prev_hash``: the ``hash`` of the event one ``seq`` below, or, for the first chained event
  of a journal file, the table's *genesis*: SHA-256 of ``"baccarat-edge event chain
  genesis\\n" + table_id``;
* ``hash``: lowercase hex SHA-256 of the event's *canonical bytes*: the RFC 8785 (JCS) form of
  its envelope members without ``hash``, ``published_at`` and ``sig`` — ``schema_version``,
  ``event_id``, ``seq``, ``table_id``, ``shoe_id``, ``hand``, ``kind``, ``ts``, ``source``,
  ``data``, ``epoch`` and ``prev_hash``. A server can recompute it from the payload.

Since every ``hash`` covers ``prev_hash``, the hash of one event names the whole history
below it: two tables (or one table before and after a disk revert) that agree on the hash at
a ``seq`` agree on every event up to it. The server acknowledges ``(seq, event_id, hash)``;
the table compares that with its own chain (:mod:`daemon.journal.rollbacks`), so any
divergence shows at the first acknowledgement, whatever the marker file says. ``journal
verify`` recomputes every hash and link (:func:`verify_chain`).

Events journaled by a version without the chain keep NULL chain columns and are published as
they were (their signed content never changes); the chain starts at the genesis after them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from daemon.engine.squeeze import public_data
from daemon.journal.records import JournalableEvent
from daemon.journal.sealed import sealed_mismatch
from daemon.mqtt.canonical import canonical_json

ENVELOPE_SCHEMA_VERSION = 1
"""The event envelope's ``schema_version`` (the chain members are an additive change)."""
GENESIS_PREFIX = b"baccarat-edge event chain genesis\n"
CHAIN_TIP_KEY = "chain_tip"
"""The meta row holding the hash of the newest event (kept when compaction removes rows)."""
CHAIN_COLUMNS = ("epoch", "prev_hash", "hash")


def genesis(table_id: str) -> str:
    """The ``prev_hash`` of a journal file's first chained event."""
    return hashlib.sha256(GENESIS_PREFIX + table_id.encode("utf-8")).hexdigest()


def envelope_members(
    *,
    event_id: str,
    seq: int,
    table_id: str,
    shoe_id: str | None,
    hand: int | None,
    kind: str,
    ts: float,
    source: str,
    data: dict[str, Any],
) -> dict[str, Any]:
    """The signed envelope members every event has (chain members are added after these).

    ``data`` goes in without a squeeze table's sealed member (:func:`public_data`): this is the one
    place an event's data is made what is hashed, signed and published, so the sealed cards stay in
    the journal."""
    return {
        "schema_version": ENVELOPE_SCHEMA_VERSION,
        "event_id": event_id,
        "seq": seq,
        "table_id": table_id,
        "shoe_id": shoe_id,
        "hand": hand,
        "kind": kind,
        "ts": ts,
        "source": source,
        "data": public_data(data),
    }


def event_hash(members: dict[str, Any], epoch: str, prev_hash: str) -> str:
    """The ``hash`` of an event: SHA-256 of the JCS form of ``members`` plus ``epoch`` and
    ``prev_hash`` (``members`` is not changed)."""
    canonical = canonical_json({**members, "epoch": epoch, "prev_hash": prev_hash})
    return hashlib.sha256(canonical).hexdigest()


def hash_of_journaled(
    event: JournalableEvent,
    *,
    event_id: str,
    seq: int,
    table_id: str,
    body_text: str,
    epoch: str,
    prev_hash: str,
) -> str:
    """The hash of an event about to be journaled, over the members its envelope will carry
    (``data`` as read back from the stored body text: the very value that is published)."""
    stored = json.loads(body_text).get("data")
    members = envelope_members(
        event_id=event_id,
        seq=seq,
        table_id=table_id,
        shoe_id=event.shoe_id,
        hand=event.hand,
        kind=event.kind,
        ts=float(event.at),
        source=event.source,
        data=stored if isinstance(stored, dict) else {},
    )
    return event_hash(members, epoch, prev_hash)


def add_chain_columns(db: sqlite3.Connection) -> None:
    """Give the events table the chain columns (a journal made before the chain lacks them)."""
    present = {str(row[1]) for row in db.execute("PRAGMA table_info(events)")}
    for column in CHAIN_COLUMNS:
        if column not in present:
            db.execute(f"ALTER TABLE events ADD COLUMN {column} TEXT")


def read_tip(db: sqlite3.Connection, table_id: str) -> str:
    """The hash the next event chains to: the stored tip, else the genesis."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (CHAIN_TIP_KEY,)).fetchone()
    return genesis(table_id) if row is None else str(row[0])


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first row whose chain does not hold, and why."""

    seq: int
    reason: str

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.reason}"


def verify_chain(db: sqlite3.Connection, table_id: str) -> tuple[int, ChainBreak | None]:
    """Recompute every chained row's ``hash`` and check each ``prev_hash`` against the row
    below it (the genesis for ``seq`` 1 or after unchained rows). Returns the number of
    chained rows checked and the first break (None: the chain holds). A row below which rows
    were compacted is taken on its own ``prev_hash``."""
    checked = 0
    expected_prev: str | None = genesis(table_id)
    previous_seq = 0
    for row in _rows(db):
        seq, event_id, kind, at, shoe_id, hand, source, body, epoch, prev_hash, stored = row
        if stored is None and epoch is None and prev_hash is None:
            expected_prev, previous_seq = genesis(table_id), seq  # written before the chain
            continue
        if not (isinstance(stored, str) and isinstance(epoch, str) and isinstance(prev_hash, str)):
            return checked, ChainBreak(seq, "chain columns missing or not text")
        if seq != previous_seq + 1:
            expected_prev = None  # rows compacted below it: nothing to compare its link with
        if expected_prev is not None and prev_hash != expected_prev:
            return checked, ChainBreak(
                seq, f"prev_hash {prev_hash[:16]}... is not the hash of the event below it"
            )
        try:
            parsed = json.loads(body)
            if not isinstance(parsed, dict) or not isinstance(parsed.get("data"), dict):
                return checked, ChainBreak(seq, "the stored body is not an event")
            members = envelope_members(
                event_id=event_id,
                seq=seq,
                table_id=table_id,
                shoe_id=parsed["shoe_id"],
                hand=parsed["hand"],
                kind=parsed["kind"],
                ts=parsed["at"],
                source=parsed["source"],
                data=parsed["data"],
            )
            recomputed = event_hash(members, epoch, prev_hash)
        except (ValueError, TypeError, KeyError) as exc:
            return checked, ChainBreak(seq, f"the row cannot be hashed ({exc})")
        columns = {"kind": kind, "ts": float(at), "shoe_id": shoe_id, "hand": hand, "source": source}
        differing = [name for name, value in columns.items() if members[name] != value]
        if differing:
            return checked, ChainBreak(
                seq, f"its {', '.join(differing)} column(s) disagree with its stored body"
            )
        if recomputed != stored:
            return checked, ChainBreak(seq, "its hash does not match its content (the row was altered)")
        mismatch = sealed_mismatch(table_id, parsed["shoe_id"], parsed["data"])
        if mismatch is not None:  # a squeeze card: its sealed member is checked by its commitment
            return checked, ChainBreak(seq, mismatch)
        checked += 1
        expected_prev, previous_seq = stored, seq
    return checked, None


def _rows(db: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    cursor = 0
    while True:
        page = db.execute(
            "SELECT seq, event_id, kind, at, shoe_id, hand, source, body, epoch, prev_hash, hash "
            "FROM events WHERE seq > ? ORDER BY seq LIMIT 500",
            (cursor,),
        ).fetchall()
        if not page:
            return
        cursor = int(page[-1][0])
        yield from page
