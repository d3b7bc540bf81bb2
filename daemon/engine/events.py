"""Engine output: one validated fact about the table.

The journal assigns ``seq`` and ``event_id`` when it commits an event; the engine
never does. ``data`` is JSON-ready (str, int, float, bool, None, lists, dicts with
string keys) so ``Event.from_dict(json.loads(json.dumps(e.to_dict()))) == e``.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, NamedTuple


class EventKind(StrEnum):
    """What an event says happened (``README.md``, "Events", has each one's ``data``)."""

    SHOE_STARTED = "shoe_started"
    CARD_DEALT = "card_dealt"
    BETS_OFFERED = "bets_offered"
    ROUND_OPENED = "round_opened"
    ROUND_COMPLETED = "round_completed"
    ROUND_HELD = "round_held"
    HOLD_RESOLVED = "hold_resolved"
    ROUND_CORRECTED = "round_corrected"
    ROUND_VOIDED = "round_voided"
    CUT_CARD = "cut_card"
    LAST_ROUND = "last_round"
    SHOE_ENDED = "shoe_ended"
    SHOE_VOIDED = "shoe_voided"
    ALERT_RAISED = "alert_raised"
    ALERT_CLEARED = "alert_cleared"
    VERDICT_CHECKED = "verdict_checked"
    CARD_CONFIRMED = "card_confirmed"
    CARD_OUTSIDE_GAME = "card_outside_game"
    CARD_REFUSED = "card_refused"
    CARDS_REFUSED = "cards_refused"  # a summary of absorbed refused cards
    STORAGE_STATE = "storage_state"
    READ_HELD = "read_held"
    PULL_RELEASED = "pull_released"
    READER_STATUS = "reader_status"
    READER_COMMAND_REQUESTED = "reader_command_requested"
    DEVICE_CONNECTION = "device_connection"
    SUPER_ROUND_DIE = "super_round_die"
    COMMAND_ACCEPTED = "command_accepted"
    COMMAND_REFUSED = "command_refused"
    # game flow: the betting window and shoe procedure marks of slotless readers
    BETTING_OPENED = "betting_opened"
    BETTING_CLOSED = "betting_closed"
    SHOE_SIGNAL = "shoe_signal"
    # the table's clock synchronisation as the service reports it (``data.synchronised``, ``source``,
    # ``detail``), emitted when it changes; the clock gate refuses betting while it is lost
    CLOCK_STATUS = "clock_status"
    # the dealer on the table (``data.dealer_id``, ``name``, ``actor``): the supervisor command
    # ``dealer_changed``; the fold keeps it as ``TableState.dealer``, the pace reading attributes
    # each round to the dealer on the table when it starts
    DEALER_CHANGED = "dealer_changed"
    # squeeze tables (``table.reveal.mode: squeeze``): a slot's card and nonce, shown when revealed
    CARD_REVEALED = "card_revealed"
    # the shoe's audit (``shoe_audit.py``): the certificate at the shoe's end and after a remainder
    # count, the count's start and each card counted
    SHOE_CERTIFICATE = "shoe_certificate"
    REMAINDER_COUNT_STARTED = "remainder_count_started"
    REMAINDER_CARD = "remainder_card"


_KINDS: dict[str, EventKind] = {kind.value: kind for kind in EventKind}


class Event(NamedTuple):
    """A table event: what happened (``kind``), when (``at``), in which shoe and hand, and details.

    An immutable record (a named tuple: the engine builds one or two per card). ``kind`` is an
    :class:`EventKind` (a ``StrEnum``: it serialises as its string, so the stored form is the
    text it always was); ``from_dict`` refuses a kind the engine does not emit.
    """

    kind: EventKind
    at: float
    shoe_id: str | None
    hand: int | None
    source: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the journal and publisher wrap it in their envelope)."""
        return {
            "kind": self.kind,
            "at": self.at,
            "shoe_id": self.shoe_id,
            "hand": self.hand,
            "source": self.source,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, raw: object) -> Event:
        """Rebuild an event from ``to_dict()`` output; raise ValueError naming the bad field."""
        if not isinstance(raw, dict):
            raise ValueError(f"event must be an object, got {type(raw).__name__}")
        missing = [k for k in ("kind", "at", "shoe_id", "hand", "source", "data") if k not in raw]
        if missing:
            raise ValueError(f"event is missing field(s): {', '.join(missing)}")
        kind, at, shoe_id, hand, source, data = (
            raw["kind"],
            raw["at"],
            raw["shoe_id"],
            raw["hand"],
            raw["source"],
            raw["data"],
        )
        if not isinstance(kind, str) or kind not in _KINDS:
            raise ValueError(f"event field 'kind' must be one of the engine's event kinds, got {kind!r}")
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise ValueError("event field 'at' must be a finite number")
        if shoe_id is not None and not isinstance(shoe_id, str):
            raise ValueError("event field 'shoe_id' must be a string or null")
        if hand is not None and (isinstance(hand, bool) or not isinstance(hand, int) or hand < 1):
            raise ValueError("event field 'hand' must be a positive integer or null")
        if not isinstance(source, str):
            raise ValueError("event field 'source' must be a string")
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise ValueError("event field 'data' must be an object with string keys")
        return cls(kind=_KINDS[kind], at=float(at), shoe_id=shoe_id, hand=hand, source=source, data=data)


ROUND_BOUNDARY_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.ROUND_OPENED,
        EventKind.ROUND_COMPLETED,
        EventKind.ROUND_VOIDED,
        EventKind.SHOE_STARTED,
        EventKind.SHOE_ENDED,
        EventKind.SHOE_VOIDED,
    }
)
"""Event kinds after which the table's retained state is due at once (not after the interval)."""
