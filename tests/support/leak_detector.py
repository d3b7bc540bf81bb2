"""Finds a squeeze table's hidden cards in what the table let out before their reveal.

Input: every message the broker carried, in arrival order (:class:`Captured`; what a view drew
after message *i* may be added with index *i*), the daemon's log
lines in order, and the truth from the table's own journal (:class:`HiddenCard`: each sealed
card, its slot, round and raw reader bytes). Run on a one-deck shoe, every card identity occurs
once in the shoe, so any encoding of a hidden card's identity before its ``card_revealed`` is a
leak, with no "maybe it was another card of that face":

* the card code (``8s``, ``Ts`` or ``10s`` for a ten), its symbol form (``8♠``), rank and suit in
  words (``eight of spades``, ``8 of spades``), each only as a whole token (a commitment's hex
  digits are not a card);
* the raw bytes the reader sent for it (``read.raw``, e.g. ``"43 30 36 0d 0a"``, with or without
  spaces) and their printable text (``C06``);
* what implies the cards: in the round's own events and retained state before its last reveal,
  a total, a winner, a natural, a pair or the third-card decision (``player_draws``,
  ``banker_draws``; ``next_slot`` once four cards are dealt).

:func:`find_leaks` returns each leak as a line naming the message, the card and the encoding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

RANK_WORDS = {
    "A": ("ace",), "2": ("two", "2"), "3": ("three", "3"), "4": ("four", "4"), "5": ("five", "5"),
    "6": ("six", "6"), "7": ("seven", "7"), "8": ("eight", "8"), "9": ("nine", "9"),
    "T": ("ten", "10"), "J": ("jack",), "Q": ("queen",), "K": ("king",),
}  # fmt: skip
SUIT_WORDS = {"c": "clubs", "d": "diamonds", "h": "hearts", "s": "spades"}
SUIT_SYMBOLS = {"c": "♣", "d": "♦", "h": "♥", "s": "♠"}
IMPLYING_KEYS = frozenset(
    {"player_total", "banker_total", "totals", "winner", "outcome", "naturals", "natural", "pairs",
     "player_pair", "banker_pair", "player_draws", "banker_draws"}
)  # fmt: skip
"""Members that tell a round's cards (or their points) before they are all revealed."""
_RAW_MEMBER = re.compile(r'"raw"\s*:\s*"[^"]*"')
NEVER = 2**62
"""The position of a reveal that never came."""


@dataclass(frozen=True, slots=True)
class Captured:
    """One message the broker carried (or one log line), in arrival order."""

    index: int
    topic: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class HiddenCard:
    """A card the table dealt face down (from its journal)."""

    shoe_id: str
    hand: int
    slot: str
    card: str
    raw: str | None


def encodings(card: str, raw: str | None) -> list[tuple[str, re.Pattern[str]]]:
    """Every way a message could name ``card`` (or its read), as (name, pattern)."""
    rank, suit = card[0], card[1]
    ranks = [rank] + (["10"] if rank == "T" else [])
    out: list[tuple[str, re.Pattern[str]]] = []
    for r in ranks:
        # as the product writes it: not "ts" or "as" (words), nor "5H" (the monitor's "hand 5 held")
        out.append((f"code {r}{suit}", _token(f"{r}{suit}")))
        out.append((f"symbol {r}{SUIT_SYMBOLS[suit]}", _token(f"{r}{SUIT_SYMBOLS[suit]}")))
    for word in RANK_WORDS[rank]:
        out.append(
            (f"words {word} of {SUIT_WORDS[suit]}", _token(f"{word} of {SUIT_WORDS[suit]}", re.IGNORECASE))
        )
    if raw:
        spaced = raw.strip().lower()
        out.append((f"raw {spaced}", re.compile(re.escape(spaced), re.IGNORECASE)))
        out.append((f"raw {spaced.replace(' ', '')}", _token(spaced.replace(" ", ""), re.IGNORECASE)))
        text = _printable(spaced)
        if text is not None:
            out.append((f"raw text {text}", _token(text)))
    return out


