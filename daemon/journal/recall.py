"""Recall of the last rounds: a pure fold of a table's events into one record per round.

A regulator's recall shows the current game and the ones before it (``baccarat-edge rounds
--last 10`` and the retained state's ``recent_rounds``). :class:`RoundRecall` is fed event
bodies in journal order (``kind``, ``at``, ``shoe_id``, ``hand``, ``data``: what the journal
stores and what the engine emits) and keeps the newest ``keep`` rounds, oldest first, each as
:meth:`RoundRecord.to_dict`:

- ``shoe_id``, ``hand`` (the edge's number in the shoe), ``round_id`` (the game server's, or
  null), ``status`` (``in_progress``, ``held``, ``completed``, ``voided``), ``opened_at``,
  ``decided_at``;
- ``cards`` and ``sources`` by slot (``P1`` .. ``B3``); a card may be null: dealt but not yet
  revealed (a squeezed card), so a record never needs every card to be known;
- ``outcome`` (winner, totals, pairs, naturals) once the round completed, else null;
- ``holds``: each reason the round was held (an ``alert <id>`` with its code, the reader's
  verdict, the die, …) and its ``resolution`` (how, by whom: ``actor``, ``command_id``, when),
  null while it still holds;
- ``corrections``: each supervisor correction (``action``, ``before``, ``after``, ``actor``,
  ``command_id``, ``at``); ``void``: the voiding (``reason``, ``actor``, ``command_id``,
  ``was_completed``, ``opening_burn``: its cards were the forgotten opening burn and the hand is
  dealt afresh as a new record, ``at``) or null.

A round starts at its ``round_opened`` (a betting window with no card yet is no round). Events
arrive from anywhere (a damaged journal, an old daemon), so every field is checked and a value
of the wrong shape is left out, never trusted and never a crash.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.slots import ROUND_SLOTS
from daemon.engine.squeeze import public_data
from daemon.journal.errors import JournalError

DEFAULT_LAST = 10
"""Rounds recalled by default: the current game and the nine before it."""
MAX_LAST = 100
"""The most rounds one recall may ask for."""
ROUND_KINDS = frozenset(
    {
        "round_opened",
        "card_dealt",
        "round_held",
        "round_completed",
        "hold_resolved",
        "round_corrected",
        "round_voided",
        "alert_raised",
        "alert_cleared",
    }
)
"""The event kinds the fold reads (every other kind changes no record)."""
_CARD = re.compile(r"^[A2-9TJQK][cdhs]$")
_SLOT_NAMES = tuple(str(s) for s in ROUND_SLOTS)
_SLOTS = frozenset(_SLOT_NAMES)
_ALERTS_KEPT = 256  # alert codes remembered for naming the holds of a later round_held
_OUTCOME_FLAGS = ("player_pair", "banker_pair", "player_natural", "banker_natural")


@dataclass(slots=True)
class Hold:
    """One reason a round was held, and how that reason ended (None: it still holds)."""

    reason: str
    alert_id: str | None = None
    code: str | None = None
    resolution: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        resolution = None if self.resolution is None else dict(self.resolution)
        return {"reason": self.reason, "alert_id": self.alert_id, "code": self.code, "resolution": resolution}


@dataclass(slots=True)
class RoundRecord:
    """One round as recalled."""

    shoe_id: str | None
    hand: int
    opened_at: float
    round_id: str | None = None
    status: str = "in_progress"
    decided_at: float | None = None
    cards: dict[str, str | None] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    outcome: dict[str, Any] | None = None
    holds: list[Hold] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    void: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, fresh copies (the caller may keep or change it)."""
        return {
            "shoe_id": self.shoe_id,
            "hand": self.hand,
            "round_id": self.round_id,
            "status": self.status,
            "opened_at": self.opened_at,
            "decided_at": self.decided_at,
            "cards": {s: self.cards[s] for s in _SLOT_NAMES if s in self.cards},
            "sources": {s: self.sources[s] for s in _SLOT_NAMES if s in self.sources},
            "outcome": None if self.outcome is None else dict(self.outcome),
            "holds": [h.to_dict() for h in self.holds],
            "corrections": [json.loads(json.dumps(c)) for c in self.corrections],
            "void": None if self.void is None else dict(self.void),
        }

    def resolve_open_holds(self, resolution: dict[str, Any]) -> None:
        """Every hold still open ends with ``resolution``."""
        for hold in self.holds:
            if hold.resolution is None:
                hold.resolution = dict(resolution)


