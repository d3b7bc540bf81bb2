"""One table as the console sees it: the monitor's :class:`TableView` fed every message,
plus what the console adds (held rounds, pairs, who did what), and its view model.

Everything here comes from the table's MQTT topics; nothing is trusted to be well formed
(TableView counts what is not). The view model is plain JSON for the browser, which
renders every string in it as text.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from common.slots import BANKER_SLOTS, PLAYER_SLOTS
from daemon.console.roads import DERIVED_OFFSETS, all_roads, big_road_cells, derived_road
from daemon.console.tableau_hint import next_card
from daemon.console.verification import Trust
from daemon.console.wording import pit_words
from daemon.journal.pace import DEALING_MISTAKES, PaceTracker, add_record
from daemon.mqtt.topics import TopicError, validate_table_id
from daemon.service.table_view import RoundLine, TableView

HISTORY_LINES = 30
ALERT_HISTORY_LINES = 30
LAST_ROUNDS = 8
FLOOR_ROAD_COLUMNS = 12
"""Big-road columns a floor tile shows (the newest)."""
_HISTORY_KINDS = ("command_accepted", "command_refused")
_SIDE_SLOTS = {"player": PLAYER_SLOTS, "banker": BANKER_SLOTS}


@dataclass(slots=True)
class HistoryLine:
    """Who asked for what, and how the table answered (from command_accepted/refused)."""

    ts: float
    actor: str
    action: str
    outcome: str
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "actor": self.actor, "action": self.action,
                "outcome": self.outcome, "reason": self.reason}  # fmt: skip


@dataclass(slots=True)
class ConsoleTable:
    """The live model of one table."""

    table_id: str
    trust: Trust = Trust.UNVERIFIED
    """VERIFIED: keys are configured and only messages they verify reach ``apply``."""
    view: TableView = field(init=False)
    valid_id: bool = field(init=False)
    held: dict[int, dict[str, Any]] = field(default_factory=dict)
    pairs: dict[int, tuple[bool, bool]] = field(default_factory=dict)
    history: deque[HistoryLine] = field(default_factory=lambda: deque(maxlen=HISTORY_LINES))
    last_message_at: float | None = None
    last_card_at: float | None = None
    """When the table's last card reached the console (console clock, epoch seconds)."""
    raised_at: dict[str, float] = field(default_factory=dict)
    """When each open alert reached the console (its age on the page)."""
    alert_history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=ALERT_HISTORY_LINES))
    dealer: dict[str, Any] | None = None
    """The dealer on the table now (its last ``dealer_changed``), None when never told."""
    pace: PaceTracker = field(default_factory=PaceTracker)
    """Dealers' pace from the events this console has seen (since it started): shown only for a
    table whose health carries no ``pace`` of its own (:meth:`pace_report`)."""
    refused: int = 0
    changes: int = 0
    """Messages taken or refused: a view model only changes when this moves."""
    last_refused: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.view = TableView(self.table_id)
        try:
            validate_table_id(self.table_id)
            self.valid_id = True
        except TopicError:
            self.valid_id = False

    def apply(self, suffix: str, payload: bytes) -> None:
        """Fold one message of ``baccarat/v1/{table}/{suffix}`` into the model."""
        self.last_message_at = time.time()
        self.view.apply(f"baccarat/v1/{self.table_id}/{suffix}", payload)
        if suffix == "state" and isinstance(self.view.state, dict):
            self._take_state(self.view.state)
        elif suffix == "events":
            self._take_event(payload)

    def refuse(self, suffix: str, reason: str) -> None:
        """Count a message that did not verify; its content is never looked at."""
        self.refused += 1
        self.last_refused = {"ts": time.time(), "topic": suffix, "reason": reason[:200]}

    def pace_report(self) -> dict[str, Any]:
        """The table's pace: its health's ``pace`` (computed by the table from its journal, so
        a console restart loses nothing; schema-checked), else what this console counted."""
        reported = self._reported_pace()
        return reported if reported is not None else self.pace.report()

    def _reported_pace(self) -> dict[str, Any] | None:
        health = self.view.health
        reported = health.get("pace") if isinstance(health, dict) else None
        return reported if isinstance(reported, dict) else None

    def _take_state(self, snapshot: dict[str, Any]) -> None:
        dealer = snapshot.get("dealer")
        if isinstance(dealer, dict):
            # the table's own record (schema-checked): known at once after a console restart
            self.dealer = {"dealer_id": dealer.get("dealer_id"), "name": dealer.get("name"),
                           "since": dealer.get("since")}  # fmt: skip
        held = snapshot.get("held_rounds")
        if isinstance(held, list):
            self.held = {r["hand"]: r for r in held if isinstance(r, dict) and isinstance(r.get("hand"), int)}
        results = snapshot.get("results")
        if isinstance(results, list):
            for line in results:
                if isinstance(line, dict) and isinstance(line.get("hand"), int):
                    pairs = line.get("pairs")
                    if isinstance(pairs, list) and len(pairs) == 2:
                        self.pairs[line["hand"]] = (pairs[0] is True, pairs[1] is True)

    def _take_event(self, payload: bytes) -> None:
        import json

        try:
            env = json.loads(payload)
        except ValueError:
            return  # counted by the TableView
        if not isinstance(env, dict) or not isinstance(env.get("data"), dict):
            return
        kind, data = env.get("kind"), env["data"]
        hand = data.get("hand")
        add_record(self.pace, env)
        now = time.time()
        ts = env.get("ts")
        table_ts = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
        if kind == "card_dealt":
            self.last_card_at = now
        elif kind == "alert_raised" and isinstance(data.get("alert_id"), str):
            self.raised_at[data["alert_id"]] = now
            while len(self.raised_at) > 256:  # alerts never cleared cannot grow this for ever
                del self.raised_at[next(iter(self.raised_at))]
        elif kind == "alert_cleared":
            alert_id = str(data.get("alert_id", ""))
            raised = self.raised_at.pop(alert_id, None)
            self.alert_history.appendleft(
                {
                    "alert_id": alert_id[:80],
                    "code": str(data.get("code", "alert"))[:80],
                    "words": pit_words(str(data.get("code", "alert"))),
                    "how": "acknowledged"
                    if data.get("reason") == "acknowledged"
                    else str(data.get("reason", ""))[:80],
                    "actor": str(data.get("actor") or "the table")[:120],
                    "ts": table_ts,
                    "open_s": round(now - raised, 1) if raised is not None else None,
                }
            )
        elif kind == "hold_resolved" and isinstance(hand, int):
            self.alert_history.appendleft(
                {"alert_id": "", "code": kind, "words": f"Held round {hand} confirmed",
                 "how": "resolved", "actor": str(data.get("actor") or "?")[:120], "ts": table_ts,
                 "open_s": None}
            )  # fmt: skip
        elif kind == "dealer_changed":
            dealer_id = data.get("dealer_id")
            if isinstance(dealer_id, str) or dealer_id is None:
                name = data.get("name")
                self.dealer = {
                    "dealer_id": dealer_id[:64] if isinstance(dealer_id, str) else None,
                    "name": name[:80] if isinstance(name, str) else None,
                    "since": table_ts,
                }
        if kind == "shoe_started":
            self.held.clear()
            self.pairs.clear()
        elif kind == "round_held" and isinstance(hand, int):
            self.held[hand] = {"hand": hand, "cards": data.get("cards"), "blocked_by": data.get("blocked_by")}
        elif kind in ("hold_resolved", "round_completed", "round_voided") and isinstance(hand, int):
            self.held.pop(hand, None)
            outcome = data.get("outcome")
            if kind == "round_completed" and isinstance(outcome, dict):
                self.pairs[hand] = (outcome.get("player_pair") is True, outcome.get("banker_pair") is True)
            if kind == "round_voided":
                self.pairs.pop(hand, None)
        elif kind in _HISTORY_KINDS:
            ts = env.get("ts")
            self.history.appendleft(
                HistoryLine(
                    ts=float(ts) if isinstance(ts, int | float) else 0.0,
                    actor=str(data.get("actor", "?")),
                    action=str(data.get("action", "?")),
                    outcome="accepted" if kind == "command_accepted" else "refused",
                    reason=str(data.get("reason") or ""),
                )
            )

    # ------------------------------------------------------------------ view model
    @property
    def online(self) -> bool:
        return self.view.status == "online"

    @property
    def backlog(self) -> int | None:
        depth = (self.view.health or {}).get("queue_depth")
        return depth if isinstance(depth, int) else None

    def severity(self) -> int:
        """Worst first on the floor: 3 offline, 2 holds or alerts, 1 backlog, 0 fine."""
        if not self.online:
            return 3
        if self.held or self.view.open_alerts:
            return 2
        return 1 if self.backlog else 0

    def last_result(self) -> str | None:
        return self.view.results[-1] if self.view.results else None

    def _state_field(self, *path: str) -> Any:
        node: Any = self.view.state
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    def cards_left(self) -> int | None:
        """Cards still in the shoe (decks x 52 less the cards out), when the state says."""
        decks = self._state_field("shoe", "decks")
        if isinstance(decks, int) and not isinstance(decks, bool) and 0 < decks <= 16:
            return max(0, decks * 52 - self.view.cards_in_shoe)
        return None

    def variant(self) -> str | None:
        value = self._state_field("variant")
        return value[:40] if isinstance(value, str) else None

    def floor_row(self) -> dict[str, Any]:
        """The table's line on the floor view."""
        big = big_road_cells(self.view.results)["cells"]
        newest = max((c["col"] for c in big), default=-1)
        return {
            "big_road": [c for c in big if c["col"] > newest - FLOOR_ROAD_COLUMNS],
            "last_card_at": self.last_card_at,
            "betting": self.view.betting_phase,
            "cards_left": self.cards_left(),
            "variant": self.variant(),
            "dealer": self.dealer,
            "critical": any(_critical(a) for a in self.view.open_alerts.values()),
            "rounds_per_hour": self.pace_report()["table"]["rounds_per_hour"],
            "table_id": self.table_id,
            "valid_id": self.valid_id,
            "status": self.view.status or "unknown",
            "hand": self.view.hand,
            "shoe_id": self.view.shoe_id,
            "last_result": self.last_result(),
            "open_alerts": len(self.view.open_alerts),
            "held_rounds": len(self.held),
            "backlog": self.backlog,
            "severity": self.severity(),
            "trust": self.trust.value,
            "refused": self.refused,
        }

    def table_model(self) -> dict[str, Any]:
        """Everything the table view and the dealer display draw."""
        view = self.view
        cards = dict(view.round_cards)
        hint = next_card(cards, view.round_hidden)
        results = list(view.results)
        round_model = {
            "hand": view.round_hand,
            "open": view.round_open,
            "cards": cards,
            # squeeze: slots face down (never a face), and what the page checks each reveal with
            "hidden": list(view.round_hidden),
            "commitments": dict(view.round_commitments),
            "reveals": {slot: dict(reveal) for slot, reveal in view.round_reveals.items()},
            "player_total": _total(view, "player"),
            "banker_total": _total(view, "banker"),
            "next_slot": hint.slot if view.round_open else None,
            "next_text": hint.text if view.round_hand is not None else "Waiting for the first round",
            "result": None,
        }
        if not view.round_open:
            # the round on the layout, wherever it is among the last rounds: a held round
            # resolved after later ones completes after them and is not the newest line
            done = next((r for r in view.last_rounds if r.hand == view.round_hand), None)
            round_model["result"] = done.winner if done is not None else None
        # the pairs of this shoe's hands seen so far (never a list as long as a hostile hand number)
        pairs = [p for h, p in self.pairs.items() if 1 <= h <= (view.hand or 0)]
        return {
            "table_id": self.table_id,
            "valid_id": self.valid_id,
            "status": view.status or "unknown",
            "online": self.online,
            "round": round_model,
            "shoe": {
                "shoe_id": view.shoe_id,
                "cards_out": view.cards_in_shoe,
                "hands": len(results),
                "player": results.count("player"),
                "banker": results.count("banker"),
                "tie": results.count("tie"),
                "player_pairs": sum(1 for p in pairs if p and p[0]),
                "banker_pairs": sum(1 for p in pairs if p and p[1]),
                "ended": view.shoe_ended,
            },
            "roads": all_roads(results),
            "holds": [_held_json(r) for _, r in sorted(self.held.items())],
            "alerts": [_alert_json(key, a, self.raised_at.get(key)) for key, a in view.open_alerts.items()],
            "last_alert": _newest_open_alert(view),
            "alert_history": list(self.alert_history),
            "last_rounds": [_round_json(r) for r in list(view.last_rounds)[:LAST_ROUNDS]],
            "ask": ask_markers(results),
            "last_card_at": self.last_card_at,
            "betting": view.betting_phase,
            "cards_left": self.cards_left(),
            "variant": self.variant(),
            "dealer": self.dealer,
            "history": [h.as_json() for h in self.history],
            "backlog": self.backlog,
            "stream": {"events": view.events_seen, "gaps": len(view.gaps), "malformed": view.malformed},
            "trust": self.trust.value,
            "pace": self.pace_report(),
            "pace_source": "table" if self._reported_pace() is not None else "console",
            "mistake_names": DEALING_MISTAKES,
            "refused": {"count": self.refused, "last": self.last_refused},
        }


