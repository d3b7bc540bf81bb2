"""The JSON envelope every event travels in, and the other payloads the table publishes.

Event envelope (``schema_version`` 1)::

    {"schema_version": 1, "event_id": "<uuid>", "seq": 42, "table_id": "T01",
     "shoe_id": "...", "hand": 7, "kind": "card", "ts": 1764423000.125,
     "published_at": 1764423000.431, "source": "reader", "data": {...},
     "epoch": "<uuid>", "prev_hash": "<hex>", "hash": "<hex>", "sig": "<hex>"}

``ts`` is when the event happened (seconds since the Unix epoch, as the engine was told),
``published_at`` when this copy was sent (changes on republish, so it is not signed).
``sig`` is present when the table has an events key (see :mod:`daemon.mqtt.signing`).
``epoch``, ``prev_hash`` and ``hash`` chain the event to the one before it
(:mod:`daemon.journal.chain`); events journaled before the chain have none.

On the wire (:func:`event_payload`) a signed envelope is the RFC 8785 form of its signed
members (the bytes the signature covers) with ``published_at`` and ``sig`` appended as its
last two members: one serialisation per event instead of two, and a verifier that wants
to can check the signature against the payload's own bytes. Numbers therefore appear in
their ECMAScript form (``-1.0`` as ``-1``, ``1e-05`` as ``0.00001``), the same values.
"""

from __future__ import annotations

import json
from typing import Any

from daemon.journal.chain import ENVELOPE_SCHEMA_VERSION, envelope_members
from daemon.journal.records import JournaledEvent
from daemon.mqtt.canonical import canonical_json
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import SIGNATURE_FIELD, UNSIGNED_EVENT_FIELDS, sign, sign_bytes

SCHEMA_VERSION = ENVELOPE_SCHEMA_VERSION


def event_envelope(
    event: JournaledEvent, table_id: str, published_at: float, key: Secret | None
) -> dict[str, Any]:
    """The envelope of one journaled event, signed when ``key`` is given."""
    envelope = _signed_event_members(event, table_id)
    envelope["published_at"] = published_at
    if key is not None:
        envelope[SIGNATURE_FIELD] = sign(envelope, key, UNSIGNED_EVENT_FIELDS)
    return envelope


def event_payload(event: JournaledEvent, table_id: str, published_at: float, key: Secret | None) -> bytes:
    """Wire bytes of one event's envelope: the same members and values as
    ``encode(event_envelope(...))``; signed ones are laid out as the module docstring says.
    Raises ValueError (:class:`~daemon.mqtt.canonical.CanonicalJsonError`) for a value
    without a JSON form."""
    if key is None:
        return encode(event_envelope(event, table_id, published_at, None))
    signed = canonical_json(_signed_event_members(event, table_id))  # an object: ends with "}"
    published = _NUMBER.encode(published_at)
    tail = f',"published_at":{published},"{SIGNATURE_FIELD}":"{sign_bytes(signed, key)}"}}'
    return signed[:-1] + tail.encode("ascii")


def _signed_event_members(event: JournaledEvent, table_id: str) -> dict[str, Any]:
    """Every envelope member the signature covers (all but ``published_at`` and ``sig``): with
    the chain members ``epoch``, ``prev_hash`` and ``hash`` for every event journaled with them
    (:mod:`daemon.journal.chain`; the hash covers the others)."""
    members = envelope_members(
        event_id=event.event_id,
        seq=event.seq,
        table_id=table_id,
        shoe_id=event.shoe_id,
        hand=event.hand,
        kind=event.kind,
        ts=event.at,
        source=event.source,
        data=event.data,
    )
    if event.hash is not None:
        members["epoch"] = event.epoch
        members["prev_hash"] = event.prev_hash
        members["hash"] = event.hash
    return members


_NUMBER = json.JSONEncoder(allow_nan=False)


def signed_message(body: dict[str, Any], key: Secret | None) -> dict[str, Any]:
    """``body`` plus ``schema_version`` and, with a key, its signature (nothing unsigned)."""
    message = {"schema_version": SCHEMA_VERSION, **body}
    if key is not None:
        message[SIGNATURE_FIELD] = sign(message, key)
    return message


def encode(message: dict[str, Any]) -> bytes:
    """Wire bytes of a payload: compact UTF-8 JSON (NaN/Infinity refused)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
