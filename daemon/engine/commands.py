"""Validation of supervisor command arguments.

Each action takes a fixed set of JSON arguments; anything else (an unknown key, a
wrong type, a slot or card that does not parse) refuses the command with a reason
naming the argument. The engine then checks the command against the table state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.cards import Card, CardParseError
from common.slots import ROUND_SLOTS

ROUND_SLOT_NAMES: tuple[str, ...] = ROUND_SLOTS
CARD_SLOT_NAMES = (*ROUND_SLOT_NAMES, "indicator", "burn")

ACTIONS: dict[str, str] = {
    "new_shoe": "start a new shoe; args: shoe_id (optional text)",
    "void_round": "void a round; args: hand (optional: default the round in progress), reason, "
    "opening_burn (optional, true: the opening burn was forgotten and caught before round 1 completed, "
    "RULES.md shoe procedure: round 1's cards become burn cards and round 1 is dealt afresh)",
    "void_shoe": "void the shoe and every unfinished round in it; args: reason",
    "assign_card": "supply a card the reader did not deliver; args: card, slot (optional check), hand "
    "(optional: a held round)",
    "move_card": "move a card to an empty slot of a round; args: from, to, hand (optional)",
    "swap": "swap two cards of a round (args: a, b) or the Player and Banker boxes (args: sides=true); "
    "hand optional",
    "rearrange": "set a round's cards by slot (the Player/Banker cards re-arranged, missing cards "
    "supplied: RULES.md dealing mistake 5); args: cards {slot: card}, hand (optional)",
    "acknowledge_alert": "close an open alert; args: alert_id",
    "resolve_hold": "accept the engine's model of a held round; args: hand (optional)",
    "rescan_ack": "close the rescan-needed alert when no card is to be rescanned; no args",
    "super_round_die": "record the Super 98 die; args: value (1..faces), hand (optional)",
    "lock": "lock the shoe (betting time): the service sends it to the reader; no args",
    "unlock": "unlock the shoe: the service sends it to the reader; no args",
    "open_betting": "betting opens for the game server's next round (game_flow betting_window); args: "
    "round_id (the server's id: digits, optionally after a prefix, e.g. '1042' or 'T01-1042'), closes_at "
    "(optional: the announced close time, seconds since the Unix epoch)",
    "close_betting": "betting closes: the next cards are that round's; args: round_id (the open round's)",
    "cut_card": "the cut card came out (for a reader that cannot signal it): marks the last round; no args",
    "dealer_changed": "a dealer took the table (the rounds from the next one are theirs); args: dealer_id "
    "(1-64 of A-Z a-z 0-9 . _ : -, starting alphanumeric), name (optional: 1-64 letters, digits, spaces, "
    "_ . ' -, starting with a letter or digit)",
    "attest": "check the installed files against the package's signed manifest (done by the service once "
    "this is journaled; a passing check clears integrity_failed); no args",
    "reveal": "a squeeze table shows cards (table.reveal.order_source server): args: slots (a list of "
    "P1 P2 B1 B2 P3 B3, in table.reveal.order), hand (optional: the round in progress, else the oldest held "
    "one)",
    "remainder_count": "count the cards left in an ended shoe through the reader: step 'start', then the "
    "dealer runs every undealt card through it, then step 'finish' (the certificate is issued again, "
    "accounting for every card of every deck); args: step",
}
"""Every supervisor action the engine accepts, with its arguments."""

SERVICE_ACTIONS = frozenset({"lock", "unlock"})
"""Actions carried out on the reader itself: the engine accepts them (journaled, audited) and
emits ``reader_command_requested``; the service performs the I/O and feeds the reader's answer
back as a ``ReaderSignal`` (LOCKED/UNLOCKED, or COMMAND_REFUSED)."""

ROUND_ID = re.compile(r"^(?P<prefix>[A-Za-z0-9._:-]{0,46}?)(?P<number>[0-9]{1,18})$")
"""The accepted form of a game server round id: 1-64 characters of A-Z a-z 0-9 . _ : -, ending in
a decimal number (the round's sequence number); what precedes it is the id's prefix. The next
round's id has the same prefix and the next number (``T01-1042`` after ``T01-1041``)."""

_SHOE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_DEALER_ID = _SHOE_ID
_DEALER_NAME = re.compile(r"[^\W_][\w .'-]{0,63}")
"""A dealer's name (matched whole): 1-64 letters, digits, spaces, ``_ . ' -`` of any script, starting
with a letter or digit: no control, format or bidirectional characters, nothing read as markup."""


Effect = Callable[[], None]
"""What an accepted command does, run after its ``command_accepted`` reply."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A command refused: ``reason`` goes in its ``command_refused`` reply; ``alert``, when the floor
    must see the refusal too (a betting window out of order), raises that alert after the reply."""

    reason: str
    alert: Effect | None = None


Outcome = Effect | Refused
"""What a command handler gives: the effect of an accepted command, or its refusal."""


class ArgError(ValueError):
    """A command argument is missing, unknown or malformed."""


def check_keys(args: Mapping[str, object], allowed: set[str]) -> None:
    """Refuse arguments the action does not take."""
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ArgError(f"unknown argument(s) {', '.join(map(repr, unknown))}; accepted: {sorted(allowed)}")


def opt_int(args: Mapping[str, object], key: str, lo: int, hi: int) -> int | None:
    """An optional integer argument within lo..hi."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ArgError(f"argument {key!r} must be an integer {lo}..{hi}, got {value!r}")
    return value


def req_int(args: Mapping[str, object], key: str, lo: int, hi: int) -> int:
    value = opt_int(args, key, lo, hi)
    if value is None:
        raise ArgError(f"argument {key!r} is required")
    return value


def opt_text(args: Mapping[str, object], key: str, max_len: int = 200) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise ArgError(f"argument {key!r} must be text of at most {max_len} characters")
    return value


def opt_shoe_id(args: Mapping[str, object]) -> str | None:
    value = opt_text(args, "shoe_id", 64)
    if value is not None and not _SHOE_ID.match(value):
        raise ArgError("argument 'shoe_id' must be 1-64 of A-Z a-z 0-9 . _ : - (starting alphanumeric)")
    return value


def req_dealer(args: Mapping[str, object]) -> tuple[str, str | None]:
    """The ``dealer_changed`` arguments: the required ``dealer_id`` and the optional ``name``."""
    dealer_id = args.get("dealer_id")
    if not isinstance(dealer_id, str) or not _DEALER_ID.fullmatch(dealer_id):
        raise ArgError(
            "argument 'dealer_id' is required: 1-64 of A-Z a-z 0-9 . _ : - (starting alphanumeric), "
            f"got {_shown(dealer_id)}"
        )
    name = args.get("name")
    if name is not None and (not isinstance(name, str) or not _DEALER_NAME.fullmatch(name)):
        raise ArgError(
            "argument 'name' must be 1-64 letters, digits, spaces or _ . ' -, starting with a letter or "
            f"digit, got {_shown(name)}"
        )
    return dealer_id, name


def _shown(value: object) -> str:
    """A refused argument as the reason quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def req_card(args: Mapping[str, object], key: str) -> Card:
    value = args.get(key)
    if not isinstance(value, str):
        raise ArgError(f"argument {key!r} is required: a card code such as '8s'")
    try:
        return Card.parse(value)
    except CardParseError as exc:
        raise ArgError(f"argument {key!r}: {exc}") from None


def slot_arg(args: Mapping[str, object], key: str, allowed: tuple[str, ...], required: bool) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ArgError(f"argument {key!r} is required: one of {', '.join(allowed)}")
        return None
    if not isinstance(value, str) or value not in allowed:
        raise ArgError(f"argument {key!r} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def req_slot(args: Mapping[str, object], key: str, allowed: tuple[str, ...] = ROUND_SLOT_NAMES) -> str:
    value = slot_arg(args, key, allowed, True)
    assert value is not None
    return value


def opt_flag(args: Mapping[str, object], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise ArgError(f"argument {key!r} must be true or false")
    return value


def req_slot_cards(args: Mapping[str, object], key: str) -> dict[str, str]:
    """A ``{slot: card}`` object; cards are returned as canonical codes."""
    value = args.get(key)
    if not isinstance(value, dict) or not value:
        raise ArgError(f'argument {key!r} is required: an object {{slot: card}}, e.g. {{"P1": "8s"}}')
    out: dict[str, str] = {}
    for slot, text in value.items():
        if slot not in ROUND_SLOT_NAMES:
            raise ArgError(f"argument {key!r}: {slot!r} is not a slot ({', '.join(ROUND_SLOT_NAMES)})")
        if not isinstance(text, str):
            raise ArgError(f"argument {key!r}.{slot} must be a card code such as '8s'")
        try:
            out[slot] = Card.parse(text).code
        except CardParseError as exc:
            raise ArgError(f"argument {key!r}.{slot}: {exc}") from None
    return out


def req_round_id(args: Mapping[str, object]) -> str:
    """The required ``round_id`` argument, in the accepted form (:data:`ROUND_ID`)."""
    value = args.get("round_id")
    if not isinstance(value, str) or not ROUND_ID.match(value):
        raise ArgError(
            "argument 'round_id' is required: 1-64 of A-Z a-z 0-9 . _ : - ending in the round's number, "
            f"e.g. '1042' or 'T01-1042'; got {value!r}"
        )
    return value


def round_id_parts(round_id: str) -> tuple[str, int] | None:
    """``(prefix, number)`` of a round id in the accepted form, else None."""
    match = ROUND_ID.match(round_id)
    if match is None:
        return None
    return match["prefix"], int(match["number"])


def opt_time(args: Mapping[str, object], key: str) -> float | None:
    """An optional time argument: a finite number of seconds since the Unix epoch."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ArgError(f"argument {key!r} must be a time: seconds since the Unix epoch, got {value!r}")
    return float(value)