class RoundRecall:
    """The newest ``keep`` rounds of a table, folded from its events in journal order."""

    def __init__(self, keep: int = DEFAULT_LAST) -> None:
        if not 1 <= keep <= MAX_LAST:
            raise ValueError(f"keep must be 1..{MAX_LAST}, not {keep}")
        self.keep = keep
        self._rounds: list[RoundRecord] = []
        self._alert_codes: dict[str, str | None] = {}
        self._next_round: dict[str, str | None] = {}  # open alerts holding the next round: id -> code

    def rounds(self) -> list[dict[str, Any]]:
        """The rounds kept, oldest first (the current or last round last), as JSON."""
        return [r.to_dict() for r in self._rounds]

    def add(self, event: Mapping[str, Any]) -> None:
        """Fold one event body (``kind``, ``at``, ``shoe_id``, ``hand``, ``data``); a squeeze table's
        sealed cards are never read (the retained state shows what the players may see)."""
        kind, data = event.get("kind"), event.get("data")
        if kind not in ROUND_KINDS or not isinstance(data, dict):
            return
        data = public_data(data)
        at = _number(event.get("at"))
        if at is None:
            return
        shoe_id = _text(event.get("shoe_id"))
        if kind == "round_opened":
            self._open(shoe_id, _hand(data.get("hand"), event.get("hand")), at, data)
        elif kind == "alert_raised":
            self._alert_raised(shoe_id, data)
        elif kind == "alert_cleared":
            self._alert_cleared(at, data)
        else:
            hand = _hand(data.get("round" if kind == "card_dealt" else "hand"), event.get("hand"))
            record = None if hand is None else self._find(shoe_id, hand)
            if record is not None:
                _round_id(record, data)
                _FOLD[kind](record, at, data)
                for hold in record.holds:
                    if hold.code is None and hold.alert_id is not None:
                        hold.code = self._alert_codes.get(hold.alert_id)

    # ------------------------------------------------------------------ rounds and alerts
    def _open(self, shoe_id: str | None, hand: int | None, at: float, data: Mapping[str, Any]) -> None:
        if hand is None:
            return
        record = RoundRecord(shoe_id=shoe_id, hand=hand, opened_at=at)
        _round_id(record, data)
        for alert_id, code in self._next_round.items():
            record.holds.append(Hold(f"alert {alert_id}", alert_id, code))
        self._next_round = {}
        self._rounds.append(record)
        del self._rounds[: -self.keep]

    def _find(self, shoe_id: str | None, hand: int) -> RoundRecord | None:
        for record in reversed(self._rounds):  # newest first: a hand dealt afresh is the newer record
            if record.hand == hand and record.shoe_id == shoe_id:
                return record
        return None

    def _alert_raised(self, shoe_id: str | None, data: Mapping[str, Any]) -> None:
        alert_id, code = _text(data.get("alert_id")), _text(data.get("code"))
        if alert_id is None:
            return
        self._alert_codes[alert_id] = code
        if len(self._alert_codes) > _ALERTS_KEPT:
            del self._alert_codes[next(iter(self._alert_codes))]
        holds = data.get("holds")
        if holds == "next_round":
            if len(self._next_round) < _ALERTS_KEPT:  # a journal's junk cannot grow it without end
                self._next_round[alert_id] = code
            return
        hand = _hand(holds, None)
        record = None if hand is None else self._find(shoe_id, hand)
        if record is not None and all(h.alert_id != alert_id for h in record.holds):
            record.holds.append(Hold(f"alert {alert_id}", alert_id, code))

    def _alert_cleared(self, at: float, data: Mapping[str, Any]) -> None:
        alert_id = _text(data.get("alert_id"))
        if alert_id is None:
            return
        self._next_round.pop(alert_id, None)
        resolution = _by(data, at, how=_text(data.get("reason")) or "cleared")
        for record in self._rounds:
            for hold in record.holds:
                if hold.alert_id == alert_id and hold.resolution is None:
                    hold.resolution = dict(resolution)


