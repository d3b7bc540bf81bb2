"""Dealers' pace and accuracy from a table's events: rounds per hour, the time split of a round
(betting, dealing, settling) and dealing mistakes per 100 rounds by kind, per dealer and for
the table.

A pure fold over events in journal order (``kind``, ``at``, ``hand``, ``data``): the same
figures from the journal after a restart (:func:`pace_from_journal`) as from the live stream.

Definitions (every time is the table's own clock, the events' ``at``):

- A round starts at its ``betting_opened`` (tables with a betting window) or else its
  ``round_opened``, and is **decided** at its ``round_completed`` or ``round_held``.
- **betting**: start to ``betting_closed`` (0 without a betting window);
  **dealing**: ``betting_closed`` (else the start) to the decision;
  **settling**: the decision to the next round's start, at most :data:`IDLE_S`: a longer
  gap (a break, a shuffle) is idle time, in no round. A new shoe ends the settling at once.
- A round belongs to the dealer on the table when it starts (the last ``dealer_changed``
  before it, whose ``data.dealer_id`` names them; null: no dealer known). A dealer change
  mid-round leaves that round to the dealer who started it.
- **rounds per hour** = rounds x 3600 / (their betting + dealing + settling seconds).
- **mistakes**: the dealing mistakes the table raises as alerts (:data:`DEALING_MISTAKES`),
  counted for the dealer on the table when raised, per 100 of that dealer's rounds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IDLE_S = 120.0
"""A gap between rounds longer than this is idle (a break, a shuffle), not settling."""
UNKNOWN = ""
"""The key of rounds dealt while no dealer was known."""
DEALING_MISTAKES = {
    "unneeded_card": "unneeded card",
    "missing_card": "card not scanned",
    "rescan_needed": "card not read",
    "camera_slot_mismatch": "card in the wrong box",
    "card_exposed_during_betting": "card exposed during betting",
    "card_before_betting_closed": "card before betting closed",
}
"""Alert codes that are a dealer's mistake, with the pit's name for each."""
_RECENT_HANDS = 64
MAX_DEALERS = 500
"""Dealers one table's tracker keeps apart; later new ids count under :data:`OTHERS` (a
stream of made-up ids cannot grow memory without end)."""
OTHERS = "(others)"


@dataclass(slots=True)
class PaceFigures:
    """One dealer's (or the table's) sums."""

    rounds: int = 0
    betting_s: float = 0.0
    dealing_s: float = 0.0
    settling_s: float = 0.0
    mistakes: Counter[str] = field(default_factory=Counter)

    def add(self, other: PaceFigures) -> None:
        self.rounds += other.rounds
        self.betting_s += other.betting_s
        self.dealing_s += other.dealing_s
        self.settling_s += other.settling_s
        self.mistakes.update(other.mistakes)

    def report(self) -> dict[str, Any]:
        """The figures as JSON: rounds per hour, the mean split of a round, mistakes per 100."""
        busy = self.betting_s + self.dealing_s + self.settling_s
        per_round = max(self.rounds, 1)
        return {
            "rounds": self.rounds,
            "rounds_per_hour": round(self.rounds * 3600.0 / busy, 2) if busy > 0 else None,
            "seconds_per_round": {
                "betting": round(self.betting_s / per_round, 2),
                "dealing": round(self.dealing_s / per_round, 2),
                "settling": round(self.settling_s / per_round, 2),
            },
            "mistakes": dict(sorted(self.mistakes.items())),
            "mistakes_per_100_rounds": {
                kind: round(count * 100.0 / self.rounds, 2) if self.rounds else None
                for kind, count in sorted(self.mistakes.items())
            },
        }


@dataclass(slots=True)
class _Round:
    hand: int | None
    dealer: str
    start: float
    betting_closed: float | None = None


@dataclass(slots=True)
class PaceTracker:
    """Feed it every event in order (:meth:`add`); :meth:`report` at any time."""

    dealer: str = UNKNOWN
    dealers: dict[str, PaceFigures] = field(default_factory=dict)
    _pending_start: float | None = None
    _round: _Round | None = None
    _settling: tuple[str, float] | None = None  # (dealer, decided at) of the last decided round
    _decided: list[int] = field(default_factory=list)

    def _figures(self, dealer: str) -> PaceFigures:
        figures = self.dealers.get(dealer)
        if figures is None:
            if len(self.dealers) >= MAX_DEALERS:
                dealer = OTHERS
                figures = self.dealers.get(OTHERS)
            if figures is None:
                figures = self.dealers[dealer] = PaceFigures()
        return figures

    def _start(self, at: float) -> None:
        if self._settling is not None:
            dealer, decided = self._settling
            gap = at - decided
            if 0 <= gap <= IDLE_S:
                self._figures(dealer).settling_s += gap
            self._settling = None

    def add(self, kind: str, at: float, hand: int | None, data: dict[str, Any]) -> None:
        """One event of the table (anything malformed is ignored, never raised)."""
        if kind == "dealer_changed":
            dealer_id = data.get("dealer_id")
            self.dealer = dealer_id[:64] if isinstance(dealer_id, str) else UNKNOWN
        elif kind in ("shoe_started", "shoe_ended"):
            self._settling = None
            self._pending_start = None
        elif kind == "betting_opened":
            self._start(at)
            self._pending_start = at
        elif kind == "betting_closed":
            if self._round is not None and self._round.betting_closed is None:
                self._round.betting_closed = at
            elif self._pending_start is not None:
                self._round = _Round(None, self.dealer, self._pending_start, at)
                self._pending_start = None
        elif kind == "round_opened":
            self._start(at)
            number = data.get("hand", hand)
            number = number if isinstance(number, int) and not isinstance(number, bool) else None
            if self._round is not None and self._round.hand is None and self._pending_start is None:
                self._round.hand = number  # betting closed before the round opened
            else:
                start = self._pending_start if self._pending_start is not None else at
                self._round = _Round(number, self.dealer, start)
            self._pending_start = None
        elif kind in ("round_completed", "round_held"):
            self._decide(at, data.get("hand", hand))
        elif kind == "alert_raised":
            code = data.get("code")
            if isinstance(code, str) and code in DEALING_MISTAKES:
                dealer = self._round.dealer if self._round is not None else self.dealer
                self._figures(dealer).mistakes[code] += 1

    def _decide(self, at: float, hand: Any) -> None:
        rnd = self._round
        if rnd is None or (isinstance(hand, int) and hand in self._decided):
            return  # a held round completing later was counted when it was decided
        if isinstance(hand, int) and rnd.hand is not None and hand != rnd.hand:
            return
        figures = self._figures(rnd.dealer)
        figures.rounds += 1
        dealt_from = rnd.betting_closed if rnd.betting_closed is not None else rnd.start
        figures.betting_s += max(0.0, dealt_from - rnd.start)
        figures.dealing_s += max(0.0, at - dealt_from)
        self._settling = (rnd.dealer, at)
        if rnd.hand is not None:
            self._decided = [*self._decided[-(_RECENT_HANDS - 1) :], rnd.hand]
        self._round = None

    def report(self) -> dict[str, Any]:
        """``{"table": figures, "dealers": {dealer_id: figures}}`` (the key "" for rounds
        dealt with no dealer known)."""
        table = PaceFigures()
        for figures in self.dealers.values():
            table.add(figures)
        return {
            "table": table.report(),
            "dealers": {dealer: figures.report() for dealer, figures in sorted(self.dealers.items())},
            "dealer": self.dealer or None,
        }


def pace_from_events(events: list[dict[str, Any]]) -> PaceTracker:
    """A tracker fed ``events`` (journal bodies: ``kind``, ``at``, ``hand``, ``data``)."""
    tracker = PaceTracker()
    for event in events:
        add_record(tracker, event)
    return tracker


def add_record(tracker: PaceTracker, event: dict[str, Any]) -> None:
    """Feed one event body; ``at`` (journal) or ``ts`` (published envelope) is its time."""
    kind, data = event.get("kind"), event.get("data")
    at = event.get("at", event.get("ts"))
    hand = event.get("hand")
    if not isinstance(kind, str) or not isinstance(data, dict):
        return
    if not isinstance(at, int | float) or isinstance(at, bool):
        return
    tracker.add(kind, float(at), hand if isinstance(hand, int) and not isinstance(hand, bool) else None, data)


def pace_from_journal(path: Path) -> PaceTracker:
    """The pace of every round in a journal file (opened read-only: the daemon may run)."""
    from daemon.journal.export import open_read_only

    db = open_read_only(path)
    tracker = PaceTracker()
    try:
        for (body,) in db.execute("SELECT body FROM events ORDER BY seq"):
            try:
                record = json.loads(body)
            except ValueError:
                continue
            if isinstance(record, dict):
                add_record(tracker, record)
    finally:
        db.close()
    return tracker