def _total(view: TableView, side: str) -> int | None:
    """A side's total: None before its first card, and while any of its cards is face down."""
    from common.cards import Card, CardParseError, hand_total

    if set(view.round_hidden).intersection(_SIDE_SLOTS[side]):
        return None
    codes = [view.round_cards[s] for s in _SIDE_SLOTS[side] if s in view.round_cards]
    try:
        return hand_total([Card.parse(c) for c in codes]) if codes else None
    except CardParseError:
        return None


def _newest_open_alert(view: TableView) -> str | None:
    """The dealer's line: the newest alert still open (a resolved or cleared one is gone)."""
    if not view.open_alerts:
        return None
    alert = list(view.open_alerts.values())[-1]
    return f"{alert.get('code', 'alert')}: {alert.get('message', '')}".strip()


def _held_json(rnd: dict[str, Any]) -> dict[str, Any]:
    """A held round: its cards by slot, and the slots still face down (a squeeze card is null)."""
    cards = rnd.get("cards")
    blocked = rnd.get("blocked_by")
    cards = cards if isinstance(cards, dict) else {}
    return {
        "hand": rnd.get("hand"),
        "cards": {str(k): str(v) for k, v in cards.items() if isinstance(v, str)},
        "hidden": [str(k) for k, v in cards.items() if v is None],
        "blocked_by": [str(b) for b in blocked] if isinstance(blocked, list) else [],
    }


