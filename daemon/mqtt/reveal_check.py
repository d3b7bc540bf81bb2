"""Checking a squeeze table's revealed cards against the commitments made at the deal.

On a table with ``table.reveal.mode: squeeze`` every card is published face down first: its
``card_dealt`` event carries a ``commitment`` (scheme ``sha256-nonce-v1``) and no card. When the
table reveals that slot, a ``card_revealed`` event carries the card and the secret ``nonce``.
Anyone can then recompute the commitment and compare it with the one published at the deal::

    commitment = lowercase hex SHA-256 of the UTF-8 bytes of
        "baccarat-edge card commitment v1\\n" + table_id + "\\n" + shoe_id + "\\n"
        + str(round) + "\\n" + slot + "\\n" + card + "\\n" + nonce

``table_id`` and ``shoe_id`` are the envelope's, ``round`` (the hand number, decimal), ``slot``
(``P1``..``B3`` or ``burn``), ``card`` (as ``card_dealt`` writes it, e.g. ``8s``) and ``nonce``
(32 lowercase hex characters) the ``card_revealed`` event's ``data``.

:class:`RevealChecker` is that check for one table's event stream, pure (no I/O, no clock):
feed it every event in ``seq`` order (:meth:`RevealChecker.observe`). It remembers each
commitment of a ``card_dealt`` and judges each ``card_revealed``: :attr:`RevealStatus.VERIFIED`,
:attr:`RevealStatus.UNCHECKED` (the consumer joined after that card was dealt: the reveal agrees
with the commitment it names, which cannot be compared with a deal it never saw), or one of the
named problems of :class:`RevealProblem`. The reference consumer (``tail``, ``consume``) reports
problems; the pit console runs the same rules in the browser (``daemon/console/static/
reveal-check.js``, WebCrypto SHA-256) on the commitments and reveals its table model carries.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

SCHEME = "sha256-nonce-v1"
"""The only commitment scheme this module knows."""
DOMAIN = "baccarat-edge card commitment v1\n"
"""The first line of every committed text (domain separation)."""
REMEMBER = 4096
"""Commitments kept (oldest forgotten first): a few shoes' worth of unrevealed slots."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_NONCE = re.compile(r"[0-9a-f]{32}")
_CARD = re.compile(r"(?:[2-9TJQKA])[cdhs]")
_SLOTS = frozenset({"P1", "P2", "P3", "B1", "B2", "B3", "burn"})


class RevealStatus(StrEnum):
    """The outcome of checking one ``card_revealed`` event."""

    VERIFIED = "verified"
    """The revealed card and nonce give exactly the commitment of that slot's ``card_dealt``."""
    UNCHECKED = "unchecked"
    """The slot's ``card_dealt`` was never seen here (joined late); the reveal is consistent with
    the commitment it carries, which is all that can be said."""
    FAILED = "failed"
    """One of :class:`RevealProblem`: the reveal must not be trusted."""


class RevealProblem(StrEnum):
    """Why a ``card_revealed`` event fails its check (each a line a person can act on)."""

    MISMATCH = "reveal_mismatch"
    """The revealed card and nonce do not hash to the commitment made at the deal: the card shown
    is not the card dealt (or the nonce is wrong)."""
    COMMITMENT_CHANGED = "reveal_commitment_changed"
    """The reveal names another commitment than the slot's ``card_dealt`` published."""
    NOT_DEALT = "reveal_of_slot_not_dealt"
    """A reveal of a slot whose ``card_dealt`` this stream carried for another round or never,
    while this consumer saw the whole round."""
    MALFORMED = "reveal_malformed"
    """A field is missing or not of the contract's form (card, nonce, commitment, slot, round)."""
    UNKNOWN_SCHEME = "reveal_unknown_scheme"
    """A scheme other than ``sha256-nonce-v1``: it cannot be checked."""


@dataclass(frozen=True, slots=True)
class RevealVerdict:
    """The check of one ``card_revealed`` event."""

    status: RevealStatus
    shoe_id: str | None
    round: int | None
    slot: str | None
    problem: RevealProblem | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """No problem (verified, or unchecked because the deal was not seen)."""
        return self.problem is None

    def describe(self) -> str:
        """One line for a person: what was checked and how it came out."""
        where = f"shoe {self.shoe_id} round {self.round} slot {self.slot}"
        if self.problem is None:
            return f"{where}: {self.status.value}" + (f" ({self.detail})" if self.detail else "")
        return f"{self.problem.value}: {where}: {self.detail}"


