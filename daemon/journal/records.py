"""What the journal stores and hands back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol


class JournalableEvent(Protocol):
    """What the journal needs from an event: the engine's ``Event`` fits it."""

    @property
    def kind(self) -> str: ...

    @property
    def at(self) -> float: ...

    @property
    def shoe_id(self) -> str | None: ...

    @property
    def hand(self) -> int | None: ...

    @property
    def source(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class DeliveryEvent:
    """An event raised by the delivery side (publisher, journal), not by the engine.

    It shares the table's ordered stream (it gets a ``seq``) so the server sees it in
    order, but it is not folded back into the engine on restart.
    """

    kind: str
    at: float
    data: dict[str, Any]
    shoe_id: str | None = None
    hand: int | None = None
    source: str = "system"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at": self.at,
            "shoe_id": self.shoe_id,
            "hand": self.hand,
            "source": self.source,
            "data": self.data,
        }


ORIGIN_ENGINE = "engine"
ORIGIN_DELIVERY = "delivery"


@dataclass(frozen=True, slots=True)
class JournaledEvent:
    """One event row: the event as the engine made it plus what the journal assigned."""

    seq: int
    event_id: str
    kind: str
    at: float
    shoe_id: str | None
    hand: int | None
    source: str
    data: dict[str, Any]
    origin: str
    journaled_at: float
    delivered_at: float | None = None
    dead_letter: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    """The event's full ``to_dict()`` form, for ``Event.from_dict`` when folding."""
    epoch: str | None = None
    """The id of the journal epoch that issued it (None: journaled before the chain)."""
    prev_hash: str | None = None
    """The chain hash of the event below it, or the table's genesis (:mod:`daemon.journal.chain`)."""
    hash: str | None = None
    """Its own chain hash (None: journaled before the chain)."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """How full the journal is against its limits, as seen at ``now`` (journal clock)."""

    size_bytes: int
    max_bytes: int
    undelivered: int
    max_undelivered: int
    oldest_undelivered_at: float | None
    """``journaled_at`` of the first undelivered event in ``seq`` order (None when none)."""
    max_undelivered_age_s: float
    now: float
    warn_fraction: float = 1.0
    """The fraction of a limit at which :attr:`warning` speaks (1.0: only when full)."""

    @property
    def oldest_undelivered_age_s(self) -> float | None:
        """How long ago the oldest undelivered event was journaled (None when none)."""
        if self.oldest_undelivered_at is None:
            return None
        return self.now - self.oldest_undelivered_at

    @property
    def full(self) -> bool:
        """True when any limit is reached: size, undelivered count or undelivered age."""
        return self.reason is not None

    @property
    def warning(self) -> str | None:
        """Which limit is at least ``warn_fraction`` reached, in words (the first of size,
        count, age), or None. Speaks before :attr:`reason` does, and while it does."""
        share = self.warn_fraction
        if self.size_bytes >= share * self.max_bytes:
            return (
                f"journal size {self.size_bytes} bytes is {self.size_bytes / self.max_bytes:.0%} "
                f"of the limit of {self.max_bytes}"
            )
        if self.undelivered >= share * self.max_undelivered:
            return (
                f"{self.undelivered} undelivered events are {self.undelivered / self.max_undelivered:.0%} "
                f"of the limit of {self.max_undelivered}"
            )
        age = self.oldest_undelivered_age_s
        if age is not None and age >= share * self.max_undelivered_age_s:
            return (
                f"oldest undelivered event is {age:.0f} s old, {age / self.max_undelivered_age_s:.0%} "
                f"of the age limit of {self.max_undelivered_age_s:.0f} s"
            )
        return None

    @property
    def reason(self) -> str | None:
        """Which limit is reached, in words (the first of size, count, age), or None."""
        if self.size_bytes >= self.max_bytes:
            return f"journal size {self.size_bytes} bytes reached the limit of {self.max_bytes}"
        if self.undelivered >= self.max_undelivered:
            return f"{self.undelivered} undelivered events reached the limit of {self.max_undelivered}"
        age = self.oldest_undelivered_age_s
        if age is not None and age >= self.max_undelivered_age_s:
            return (
                f"oldest undelivered event is {age:.0f} s old, reached the age limit of "
                f"{self.max_undelivered_age_s:.0f} s ({self.max_undelivered_age_s / 3600:.1f} h)"
            )
        return None


def event_from_row(row: tuple[Any, ...]) -> JournaledEvent:
    """A stored event from its row (columns seq, event_id, kind, at, shoe_id, hand, source,
    origin, body, journaled_at, delivered_at, dead_letter, epoch, prev_hash, hash)."""
    seq, event_id, kind, at, shoe_id, hand, source, origin, body, journaled_at, delivered_at, dead = row[:12]
    epoch, prev_hash, chain_hash = row[12:15]
    parsed: dict[str, Any] = json.loads(body)
    data = parsed.get("data")
    return JournaledEvent(
        seq=int(seq),
        event_id=str(event_id),
        kind=str(kind),
        at=float(at),
        shoe_id=shoe_id,
        hand=hand,
        source=str(source),
        data=data if isinstance(data, dict) else {},
        origin=str(origin),
        journaled_at=float(journaled_at),
        delivered_at=delivered_at,
        dead_letter=dead,
        body=parsed,
        epoch=epoch,
        prev_hash=prev_hash,
        hash=chain_hash,
    )
