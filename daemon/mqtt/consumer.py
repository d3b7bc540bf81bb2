"""The reference consumer logic: verify, deduplicate by ``event_id``, detect ``seq`` gaps.

This is what the game server has to do with the ``events`` topic, written once so the
``tail`` command, the tests and the benchmarks share it. It holds no connection: feed it
payloads (:meth:`EventConsumer.feed`) from any MQTT client.

Rules (also in ``daemon/mqtt/README.md``):

* A payload that is not a valid envelope, is for another table, or whose signature does not
  verify is **rejected** and does not advance anything. With a key, every event must carry a
  signature that verifies (a stripped signature is rejected); without one, signatures cannot
  be checked (``require_signature`` then rejects everything).
* An ``event_id`` already seen with the same content (every signed field) is a **duplicate**
  (at-least-once delivery): drop it. The same ``event_id`` with other content is a
  **conflict**: a table never issues one id twice (every start of the table is a new journal
  epoch, so no restore brings an id back), so this is reported, never dropped as a copy.
* ``seq`` is gapless per table. A ``seq`` above the next expected one opens a **gap** for the
  seqs in between; a late arrival fills it. A dead-letter alert (``alert_raised`` with code
  ``mqtt_dead_letter``) names a ``seq`` that will never arrive: that gap is **explained**.
* A new ``seq`` with a known ``event_id``'s seq but a different id is a **conflict**
  (e.g. the table's journal was rolled back or replaced): report it, never merge silently.
* The chain members ``epoch``, ``prev_hash`` and ``hash``, when present, must be strings (all
  three or none); checking the links is the ordered consumer's job
  (:mod:`daemon.mqtt.ordered_consumer`).
* A squeeze table's ``card_revealed`` is checked against the commitment its ``card_dealt``
  published (:mod:`daemon.mqtt.reveal_check`): a reveal that fails is still a new event (it was
  signed by the table), but its verdict names the problem and it is counted in
  ``stats.reveal_problems``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from daemon.alerts import AlertCode
from daemon.mqtt.envelope import SCHEMA_VERSION
from daemon.mqtt.reveal_check import RevealChecker, RevealVerdict
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign_bytes, signing_bytes

_CHAIN = ("epoch", "prev_hash", "hash")

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema_version": int,
    "event_id": str,
    "seq": int,
    "table_id": str,
    "kind": str,
    "ts": (int, float),
    "source": str,
    "data": dict,
}


class Verdict(Enum):
    NEW = "new"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    CONFLICT = "conflict"
    LOST = "lost"
    """An event of history the table lost in a rollback it announced (the ordered consumer)."""


@dataclass(frozen=True, slots=True)
class Received:
    """What one payload turned out to be."""

    verdict: Verdict
    envelope: dict[str, Any] | None = None
    reason: str | None = None
    new_gaps: tuple[int, ...] = ()
    filled_gap: bool = False
    reveal: RevealVerdict | None = None
    """The check of a squeeze table's ``card_revealed`` against its commitment (None: another kind)."""


@dataclass
class ConsumerStats:
    new: int = 0
    duplicates: int = 0
    rejected: int = 0
    conflicts: int = 0
    out_of_order: int = 0
    lost_history: int = 0
    reveal_problems: int = 0
    """``card_revealed`` events that failed the check against their commitment."""


@dataclass
class EventConsumer:
    """Dedup/gap/verify state for one table's event stream.

    With a ``key`` every event must be signed with it. ``require_signature`` without a key
    rejects every event (a consumer configured to verify but missing its key). ``remember``
    bounds the ``event_id`` memory.
    """

    table_id: str
    key: Secret | None = None
    require_signature: bool = False
    remember: int = 1_000_000
    stats: ConsumerStats = field(default_factory=ConsumerStats)
    highest_seq: int = 0
    missing: set[int] = field(default_factory=set)
    explained: dict[int, str] = field(default_factory=dict)
    _ids: OrderedDict[str, tuple[int, bytes]] = field(default_factory=OrderedDict)
    """event_id -> (seq, digest of the signed content), oldest first."""
    _seqs: dict[int, str] = field(default_factory=dict)
    reveals: RevealChecker = field(init=False)
    """The squeeze reveal check (every new event goes through it, in arrival order)."""

    def __post_init__(self) -> None:
        self.reveals = RevealChecker(self.table_id)

    def feed(self, payload: bytes | str | dict[str, Any]) -> Received:
        """Classify one ``events`` payload and update the state."""
        envelope, problem, signed = parse_signed_event(
            payload, self.table_id, self.key, self.require_signature
        )
        if envelope is None:
            self.stats.rejected += 1
            return Received(Verdict.REJECTED, reason=problem)
        event_id: str = envelope["event_id"]
        seq: int = envelope["seq"]
        digest = hashlib.sha256(signed).digest()
        seen = self._ids.get(event_id)
        if seen is not None:
            if seen[1] != digest:
                self.stats.conflicts += 1
                return Received(
                    Verdict.CONFLICT,
                    envelope,
                    reason=f"event_id {event_id} already arrived (seq {seen[0]}) with other content",
                )
            self.stats.duplicates += 1
            return Received(Verdict.DUPLICATE, envelope)
        known = self._seqs.get(seq)
        if known is not None and known != event_id:
            self.stats.conflicts += 1
            return Received(
                Verdict.CONFLICT, envelope, reason=f"seq {seq} already arrived with event_id {known}"
            )
        self._remember(event_id, seq, digest)
        self.stats.new += 1
        new_gaps: tuple[int, ...] = ()
        filled = False
        if seq > self.highest_seq:
            new_gaps = tuple(range(self.highest_seq + 1, seq))
            self.missing.update(new_gaps)
            self.highest_seq = seq
        else:
            filled = seq in self.missing
            self.missing.discard(seq)
            self.stats.out_of_order += 1
        self._note_dead_letter(envelope)
        reveal = self.reveals.observe(envelope)
        if reveal is not None and not reveal.ok:
            self.stats.reveal_problems += 1
        return Received(Verdict.NEW, envelope, new_gaps=new_gaps, filled_gap=filled, reveal=reveal)

    @property
    def unexplained_gaps(self) -> list[int]:
        """Seqs known to be missing with no dead-letter alert explaining them."""
        return sorted(s for s in self.missing if s not in self.explained)

    def _note_dead_letter(self, envelope: dict[str, Any]) -> None:
        data = envelope["data"]
        if envelope["kind"] == "alert_raised" and data.get("code") == AlertCode.MQTT_DEAD_LETTER:
            lost = data.get("seq")
            if isinstance(lost, int):
                self.explained[lost] = str(data.get("message", "dead-lettered"))

    def _remember(self, event_id: str, seq: int, digest: bytes) -> None:
        self._ids[event_id] = (seq, digest)
        self._seqs[seq] = event_id
        while len(self._ids) > self.remember:
            _, (old_seq, _digest) = self._ids.popitem(last=False)
            self._seqs.pop(old_seq, None)


