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

from daemon.console.roads import all_roads
from daemon.console.tableau_hint import next_card
from daemon.console.verification import Trust
from daemon.mqtt.topics import TopicError, validate_table_id
from daemon.service.table_view import TableView

HISTORY_LINES = 30
_HISTORY_KINDS = ("command_accepted", "command_refused")
_SIDE_SLOTS = {"player": ("P1", "P2", "P3"), "banker": ("B1", "B2", "B3")}


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
    refused: int = 0
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

    def _take_state(self, snapshot: dict[str, Any]) -> None:
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

    def floor_row(self) -> dict[str, Any]:
        """The table's line on the floor view."""
        return {
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
        hint = next_card(cards)
        results = list(view.results)
        round_model = {
            "hand": view.round_hand,
            "open": view.round_open,
            "cards": cards,
            "player_total": _total(view, "player"),
            "banker_total": _total(view, "banker"),
            "next_slot": hint.slot if view.round_open else None,
            "next_text": hint.text if view.round_hand is not None else "Waiting for the first round",
            "result": None,
        }
        if view.last_rounds and view.last_rounds[0].hand == view.round_hand and not view.round_open:
            round_model["result"] = view.last_rounds[0].winner
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
            "alerts": [_alert_json(key, a) for key, a in view.open_alerts.items()],
            "last_alert": view.recent_alerts[0] if view.recent_alerts else None,
            "history": [h.as_json() for h in self.history],
            "backlog": self.backlog,
            "stream": {"events": view.events_seen, "gaps": len(view.gaps), "malformed": view.malformed},
            "trust": self.trust.value,
            "refused": {"count": self.refused, "last": self.last_refused},
        }


def _total(view: TableView, side: str) -> int | None:
    from common.cards import Card, CardParseError, hand_total

    codes = [view.round_cards[s] for s in _SIDE_SLOTS[side] if s in view.round_cards]
    try:
        return hand_total([Card.parse(c) for c in codes]) if codes else None
    except CardParseError:
        return None


def _held_json(rnd: dict[str, Any]) -> dict[str, Any]:
    cards = rnd.get("cards")
    blocked = rnd.get("blocked_by")
    return {
        "hand": rnd.get("hand"),
        "cards": {str(k): str(v) for k, v in cards.items()} if isinstance(cards, dict) else {},
        "blocked_by": [str(b) for b in blocked] if isinstance(blocked, list) else [],
    }


def _alert_json(key: str, alert: dict[str, Any]) -> dict[str, Any]:
    holds = alert.get("holds")
    hand = alert.get("hand")
    return {
        "alert_id": str(alert.get("alert_id", key)),
        "code": str(alert.get("code", "alert")),
        "message": str(alert.get("message", "")),
        "hand": hand if isinstance(hand, int) else None,
        "holds": holds if isinstance(holds, int) or holds == "next_round" else None,
    }