def _token(text: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(rf"(?<![0-9A-Za-z]){re.escape(text)}(?![0-9A-Za-z])", flags)


def _printable(hex_text: str) -> str | None:
    """The printable ASCII run of raw bytes (``C06`` of ``43 30 36 0d 0a``), when 3+ characters."""
    try:
        data = bytes.fromhex(hex_text)
    except ValueError:
        return None
    text = "".join(chr(b) for b in data if 0x20 < b < 0x7F)
    return text if len(text) >= 3 else None


def reveal_positions(messages: Iterable[Captured], events_topic: str) -> dict[tuple[str, int, str], int]:
    """Where each slot's ``card_revealed`` first arrived: (shoe, round, slot) -> message index."""
    out: dict[tuple[str, int, str], int] = {}
    for message in messages:
        if message.topic != events_topic:
            continue
        env = _json(message.payload)
        if not isinstance(env, dict) or env.get("kind") != "card_revealed":
            continue
        data = env.get("data") or {}
        key = (str(env.get("shoe_id")), int(data.get("round", -1)), str(data.get("slot")))
        out.setdefault(key, message.index)
    return out


def as_of_positions(messages: Sequence[Captured], events_topic: str) -> Callable[[Captured], int]:
    """Where a capture stands in the event stream. A retained state message says it reflects every
    event up to its ``last_seq`` (the contract), and it may reach a subscriber before the publisher
    has sent those events: it is judged as of the event with that seq, so a card it names that was
    revealed at or before ``last_seq`` is no leak and one revealed after is. What a view drew after
    a message stands where the latest state it was drawn from stands; anything else where it came."""
    seq_at: dict[int, int] = {}
    for message in messages:
        env = _json(message.payload) if message.topic == events_topic else None
        if isinstance(env, dict) and isinstance(env.get("seq"), int):
            seq_at.setdefault(env["seq"], message.index)
    state_topic = events_topic.rsplit("/", 1)[0] + "/state"
    state_at: dict[int, int] = {}
    for message in messages:
        body = _json(message.payload) if message.topic == state_topic else None
        last_seq = body.get("last_seq") if isinstance(body, dict) else None
        if isinstance(last_seq, int) and last_seq in seq_at:
            state_at[message.index] = max(message.index, seq_at[last_seq])
    drawn_at: dict[int, int] = {}
    latest = -1
    for index in sorted({m.index for m in messages}):
        latest = max(latest, state_at.get(index, -1))
        drawn_at[index] = max(index, latest)

    def position(message: Captured) -> int:
        if message.topic == state_topic:
            return state_at.get(message.index, message.index)
        if not message.topic.startswith("baccarat/"):  # a view drawn after that message
            return drawn_at.get(message.index, message.index)
        return message.index

    return position


def voided_positions(messages: Iterable[Captured], events_topic: str) -> dict[tuple[str, int], int]:
    """Where each round's ``round_voided`` arrived: (shoe, hand) -> message index."""
    out: dict[tuple[str, int], int] = {}
    for message in messages:
        env = _json(message.payload) if message.topic == events_topic else None
        if isinstance(env, dict) and env.get("kind") == "round_voided":
            out.setdefault(
                (str(env.get("shoe_id")), _int((env.get("data") or {}).get("hand"))), message.index
            )
    return out


def find_leaks(
    messages: list[Captured],
    hidden: list[HiddenCard],
    events_topic: str,
    *,
    log_lines: Sequence[Captured] = (),
    public: Sequence[str] = (),
) -> list[str]:
    """Every place a hidden card (or what implies it) shows before its reveal. The auditors'
    topic (``.../audit``, beside ``events``) may name the cards of a round voided before.

    In a shoe of several decks a face can be dealt twice: once another card of the same face is
    public (revealed, or in ``public``: the indicator, turned up for all), a mention of that face
    may be the public card, so from then on the hidden one is checked by its raw bytes and its
    round's results only (:func:`checkable` counts the cards checked by name throughout)."""
    revealed_at = reveal_positions(messages, events_topic)
    voided_at = voided_positions(messages, events_topic)
    as_of = as_of_positions(messages, events_topic)
    audit_topic = events_topic.rsplit("/", 1)[0] + "/audit"
    leaks: list[str] = []
    for card in hidden:
        until = revealed_at.get((card.shoe_id, card.hand, card.slot), NEVER)
        voided = voided_at.get((card.shoe_id, card.hand), NEVER)
        ambiguous = _same_face_public_at(card, hidden, revealed_at, public)
        patterns = encodings(card.card, card.raw)
        raw_only = [(name, p) for name, p in patterns if name.startswith("raw")]
        for message in messages:
            at = as_of(message)
            if at >= until or (message.topic == audit_topic and message.index > voided):
                continue
            leaks.extend(_named(message, card, raw_only if at >= ambiguous else patterns))
    leaks.extend(_implied(messages, hidden, revealed_at, events_topic, as_of))
    leaks.extend(_in_logs(log_lines, hidden, public))
    return leaks


def _same_face_public_at(
    card: HiddenCard,
    hidden: Sequence[HiddenCard],
    revealed_at: dict[tuple[str, int, str], int],
    public: Sequence[str],
) -> int:
    """From which message on another card of ``card``'s face is public (NEVER: none is)."""
    if card.card in public:
        return 0
    return min(
        (
            revealed_at.get((other.shoe_id, other.hand, other.slot), NEVER)
            for other in hidden
            if other.card == card.card and other is not card
        ),
        default=NEVER,
    )


def checkable(hidden: Sequence[HiddenCard], public: Sequence[str] = ()) -> int:
    """Cards whose face no other card of the shoe (nor a public one) shares: checked by name
    throughout."""
    faces = [c.card for c in hidden] + list(public)
    return sum(1 for c in hidden if faces.count(c.card) == 1)


def _named(message: Captured, card: HiddenCard, patterns: list[tuple[str, re.Pattern[str]]]) -> Iterator[str]:
    text = message.payload.decode("utf-8", errors="replace")
    # a device's raw bytes in hex ("05 4c 65 81") are searched for the card's own bytes only: a
    # byte that reads like a card code ("4c") is no card
    without_raw = _RAW_MEMBER.sub('"raw": ""', text)
    for name, pattern in patterns:
        if pattern.search(text if name.startswith("raw") else without_raw):
            yield (
                f"#{message.index} {message.topic}: {name} names {card.card} "
                f"(shoe {card.shoe_id} round {card.hand} {card.slot}) before its reveal"
            )
            return


def _implied(
    messages: list[Captured],
    hidden: list[HiddenCard],
    revealed_at: dict[tuple[str, int, str], int],
    events_topic: str,
    as_of: Callable[[Captured], int],
) -> Iterator[str]:
    """A round's totals, result or third-card decision before its last hidden card is revealed."""
    last: dict[tuple[str, int], int] = {}
    for card in hidden:
        if card.slot == "burn":
            continue
        key = (card.shoe_id, card.hand)
        at = revealed_at.get((card.shoe_id, card.hand, card.slot), NEVER)
        last[key] = max(last.get(key, 0), at)
    for message in messages:
        body = _json(message.payload)
        if not isinstance(body, dict):
            continue
        at = as_of(message)
        for (shoe_id, hand), until in last.items():
            if at >= until:
                continue
            for where in _round_parts(body, message.topic == events_topic, shoe_id, hand):
                found = _implying_member(where)
                if found is not None:
                    where_said = f"#{message.index} {message.topic}"
                    yield f"{where_said}: {found} of shoe {shoe_id} round {hand} before its reveal"
                    break


def _round_parts(body: dict[str, Any], is_event: bool, shoe_id: str, hand: int) -> Iterator[Any]:
    """The parts of a message about that round: an event of it, the state's round or held round."""
    if is_event:
        data = body.get("data") or {}
        of_round = body.get("hand") == hand or data.get("round") == hand
        if body.get("shoe_id") == shoe_id and of_round and body.get("kind") != "card_revealed":
            yield data
        return
    state = body.get("state")
    if not isinstance(state, dict) or (state.get("shoe") or {}).get("shoe_id") != shoe_id:
        return
    for rnd in [state.get("round"), *(state.get("held_rounds") or [])]:
        if isinstance(rnd, dict) and rnd.get("hand") == hand:
            yield rnd


def _implying_member(part: Any) -> str | None:
    """A member (at any depth: an alert's details, a device's verdict) that tells the round's
    cards or result, or the third-card decision taken on hidden cards."""
    if isinstance(part, list):
        return next((found for item in part if (found := _implying_member(item)) is not None), None)
    if not isinstance(part, dict):
        return None
    for key, value in part.items():
        if key in IMPLYING_KEYS and value not in (None, False, [], {}, [None, None]):
            return f"{key}={json.dumps(value)[:60]}"
    cards = part.get("cards")
    if (
        part.get("next_slot") is not None
        and isinstance(cards, dict)
        and len(cards) >= 4
        and None in cards.values()
    ):
        return f"next_slot={part['next_slot']} (the third-card rule on hidden cards)"
    return next((found for value in part.values() if (found := _implying_member(value)) is not None), None)


def _in_logs(lines: Sequence[Captured], hidden: list[HiddenCard], public: Sequence[str]) -> Iterator[str]:
    """A hidden card in a log line before the line that logs its ``card_revealed``."""
    revealed: dict[tuple[str, int, str], int] = {}
    for line in lines:
        body = _json(line.payload)
        # the daemon logs each event as one line: its kind as "event", its data's members beside it
        if isinstance(body, dict) and body.get("event") == "card_revealed":
            key = (str(body.get("shoe_id")), _int(body.get("round")), str(body.get("slot")))
            revealed.setdefault(key, line.index)
    for card in hidden:
        until = revealed.get((card.shoe_id, card.hand, card.slot), NEVER)
        ambiguous = _same_face_public_at(card, hidden, revealed, public)
        patterns = encodings(card.card, card.raw)
        raw_only = [(name, p) for name, p in patterns if name.startswith("raw")]
        for line in lines:
            if line.index < until:
                for leak in _named(line, card, raw_only if line.index >= ambiguous else patterns):
                    yield "log " + leak


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