def parse_event(
    payload: bytes | str | dict[str, Any], table_id: str, key: Secret | None, require_signature: bool
) -> tuple[dict[str, Any] | None, str]:
    """The envelope of one ``events`` payload, or None and why it is rejected (not JSON, a
    field missing or mistyped, another table's, a signature missing or wrong)."""
    envelope, problem, _ = parse_signed_event(payload, table_id, key, require_signature)
    return envelope, problem


def parse_signed_event(
    payload: bytes | str | dict[str, Any], table_id: str, key: Secret | None, require_signature: bool
) -> tuple[dict[str, Any] | None, str, bytes]:
    """:func:`parse_event` plus the envelope's signing bytes (RFC 8785 form of its signed
    members), computed once for the signature and for a content digest (``hashlib.sha256`` of
    them: equal for two copies of one event, different for another event under the same id)."""
    if isinstance(payload, bytes) and key is not None:
        fast = _wire_signed(payload, table_id, key)
        if fast is not None:
            return fast
    if isinstance(payload, dict):
        envelope: Any = payload
    else:
        try:
            envelope = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return None, f"not JSON: {exc}", b""
    problem = _envelope_problem(envelope, table_id)
    if problem is not None:
        return None, problem, b""
    try:
        signed = signing_bytes(envelope, UNSIGNED_EVENT_FIELDS)
    except ValueError as exc:  # a value without a canonical form: it cannot have been signed
        return None, f"not canonicalisable: {exc}", b""
    if key is None:
        if require_signature:
            return None, "signature required but no key configured", b""
    elif "sig" not in envelope:
        return None, "unsigned event (a key is configured: a signature is required)", b""
    elif not isinstance(envelope["sig"], str) or not hmac.compare_digest(
        sign_bytes(signed, key), envelope["sig"].lower()
    ):
        return None, "signature does not verify", b""
    return envelope, "", signed


_PUBLISHED_AT = b',"published_at":'


def _wire_signed(payload: bytes, table_id: str, key: Secret) -> tuple[dict[str, Any], str, bytes] | None:
    """The contract's shortcut for a signed event as the table lays it out (``README.md``,
    "Signed events on the wire"): the bytes before ``,"published_at":`` plus ``}`` are the
    signed form C itself. When their HMAC is the payload's ``sig``, the envelope is C parsed
    (what was signed, nothing else) with ``published_at`` and ``sig`` from the tail: no
    re-canonicalisation. None (take the general path) for any other layout or outcome."""
    cut = payload.rfind(_PUBLISHED_AT)
    if cut < 0:
        return None
    signed = payload[:cut] + b"}"
    try:
        tail = json.loads(b"{" + payload[cut + 1 :])
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(tail, dict) or set(tail) != {"published_at", "sig"} or not isinstance(tail["sig"], str):
        return None
    if not hmac.compare_digest(sign_bytes(signed, key), tail["sig"].lower()):
        return None
    try:
        envelope = json.loads(signed)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(envelope, dict) or "published_at" in envelope or "sig" in envelope:
        return None
    for name, kind in _REQUIRED.items():
        value = envelope.get(name)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            return None
    if (
        envelope["schema_version"] != SCHEMA_VERSION
        or envelope["seq"] < 1
        or envelope["table_id"] != table_id
        or not _chain_members_ok(envelope)
    ):
        return None  # the general path names the problem
    envelope.update(tail)
    return envelope, "", signed


def _envelope_problem(envelope: Any, table_id: str) -> str | None:
    """Why a parsed payload is not an envelope of this table (None: it is one)."""
    if not isinstance(envelope, dict):
        return "not a JSON object"
    for name, kind in _REQUIRED.items():
        value = envelope.get(name)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            return f"field {name!r} missing or of the wrong type"
    if envelope["schema_version"] != SCHEMA_VERSION:
        return f"schema_version {envelope['schema_version']} is not {SCHEMA_VERSION}"
    if not _chain_members_ok(envelope):
        return "chain members epoch, prev_hash and hash must be strings, all three or none"
    if envelope["seq"] < 1:
        return "seq must be >= 1"
    if envelope["table_id"] != table_id:
        return f"event of table {envelope['table_id']!r}, expected {table_id!r}"
    return None


def _chain_members_ok(envelope: dict[str, Any]) -> bool:
    """All three chain members as strings, or none of them."""
    present = [name for name in _CHAIN if name in envelope]
    if not present:
        return True
    return len(present) == len(_CHAIN) and all(isinstance(envelope[name], str) for name in _CHAIN)
