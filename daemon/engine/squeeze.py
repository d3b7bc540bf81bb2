"""Squeeze tables: what is sealed in an event, and the card commitment (``README.md``, "Squeeze
tables").

On a squeeze table (``table.reveal.mode: squeeze``) every card identity the engine would put in an
event (a member named for it, or any member whose value is or holds a card code), and what would
tell a hidden face (a verdict, the slot a round needs next, an outcome), is moved into the event's
one sealed member, ``data["sealed"]``.
The journal keeps the whole event; :func:`public_data` (the one projection) drops the sealed member
before anything leaves the table PC: the event chain's hash, the published envelope, the logs. The
fold sees the event whole (:func:`unsealed`), so the engine checks the hidden cards as usual.

The commitment of a card (scheme ``sha256-nonce-v1``) is the lowercase hex SHA-256 of the UTF-8
bytes of ``"baccarat-edge card commitment v1\\n" + table_id + "\\n" + shoe_id + "\\n" + str(hand) +
"\\n" + slot + "\\n" + card + "\\n" + nonce``; the nonce is 16 bytes from the OS's random source as 32
lowercase hex characters, made by the service and passed in with the read.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from daemon.engine.events import EventKind

if TYPE_CHECKING:
    from daemon.engine.rounds import RoundState
    from daemon.engine.state import TableState

SEALED = "sealed"
"""The member of an event's ``data`` that holds what only the journal may keep."""
SCHEME = "sha256-nonce-v1"
"""The commitment scheme's id, published beside each commitment."""
COMMITMENT_PREFIX = "baccarat-edge card commitment v1\n"
NONCE = re.compile(r"^[0-9a-f]{32}$")
"""A nonce as the engine accepts it: 16 bytes as lowercase hex."""

_CARD_KEYS = (
    *("card", "read", "reads", "cards", "codes", "held", "released"),
    *("verdict", "needed_slot", "engine", "outcome", "winner", "totals"),
)
"""The ``data`` members that can name a card or tell a hidden face (an event's own, and an alert's
``details``); any other member holding a card code is sealed too (:func:`names_card`)."""
_CARD_CODE = re.compile(r"^[A2-9TJQK][cdhs]$")
_PUBLIC_KINDS = frozenset({EventKind.CARD_REVEALED, EventKind.ROUND_COMPLETED})
"""Kinds whose cards are public by the time they are emitted (a round completes once revealed)."""


def commitment(*, table_id: str, shoe_id: str, hand: int, slot: str, card: str, nonce: str) -> str:
    """The commitment to ``card`` at ``slot`` of round ``hand`` of ``shoe_id`` on ``table_id``."""
    text = f"{COMMITMENT_PREFIX}{table_id}\n{shoe_id}\n{hand}\n{slot}\n{card}\n{nonce}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def public_data(data: dict[str, Any]) -> dict[str, Any]:
    """An event's ``data`` as it may leave the journal: without its sealed member (the same
    object when it has none, so an open table's events are untouched)."""
    if SEALED not in data:
        return data
    return {key: value for key, value in data.items() if key != SEALED}


def unsealed(data: dict[str, Any]) -> dict[str, Any]:
    """An event's ``data`` as the fold reads it: the sealed members put back in their places."""
    sealed = data.get(SEALED)
    if sealed is None:
        return data
    whole = {key: value for key, value in data.items() if key != SEALED}
    for key, value in sealed.items():
        if key == "details" and isinstance(value, dict):
            whole["details"] = {**whole.get("details", {}), **value}
        else:
            whole[key] = value
    return whole


def seal(kind: EventKind, data: dict[str, Any], revealed: dict[str, str | None] | None) -> dict[str, Any]:
    """``data`` with every member that names a card moved into its sealed member.

    ``revealed``: the round's cards as a player sees them (``None`` for an unrevealed slot), put in
    the place of a ``cards`` map so the published event keeps its shape. Already sealed data (a
    squeeze ``card_dealt``) and the kinds that are public by construction are returned as they are.
    """
    if kind in _PUBLIC_KINDS or SEALED in data:
        return data
    if kind is EventKind.CARD_DEALT and data.get("slot") == "indicator":
        return data  # the indicator is turned face up for all to see (it counts the burn)
    hidden: dict[str, Any] = {}
    public: dict[str, Any] = {}
    for key, value in data.items():
        if key == "details" and isinstance(value, dict):
            inner = {k: v for k, v in value.items() if (k in _CARD_KEYS and v is not None) or names_card(v)}
            public[key] = {k: v for k, v in value.items() if k not in inner}
            if inner:
                hidden["details"] = inner
        elif (key in _CARD_KEYS and value is not None) or names_card(value):
            hidden[key] = value
            if key == "cards" and isinstance(value, dict) and revealed is not None:
                public[key] = {slot: revealed.get(slot) for slot in value}
        else:
            public[key] = value
    if hidden:
        public[SEALED] = hidden
    return public


def names_card(value: object) -> bool:
    """Whether ``value`` is, or holds anywhere inside it, a card code (``8s``): the catch-all that
    seals a member whatever its name (``reader_card``, ``camera_card``, a list of refused cards)."""
    if isinstance(value, str):
        return _CARD_CODE.match(value) is not None
    if isinstance(value, dict):
        return any(names_card(v) or names_card(k) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(names_card(v) for v in value)
    return False


def sealed_card(data: dict[str, Any], table_id: str, shoe_id: str, hand: int) -> dict[str, Any]:
    """A squeeze ``card_dealt``'s data: the card, its read and its nonce sealed, its commitment
    (bound to the table, shoe, round and slot) and scheme public."""
    read = data.get("read")
    nonce = None if read is None else read.get("nonce")
    assert nonce is not None, "a squeeze table's card is placed only from a read with a nonce"
    hidden = {"card": data["card"], "nonce": nonce}
    public = {key: value for key, value in data.items() if key not in ("card", "read")}
    if read is not None:
        hidden["read"] = read
    public["round"] = hand
    public["commitment"] = commitment(
        table_id=table_id, shoe_id=shoe_id, hand=hand, slot=str(data["slot"]), card=data["card"], nonce=nonce
    )
    public["scheme"] = SCHEME
    public[SEALED] = hidden
    return public


def unrevealed(st: TableState, rnd: RoundState) -> list[str]:
    """The slots of ``rnd`` dealt and not yet revealed (a squeeze table's round)."""
    sealed = st.sealed_slots
    return [
        slot
        for slot in rnd.cards
        if (entry := sealed.get(f"{rnd.hand}/{slot}")) is not None and entry["revealed_at"] is None
    ]


def shown_cards(st: TableState, rnd: RoundState) -> dict[str, str | None]:
    """A squeeze round's cards as a player sees them: ``None`` for a slot not yet revealed."""
    hidden = set(unrevealed(st, rnd))
    return {slot: (None if slot in hidden else card) for slot, card in rnd.cards.items()}


def with_audit(st: TableState, data: dict[str, Any]) -> dict[str, Any]:
    """A squeeze ``round_voided``'s data with its unrevealed cards, nonces and commitments in its
    sealed ``audit`` member: the publisher shows them on the auditors' topic only."""
    hand = data["hand"]
    rnd = st.round_for(hand)
    sealed = data.get(SEALED)
    if rnd is None or sealed is None:
        return data
    audit = {}
    for slot in unrevealed(st, rnd):
        entry = st.sealed_slots[f"{hand}/{slot}"]
        audit[slot] = {"card": rnd.cards[slot], "nonce": entry["nonce"], "commitment": entry["commitment"]}
    if not audit:
        return data
    return {**data, SEALED: {**sealed, "audit": audit}}