def commitment(table_id: str, shoe_id: str, round_: int, slot: str, *, card: str, nonce: str) -> str:
    """The ``sha256-nonce-v1`` commitment of ``card`` in ``slot`` of ``round_`` (lowercase hex)."""
    text = f"{DOMAIN}{table_id}\n{shoe_id}\n{round_}\n{slot}\n{card}\n{nonce}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class RevealChecker:
    """Commitments seen on one table's stream, and the check of each reveal against them."""

    table_id: str
    remember: int = REMEMBER
    verified: int = 0
    unchecked: int = 0
    problems: list[RevealVerdict] = field(default_factory=list)
    """Every failed check, oldest first."""
    _committed: OrderedDict[tuple[str, int, str], str] = field(default_factory=OrderedDict)
    _rounds_seen: OrderedDict[tuple[str, int], None] = field(default_factory=OrderedDict)
    """Rounds whose ``round_opened`` this checker saw: a reveal of a slot never committed in one
    of them is a slot not dealt, not a late join."""

    def observe(self, envelope: dict[str, Any]) -> RevealVerdict | None:
        """Take one verified event (any kind, in ``seq`` order); the verdict on a
        ``card_revealed``, None for every other event."""
        kind, data = envelope.get("kind"), envelope.get("data")
        if not isinstance(data, dict):
            return None
        shoe_id = envelope.get("shoe_id")
        hand = _as_int(data.get("hand"))
        if kind == "round_opened" and isinstance(shoe_id, str) and hand is not None:
            self._keep(self._rounds_seen, (shoe_id, hand), None)
        elif kind == "card_dealt" and "commitment" in data:
            self._take_commitment(shoe_id, data)
        elif kind == "card_revealed":
            verdict = self.check(envelope)
            if verdict.problem is not None:
                self.problems.append(verdict)
            elif verdict.status is RevealStatus.VERIFIED:
                self.verified += 1
            else:
                self.unchecked += 1
            return verdict
        return None

    def committed(self, shoe_id: str, round_: int, slot: str) -> str | None:
        """The commitment seen at the deal of that slot (None: not seen)."""
        return self._committed.get((shoe_id, round_, slot))

    def check(self, envelope: dict[str, Any]) -> RevealVerdict:
        """Judge one ``card_revealed`` envelope against what was seen (changes nothing)."""
        raw = envelope.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        shoe_id, round_, slot = envelope.get("shoe_id"), data.get("round"), data.get("slot")
        where = _Where(
            shoe_id if isinstance(shoe_id, str) else None,
            _as_int(round_),
            slot if isinstance(slot, str) else None,
        )
        malformed = _malformed(envelope, data)
        if malformed is not None:
            return where.failed(RevealProblem.MALFORMED, malformed)
        if data["scheme"] != SCHEME:
            return where.failed(
                RevealProblem.UNKNOWN_SCHEME, f"scheme {str(data['scheme'])[:40]!r} is not {SCHEME}"
            )
        card, named = str(data["card"]), str(data["commitment"])
        shoe, hand, place = str(shoe_id), int(data["round"]), str(slot)
        table_id = str(envelope.get("table_id", self.table_id))
        recomputed = commitment(table_id, shoe, hand, place, card=card, nonce=str(data["nonce"]))
        dealt = self.committed(shoe, hand, place)
        if dealt is None:
            if (shoe, hand) in self._rounds_seen:
                return where.failed(
                    RevealProblem.NOT_DEALT, "no card_dealt of this slot in this round was published"
                )
            if recomputed != named:
                return where.failed(
                    RevealProblem.MISMATCH,
                    f"card {card} with its nonce hashes to {recomputed[:16]}…, "
                    f"not the commitment {named[:16]}… the reveal names",
                )
            return where.verdict(RevealStatus.UNCHECKED, "its deal was before this consumer joined")
        if dealt != named:
            return where.failed(
                RevealProblem.COMMITMENT_CHANGED,
                f"the reveal names commitment {named[:16]}…, the deal published {dealt[:16]}…",
            )
        if recomputed != dealt:
            return where.failed(
                RevealProblem.MISMATCH,
                f"card {card} with its nonce hashes to {recomputed[:16]}…, "
                f"not the commitment {dealt[:16]}… published at the deal",
            )
        return where.verdict(RevealStatus.VERIFIED)

    def _take_commitment(self, shoe_id: Any, data: dict[str, Any]) -> None:
        digest, round_, slot = data.get("commitment"), _as_int(data.get("round")), data.get("slot")
        if (
            isinstance(shoe_id, str)
            and round_ is not None
            and isinstance(slot, str)
            and isinstance(digest, str)
            and _HEX64.fullmatch(digest)
        ):
            self._keep(self._committed, (shoe_id, round_, slot), digest)

    def _keep(self, memory: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        memory[key] = value
        memory.move_to_end(key)
        while len(memory) > self.remember:
            memory.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Where:
    """The slot a reveal is about, as far as its fields say."""

    shoe_id: str | None
    round: int | None
    slot: str | None

    def verdict(self, status: RevealStatus, detail: str = "") -> RevealVerdict:
        return RevealVerdict(status, self.shoe_id, self.round, self.slot, detail=detail)

    def failed(self, problem: RevealProblem, detail: str) -> RevealVerdict:
        return RevealVerdict(
            RevealStatus.FAILED, self.shoe_id, self.round, self.slot, problem=problem, detail=detail
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value: Any) -> int | None:
    """A JSON integer (never a boolean) as an int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _malformed(envelope: dict[str, Any], data: dict[str, Any]) -> str | None:
    """What in a ``card_revealed`` is not of the contract's form (None: all of it is)."""
    if not isinstance(envelope.get("shoe_id"), str):
        return "the envelope has no shoe_id"
    if not _is_int(data.get("round")):
        return "data.round is not an integer"
    if data.get("slot") not in _SLOTS:
        return f"data.slot {str(data.get('slot'))[:20]!r} is not P1..B3 or burn"
    if not isinstance(data.get("card"), str) or not _CARD.fullmatch(data["card"]):
        return "data.card is not a card code"
    if not isinstance(data.get("nonce"), str) or not _NONCE.fullmatch(data["nonce"]):
        return "data.nonce is not 32 lowercase hex characters"
    if not isinstance(data.get("commitment"), str) or not _HEX64.fullmatch(data["commitment"]):
        return "data.commitment is not 64 lowercase hex characters"
    if not isinstance(data.get("scheme"), str):
        return "data.scheme is missing"
    return None