# ---------------------------------------------------------------------- one function per kind
def _card_dealt(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    slot, card = data.get("slot"), data.get("card")
    if isinstance(slot, str) and slot in _SLOTS and (card is None or _is_card(card)):
        record.cards[slot] = card
        source = _text(data.get("source"))
        if source is not None:
            record.sources[slot] = source


def _round_held(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    record.status = "held"
    record.decided_at = _first_number(data.get("decided_at"), at)
    _take_cards(record, data.get("cards"), None)
    reasons = data.get("blocked_by")
    for reason in reasons if isinstance(reasons, list) else []:
        if not isinstance(reason, str) or any(h.reason == reason for h in record.holds):
            continue
        alert_id = reason.removeprefix("alert ") if reason.startswith("alert ") else None
        record.holds.append(Hold(reason, alert_id, None))


def _round_completed(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    record.status = "completed"
    record.decided_at = _first_number(data.get("decided_at"), record.decided_at, at)
    _take_cards(record, data.get("cards"), data.get("sources"))
    record.outcome = _outcome(data.get("outcome"))
    record.resolve_open_holds({"how": "round completed", "actor": None, "command_id": None, "at": at})


def _hold_resolved(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    record.resolve_open_holds(_by(data, at, how="resolve_hold"))


def _round_corrected(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    before, after = _cards_of(data.get("before")), _cards_of(data.get("after"))
    entry = {"action": _text(data.get("action")), "before": before, "after": after, **_by(data, at)}
    del entry["how"]
    record.corrections.append(entry)
    record.cards = dict(after)
    supplied = data.get("supplied")
    for slot in supplied if isinstance(supplied, list) else []:
        if slot in after:
            record.sources[slot] = "supervisor"
    record.sources = {s: v for s, v in record.sources.items() if s in record.cards}


def _round_voided(record: RoundRecord, at: float, data: Mapping[str, Any]) -> None:
    record.status = "voided"
    was_completed = data.get("was_completed")
    void = _by(data, at, how="round voided")
    record.resolve_open_holds(void)
    del void["how"]
    record.void = {
        "reason": _text(data.get("reason")),
        "was_completed": was_completed is True,
        "opening_burn": data.get("opening_burn") is True,
        **void,
    }


_FOLD = {
    "card_dealt": _card_dealt,
    "round_held": _round_held,
    "round_completed": _round_completed,
    "hold_resolved": _hold_resolved,
    "round_corrected": _round_corrected,
    "round_voided": _round_voided,
}


# ---------------------------------------------------------------------- checked fields
def _by(data: Mapping[str, Any], at: float, how: str = "") -> dict[str, Any]:
    return {
        "how": how,
        "actor": _text(data.get("actor")),
        "command_id": _text(data.get("command_id")),
        "at": at,
    }


def _round_id(record: RoundRecord, data: Mapping[str, Any]) -> None:
    round_id = _text(data.get("round_id"))
    if round_id is not None and record.round_id is None:
        record.round_id = round_id


def _take_cards(record: RoundRecord, cards: Any, sources: Any) -> None:
    if isinstance(cards, Mapping):
        record.cards = dict(_cards_of(cards))
    if isinstance(sources, Mapping):
        record.sources = {
            str(s): v for s, v in sources.items() if s in record.cards and isinstance(v, str) and v
        }


def _cards_of(cards: Any) -> dict[str, str | None]:
    if not isinstance(cards, Mapping):
        return {}
    return {s: cards[s] for s in _SLOT_NAMES if s in cards and (cards[s] is None or _is_card(cards[s]))}


def _outcome(outcome: Any) -> dict[str, Any] | None:
    if not isinstance(outcome, Mapping) or outcome.get("winner") not in ("player", "banker", "tie"):
        return None
    totals = [outcome.get("player_total"), outcome.get("banker_total")]
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= 9 for t in totals):
        return None
    flags = {name: outcome.get(name) is True for name in _OUTCOME_FLAGS}
    return {"winner": outcome["winner"], "player_total": totals[0], "banker_total": totals[1], **flags}


def _is_card(value: Any) -> bool:
    return isinstance(value, str) and _CARD.match(value) is not None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:  # not NaN
        return float(value)
    return None


def _first_number(*values: Any) -> float | None:
    for value in values:
        number = _number(value)
        if number is not None:
            return number
    return None


def _hand(value: Any, fallback: Any) -> int | None:
    for candidate in (value, fallback):
        if isinstance(candidate, int) and not isinstance(candidate, bool) and candidate >= 1:
            return candidate
    return None


# ---------------------------------------------------------------------- from a journal file
def recall_from_journal(path: Path, last: int = DEFAULT_LAST) -> list[dict[str, Any]]:
    """The last ``last`` rounds a journal file holds, oldest first (:func:`load_recall`)."""
    return load_recall(path, last).rounds()


def load_recall(path: Path, keep: int = DEFAULT_LAST) -> RoundRecall:
    """A recall fed the tail of a journal file (opened read-only: the daemon may run), ready to
    take the events journaled after it. Only the tail is read: from the round opened before the
    oldest one kept (an alert holding the next round is raised before that round opens).
    Raises :class:`JournalError` when the file is missing or cannot be read as a journal."""
    from daemon.journal.export import open_read_only

    recall = RoundRecall(keep)
    db = open_read_only(path)
    try:
        opened = db.execute(
            "SELECT seq FROM events WHERE kind = 'round_opened' ORDER BY seq DESC LIMIT ?", (keep + 1,)
        ).fetchall()
        start = int(opened[-1][0]) if len(opened) > keep else 0
        for (body,) in db.execute("SELECT body FROM events WHERE seq >= ? ORDER BY seq", (start,)):
            try:
                record = json.loads(body)
            except (TypeError, ValueError):
                continue
            if isinstance(record, dict):
                recall.add(record)
    except sqlite3.Error as exc:
        raise JournalError(f"journal {path} cannot be read: {exc}") from None
    finally:
        db.close()
    return recall
