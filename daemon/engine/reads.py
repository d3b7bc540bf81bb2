"""Card reads as JSON-ready data, for events, held pulls and the fold.

A read held in a pull must survive a restart, so it is stored inside a
``read_held`` event and rebuilt from there.
"""

from __future__ import annotations

import math

from common.cards import Card
from common.inputs import CardRead, DeviceTarget, OutsideGameCard, ReadFailed, Source
from daemon.engine.payloads import ReadFields


def _finite(value: float | None) -> float | None:
    """Events are JSON: a NaN or infinite confidence is recorded as unknown."""
    return value if value is None or math.isfinite(value) else None


def read_fields(read: CardRead | ReadFailed) -> ReadFields:
    """The audit form of a read, as carried in events (``data["read"]``); its enums are
    ``StrEnum`` members, i.e. strings."""
    if isinstance(read, CardRead):
        fields: ReadFields = {
            "source": read.source,
            "device": read.device,
            "read_at": read.at,
            "raw": read.raw,
            "card": read.card.code,
            "position": read.position,
            "target": read.target,
            "transmission_id": read.transmission_id,
            "confidence": _finite(read.confidence),
        }
        if read.nonce is not None:
            fields["nonce"] = read.nonce
        return fields
    return {
        "source": read.source,
        "device": read.device,
        "read_at": read.at,
        "raw": read.raw,
        "card": None,
        "position": read.position,
        "failed": read.reason,
        "code": read.code,
    }


def outside_read_fields(inp: OutsideGameCard) -> ReadFields:
    """The audit form of a card drawn outside the game flow (same keys as a card read, plus ``mode``)."""
    return {
        "source": Source.READER,
        "device": inp.device,
        "read_at": inp.at,
        "raw": inp.raw,
        "card": inp.card.code,
        "position": None,
        "target": None,
        "transmission_id": inp.transmission_id,
        "confidence": None,
        "mode": inp.mode,
    }


def read_from_fields(fields: ReadFields) -> CardRead | ReadFailed:
    """Rebuild the input a ``read_fields`` dict came from."""
    source = Source(fields["source"])
    card = fields.get("card")
    if card is None:
        return ReadFailed(
            at=fields["read_at"],
            source=source,
            reason=fields.get("failed") or "cannot read",
            code=fields.get("code"),
            raw=fields.get("raw"),
            device=fields["device"],
            position=fields.get("position"),
        )
    target = fields.get("target")
    return CardRead(
        card=Card.parse(card),
        at=fields["read_at"],
        source=source,
        position=fields.get("position"),
        target=None if target is None else DeviceTarget(target),
        transmission_id=fields.get("transmission_id"),
        confidence=fields.get("confidence"),
        raw=fields.get("raw"),
        device=fields["device"],
        nonce=fields.get("nonce"),
    )