def _critical(alert: dict[str, Any]) -> bool:
    return alert.get("severity") == "critical" or alert.get("holds") is not None


def _round_json(line: RoundLine) -> dict[str, Any]:
    return {"hand": line.hand, "winner": line.winner, "player_total": line.player_total,
            "banker_total": line.banker_total, "cards": dict(line.cards)}  # fmt: skip


def ask_markers(results: list[str]) -> dict[str, dict[str, str | None]]:
    """The "ask" markers: the colour each derived road would add if the next round were won by
    Banker, or by Player (None: that road would add nothing yet)."""
    out: dict[str, dict[str, str | None]] = {}
    for winner in ("banker", "player"):
        out[winner] = {}
        for road, k in DERIVED_OFFSETS.items():
            now, then = derived_road(results, k), derived_road([*results, winner], k)
            out[winner][road] = then[-1] if len(then) > len(now) else None
    return out


def _alert_json(key: str, alert: dict[str, Any], raised_at: float | None = None) -> dict[str, Any]:
    holds = alert.get("holds")
    hand = alert.get("hand")
    code = str(alert.get("code", "alert"))
    return {
        "alert_id": str(alert.get("alert_id", key)),
        "code": code,
        "words": pit_words(code),
        "severity": "critical" if _critical(alert) else "warning",
        "raised_at": raised_at,
        "message": str(alert.get("message", "")),
        "hand": hand if isinstance(hand, int) else None,
        "holds": holds if isinstance(holds, int) or holds == "next_round" else None,
    }
