"""The JSON envelope every event travels in, and the other payloads the table publishes.

Event envelope (``schema_version`` 1)::

    {"schema_version": 1, "event_id": "<uuid>", "seq": 42, "table_id": "T01",
     "shoe_id": "...", "hand": 7, "kind": "card", "ts": 1764423000.125,
     "published_at": 1764423000.431, "source": "reader", "data": {...}, "sig": "<hex>"}

``ts`` is when the event happened (seconds since the Unix epoch, as the engine was told),
``published_at`` when this copy was sent (changes on republish, so it is not signed).
``sig`` is present when the table has an events key (see :mod:`daemon.mqtt.signing`).
"""

from __future__ import annotations

import json
from typing import Any

from daemon.journal.records import JournaledEvent
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import SIGNATURE_FIELD, UNSIGNED_EVENT_FIELDS, sign

SCHEMA_VERSION = 1


def event_envelope(
    event: JournaledEvent, table_id: str, published_at: float, key: Secret | None
) -> dict[str, Any]:
    """The envelope of one journaled event, signed when ``key`` is given."""
    envelope: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "event_id": event.event_id,
        "seq": event.seq,
        "table_id": table_id,
        "shoe_id": event.shoe_id,
        "hand": event.hand,
        "kind": event.kind,
        "ts": event.at,
        "published_at": published_at,
        "source": event.source,
        "data": event.data,
    }
    if key is not None:
        envelope[SIGNATURE_FIELD] = sign(envelope, key, UNSIGNED_EVENT_FIELDS)
    return envelope


def signed_message(body: dict[str, Any], key: Secret | None) -> dict[str, Any]:
    """``body`` plus ``schema_version`` and, with a key, its signature (nothing unsigned)."""
    message = {"schema_version": SCHEMA_VERSION, **body}
    if key is not None:
        message[SIGNATURE_FIELD] = sign(message, key)
    return message


def encode(message: dict[str, Any]) -> bytes:
    """Wire bytes of a payload: compact UTF-8 JSON (NaN/Infinity refused)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
