"""A live model of one table built from its MQTT topics, and its plain-ANSI rendering.

Fed every message of ``baccarat/v1/{table_id}/#``; tolerant of anything: a payload
that is not JSON or lacks a field is counted and shown as such, never a crash.
Duplicates (same ``event_id``, at-least-once delivery) are ignored and gaps in
``seq`` are reported, like the reference consumer does.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from common.cards import Card, CardParseError, hand_total
from daemon.fleet.payloads import KINDS as RETAINED_KINDS
from daemon.fleet.payloads import check as check_retained
from daemon.rules.roads import bead_plate, big_road, big_road_grid

ROUND_SLOTS = ("P1", "B1", "P2", "B2", "P3", "B3")
SEEN_IDS = 4096
"""Event ids remembered to drop duplicates: at-least-once delivery repeats an event soon after
the original (a reconnect's resend), so the newest few thousand suffice, and a table-day of
events costs no memory that is never given back."""
_SUIT_SYMBOL = {"c": "♣", "d": "♦", "h": "♥", "s": "♠"}


@dataclass(slots=True)
class RoundLine:
    """One finished round as the view shows it."""

    hand: int
    winner: str
    player_total: int | None
    banker_total: int | None
    cards: dict[str, str]
    naturals: bool = False


@dataclass(slots=True)
class TableView:
    """What a technician sees of one table."""

    table_id: str
    status: str | None = None
    health: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    shoe_id: str | None = None
    hand: int | None = None
    round_hand: int | None = None
    round_cards: dict[str, str] = field(default_factory=dict)
    round_open: bool = False
    offered_bets: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    last_rounds: deque[RoundLine] = field(default_factory=lambda: deque(maxlen=8))
    open_alerts: dict[str, dict[str, Any]] = field(default_factory=dict)
    recent_alerts: deque[str] = field(default_factory=lambda: deque(maxlen=6))
    events_seen: int = 0
    duplicates: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    last_seq: int | None = None
    malformed: int = 0
    last_problem: str | None = None
    shoe_ended: str | None = None
    cards_in_shoe: int = 0
    betting_phase: str | None = None  # waiting / betting / dealing (betting_window); None: never seen
    betting_round_id: str | None = None
    betting_source: str | None = None
    schema_checked: bool = False
    """Retained ``status``/``health``/``state`` must be valid by the contract's schemas (the
    console); else anything is taken that has the fields read (the technician's monitor)."""
    _seen_ids: set[str] = field(default_factory=set)
    _seen_order: deque[str] = field(default_factory=deque)  # ``_seen_ids`` oldest first
    _result_hands: list[int | None] = field(default_factory=list)  # hand of each entry of ``results``

    @property
    def remembered_ids(self) -> int:
        """Event ids held for de-duplication now (at most :data:`SEEN_IDS`)."""
        return len(self._seen_ids)

    # ------------------------------------------------------------------ input
    def apply(self, topic: str, payload: bytes) -> None:
        """Fold one MQTT message into the view."""
        suffix = topic.split(f"/{self.table_id}/", 1)[-1] if f"/{self.table_id}/" in topic else topic
        if self.schema_checked and suffix in RETAINED_KINDS:
            self._apply_checked(suffix, payload)
            return
        if suffix == "status":
            self.status = payload.decode("utf-8", "replace").strip() or None
            if self.status and self.status.startswith("{"):
                body = self._json(topic, payload)
                if isinstance(body, dict):
                    self.status = str(body.get("status", body.get("state", self.status)))
            return
        body = self._json(topic, payload)
        if body is None:
            return
        if not isinstance(body, dict):
            self._problem(topic, "payload is not a JSON object")
            return
        if suffix == "health":
            self.health = body
        elif suffix == "state":
            self._apply_state(body)
        elif suffix == "events":
            self._apply_event(body)
        # alerts are also in events; cmd/reply are not shown

    def _apply_checked(self, kind: str, payload: bytes) -> None:
        """A retained ``status``, ``health`` or ``state`` checked against the contract's schema
        (the fleet view's parser): used only when valid, else counted as malformed with why."""
        checked = check_retained(kind, self.table_id, payload)
        if checked.message is None:
            self._problem(kind, checked.problem or "not valid")
            return
        message = checked.message
        if kind == "status":
            self.status = str(message["status"])
        elif kind == "health":
            self.health = message
        else:
            self._apply_state(message)

    def _json(self, topic: str, payload: bytes) -> Any:
        try:
            return json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            self._problem(topic, "payload is not JSON")
            return None

    def _problem(self, topic: str, text: str) -> None:
        self.malformed += 1
        self.last_problem = f"{topic}: {text}"

    def _apply_state(self, body: dict[str, Any]) -> None:
        snapshot = body.get("state", body.get("data", body))
        if not isinstance(snapshot, dict):
            self._problem("state", "snapshot is not an object")
            return
        self.state = snapshot
        nested = snapshot.get("shoe")
        shoe: dict[str, Any] = nested if isinstance(nested, dict) else snapshot
        same_shoe = shoe.get("shoe_id") == self.shoe_id
        self.shoe_id = _str_or(shoe.get("shoe_id"), self.shoe_id)
        cards_out = shoe.get("cards_out")
        if isinstance(cards_out, int):
            self.cards_in_shoe = cards_out
        if shoe.get("phase") == "over" and isinstance(shoe.get("end_reason"), str):
            self.shoe_ended = shoe["end_reason"]
        hand = snapshot.get("hand")
        if isinstance(hand, int):
            self.hand = hand
        rnd = snapshot.get("round")
        if isinstance(rnd, dict):
            cards = rnd.get("cards")
            self.round_open = True
            if isinstance(cards, dict):
                self.round_cards = {str(k): str(v) for k, v in cards.items()}
                self.round_hand = rnd.get("hand") if isinstance(rnd.get("hand"), int) else self.round_hand
        elif rnd is None and "round" in snapshot:
            self.round_open = False
        bets = snapshot.get("offered_bets")
        if isinstance(bets, dict):
            bets = bets.get("bets")
        if isinstance(bets, list):
            self.offered_bets = [str(b) for b in bets]
        alerts = snapshot.get("alerts", snapshot.get("open_alerts"))
        if isinstance(alerts, dict):
            self.open_alerts = {str(k): v for k, v in alerts.items() if isinstance(v, dict)}
        elif isinstance(alerts, list):
            self.open_alerts = {
                str(a.get("alert_id", i)): a for i, a in enumerate(alerts) if isinstance(a, dict)
            }
        flow = snapshot.get("game_flow")
        if isinstance(flow, dict) and flow.get("phase") in _PHASES:
            if flow["phase"] != "waiting" or self.betting_phase is not None:
                self.betting_phase = str(flow["phase"])
            self.betting_round_id = _str_or(flow.get("round_id"), None)
        history = _snapshot_results(snapshot.get("results"))
        if history is not None:
            self._take_results(history, same_shoe)
        elif "results" in snapshot:
            self._problem("state", "results is not a list of rounds with a winner")

    def _take_results(self, history: list[tuple[int | None, str, dict[str, Any]]], same_shoe: bool) -> None:
        """The snapshot's results (the engine's history of the shoe) replace what this view pieced
        together from events, keeping only rounds of the same shoe completed after the snapshot."""
        newest = max((h for h, _, _ in history if h is not None), default=0)
        later = [
            (h, w)
            for h, w in zip(self._result_hands, self.results, strict=True)
            if same_shoe and h is not None and h > newest
        ]
        pairs = [(h, w) for h, w, _ in history] + later
        self._result_hands = [h for h, _ in pairs]
        self.results = [w for _, w in pairs]
        if not self.last_rounds:  # after a monitor restart: the last rounds, without their cards
            for hand, winner, line in history[-(self.last_rounds.maxlen or 8) :]:
                self.last_rounds.appendleft(
                    RoundLine(
                        hand=hand or 0,
                        winner=winner,
                        player_total=_side(line.get("totals"), 0),
                        banker_total=_side(line.get("totals"), 1),
                        cards={},
                        naturals=any(_side(line.get("naturals"), i) for i in (0, 1)),
                    )
                )

    def _add_result(self, hand: int | None, winner: str) -> None:
        """A completed round, in hand order (a held round may complete after later ones)."""
        if hand is not None and hand in self._result_hands:
            at = self._result_hands.index(hand)
            self.results[at] = winner
            return
        at = len(self.results)
        if hand is not None:
            while at > 0 and (earlier := self._result_hands[at - 1]) is not None and earlier > hand:
                at -= 1
        self.results.insert(at, winner)
        self._result_hands.insert(at, hand)

    def _apply_event(self, env: dict[str, Any]) -> None:
        event_id, seq, kind = env.get("event_id"), env.get("seq"), env.get("kind")
        data = env.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            self._problem("events", "event without kind or data")
            return
        if isinstance(event_id, str):
            if event_id in self._seen_ids:
                self.duplicates += 1
                return
            self._seen_ids.add(event_id)
            self._seen_order.append(event_id)
            if len(self._seen_order) > SEEN_IDS:
                self._seen_ids.discard(self._seen_order.popleft())
        if isinstance(seq, int):
            if self.last_seq is not None and seq > self.last_seq + 1:
                self.gaps.append((self.last_seq + 1, seq - 1))
            if self.last_seq is None or seq > self.last_seq:
                self.last_seq = seq
        self.events_seen += 1
        self.shoe_id = _str_or(env.get("shoe_id"), self.shoe_id)
        if isinstance(env.get("hand"), int):
            self.hand = env["hand"]
        handler = _EVENT_HANDLERS.get(kind)
        if handler is not None:
            try:
                handler(self, env, data)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self._problem("events", f"{kind}: unexpected data ({exc})")

    # ------------------------------------------------------------------ events
    def _shoe_started(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.results = []
        self._result_hands = []
        self.last_rounds.clear()
        self.round_cards = {}
        self.shoe_ended = None
        self.cards_in_shoe = 0

    def _betting_opened(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.betting_phase = "betting"
        self.betting_round_id = _str_or(data.get("round_id"), None)
        self.betting_source = _str_or(data.get("source"), self.betting_source)

    def _betting_closed(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.betting_phase = "dealing"
        self.betting_round_id = _str_or(data.get("round_id"), self.betting_round_id)
        self.betting_source = _str_or(data.get("source"), self.betting_source)

    def _round_decided(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        """A round decided (held or voided too) puts the betting window back to waiting."""
        if self.betting_phase is not None:
            self.betting_phase = "waiting"

    def _round_opened(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.round_hand = data.get("hand", env.get("hand"))
        self.round_cards = {}
        self.round_open = True

    def _card_dealt(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.cards_in_shoe += 1
        slot = data.get("slot")
        if slot in ROUND_SLOTS:
            if data.get("round") is not None and data.get("round") != self.round_hand:
                self.round_hand = data["round"]
                self.round_cards = {}
            self.round_cards[slot] = str(data["card"])

    def _round_completed(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self._round_decided(env, data)
        nested = data.get("outcome")
        outcome: dict[str, Any] = nested if isinstance(nested, dict) else data
        winner = str(outcome.get("winner", "?")).lower()
        cards = dict(self.round_cards)
        player = outcome.get("player")
        banker = outcome.get("banker")
        if isinstance(player, dict):
            player = player.get("cards")
        if isinstance(banker, dict):
            banker = banker.get("cards")
        if isinstance(player, list) and isinstance(banker, list):
            cards = {f"P{i + 1}": str(c) for i, c in enumerate(player)}
            cards |= {f"B{i + 1}": str(c) for i, c in enumerate(banker)}
        line = RoundLine(
            hand=int(data.get("hand", env.get("hand") or 0)),
            winner=winner,
            player_total=_total(outcome, "player", cards),
            banker_total=_total(outcome, "banker", cards),
            cards=cards,
        )
        self.last_rounds.appendleft(line)
        if line.hand == self.round_hand:
            self.round_open = False
        if winner in ("player", "banker", "tie"):
            hand = data.get("hand", env.get("hand"))
            self._add_result(hand if isinstance(hand, int) else None, winner)

    def _round_voided(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self._round_decided(env, data)
        hand = data.get("hand")
        self.recent_alerts.appendleft(f"hand {hand} voided: {data.get('reason', '')}")
        self.round_cards = {}
        if data.get("was_completed") and isinstance(hand, int) and hand in self._result_hands:
            at = self._result_hands.index(hand)
            del self.results[at], self._result_hands[at]
            self.last_rounds = deque((r for r in self.last_rounds if r.hand != hand), self.last_rounds.maxlen)

    def _card_outside_game(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        if data.get("counted"):  # a card out of the shoe, though never dealt
            self.cards_in_shoe += 1

    def _bets_offered(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.offered_bets = [str(b) for b in data.get("bets", [])]

    def _alert_raised(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        alert_id = str(data.get("alert_id", env.get("event_id")))
        self.open_alerts[alert_id] = data
        self.recent_alerts.appendleft(f"{data.get('code', 'alert')}: {data.get('message', '')}".strip())

    def _alert_cleared(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.open_alerts.pop(str(data.get("alert_id")), None)

    def _shoe_ended(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self.shoe_ended = str(data.get("reason", "ended"))


_PHASES = ("waiting", "betting", "dealing")

_EVENT_HANDLERS = {
    "betting_opened": TableView._betting_opened,
    "betting_closed": TableView._betting_closed,
    "round_held": TableView._round_decided,
    "shoe_started": TableView._shoe_started,
    "round_opened": TableView._round_opened,
    "card_dealt": TableView._card_dealt,
    "card_outside_game": TableView._card_outside_game,
    "round_completed": TableView._round_completed,
    "round_voided": TableView._round_voided,
    "bets_offered": TableView._bets_offered,
    "alert_raised": TableView._alert_raised,
    "alert_cleared": TableView._alert_cleared,
    "shoe_ended": TableView._shoe_ended,
}


def _snapshot_results(history: Any) -> list[tuple[int | None, str, dict[str, Any]]] | None:
    """(hand, winner, line) of each round in a snapshot's ``results``: the engine's compact
    lines (``{"hand", "winner", ...}``) or bare winners; None when it is neither."""
    if not isinstance(history, list):
        return None
    out: list[tuple[int | None, str, dict[str, Any]]] = []
    for item in history:
        line: dict[str, Any] = item if isinstance(item, dict) else {"winner": item}
        winner, hand = line.get("winner"), line.get("hand")
        if winner not in ("player", "banker", "tie"):
            return None
        out.append((hand if isinstance(hand, int) else None, str(winner), line))
    return out


def _side(pair: Any, index: int) -> int | None:
    """One side of a snapshot result's ``[player, banker]`` pair (a total, or a flag as 0/1)."""
    if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[index], int):
        return int(pair[index])
    return None


def _str_or(value: Any, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


def _total(outcome: dict[str, Any], side: str, cards: dict[str, str]) -> int | None:
    for key in (f"{side}_total", "totals"):
        value = outcome.get(key)
        if isinstance(value, int):
            return value
        if isinstance(value, dict) and isinstance(value.get(side), int):
            return int(value[side])
    prefix = "P" if side == "player" else "B"
    try:
        parsed = [Card.parse(code) for slot, code in sorted(cards.items()) if slot.startswith(prefix)]
    except CardParseError:
        return None
    return hand_total(parsed) if parsed else None


# ---------------------------------------------------------------------- rendering
_RESET, _BOLD, _DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
_COLOURS = {"P": "\x1b[34m", "B": "\x1b[31m", "T": "\x1b[32m", "alert": "\x1b[33m"}


def _card_text(code: str) -> str:
    if len(code) >= 2:
        return code[:-1] + _SUIT_SYMBOL.get(code[-1], code[-1])
    return code


def render(view: TableView, colour: bool = True, road_columns: int = 30) -> str:
    """The whole screen as text (ANSI colours when ``colour``)."""

    def paint(key: str, text: str) -> str:
        return f"{_COLOURS[key]}{text}{_RESET}" if colour and key in _COLOURS else text

    def bold(text: str) -> str:
        return f"{_BOLD}{text}{_RESET}" if colour else text

    lines: list[str] = []
    status = view.status or "unknown"
    hand = view.hand if view.hand is not None else "-"
    lines.append(
        bold(f"Table {view.table_id}")
        + f"  status: {status}  shoe: {view.shoe_id or '-'}  hand: {hand}"
        + f"  cards out: {view.cards_in_shoe}"
        + (f"  shoe ended ({view.shoe_ended})" if view.shoe_ended else "")
    )
    player = [view.round_cards[s] for s in ("P1", "P2", "P3") if s in view.round_cards]
    banker = [view.round_cards[s] for s in ("B1", "B2", "B3") if s in view.round_cards]
    round_state = "in progress" if view.round_open else "decided, waiting for the next round"
    if view.round_hand is None:
        round_state = "waiting for the first round"
    lines.append(
        bold(f"Round {view.round_hand if view.round_hand is not None else '-'}") + f"  {round_state}"
    )
    lines.append(bold("Betting") + "  " + betting_line(view))
    lines.append(
        "  "
        + paint("P", "Player")
        + f"  {' '.join(_card_text(c) for c in player) or '-':<16}"
        + f" total {_side_total(player)}"
    )
    lines.append(
        "  "
        + paint("B", "Banker")
        + f"  {' '.join(_card_text(c) for c in banker) or '-':<16}"
        + f" total {_side_total(banker)}"
    )
    lines.append(bold("Last results"))
    if not view.last_rounds:
        lines.append("  (none yet)")
    for rnd in list(view.last_rounds)[:5]:
        letter = {"player": "P", "banker": "B", "tie": "T"}.get(rnd.winner, "?")
        p = " ".join(_card_text(rnd.cards[s]) for s in ("P1", "P2", "P3") if s in rnd.cards)
        b = " ".join(_card_text(rnd.cards[s]) for s in ("B1", "B2", "B3") if s in rnd.cards)
        lines.append(
            f"  hand {rnd.hand:>3}  {paint(letter, rnd.winner.upper()):<6}  "
            f"P {rnd.player_total if rnd.player_total is not None else '?'} [{p}]  "
            f"B {rnd.banker_total if rnd.banker_total is not None else '?'} [{b}]"
        )
    lines.append(bold("Bead plate") + f"  ({len(view.results)} rounds)")
    lines.extend("  " + _grid_row(row, road_columns, paint) for row in bead_plate(view.results))
    lines.append(bold("Big road"))
    lines.extend("  " + _grid_row(row, road_columns, paint) for row in big_road_grid(big_road(view.results)))
    lines.append(bold("Offered bets") + "  " + (", ".join(view.offered_bets) or "-"))
    lines.append(bold("Alerts") + f"  open: {len(view.open_alerts)}")
    for alert in list(view.open_alerts.values())[:5]:
        lines.append("  " + paint("alert", f"! {alert.get('code', 'alert')}: {alert.get('message', '')}"))
    for text in list(view.recent_alerts)[:3]:
        lines.append(f"  {_DIM if colour else ''}recent: {text}{_RESET if colour else ''}")
    lines.append(bold("Health") + "  " + _health_line(view.health))
    lines.append(
        f"Stream: {view.events_seen} events, last seq {view.last_seq if view.last_seq is not None else '-'}, "
        f"{view.duplicates} duplicates, {len(view.gaps)} gaps"
        + (f", {view.malformed} malformed ({view.last_problem})" if view.malformed else "")
    )
    return "\n".join(lines) + "\n"


def betting_line(view: TableView) -> str:
    """The betting window as one line: the game phase of a ``betting_window`` table."""
    if view.betting_phase is None:
        return "- (no betting window seen: cards_only, or none opened yet)"
    round_id = f" round {view.betting_round_id}" if view.betting_round_id else ""
    source = f" (from {view.betting_source})" if view.betting_source else ""
    text = {
        "betting": "OPEN: bets are being placed; a card drawn now is exposed",
        "dealing": "closed: dealing",
        "waiting": "waiting for the next betting window",
    }[view.betting_phase]
    return f"{text}{round_id}{source}"


def _side_total(codes: list[str]) -> str:
    try:
        return str(hand_total([Card.parse(c) for c in codes])) if codes else "-"
    except CardParseError:
        return "?"


def _grid_row(row: list[str], columns: int, paint: Any) -> str:
    visible = row[-columns:]
    return "".join(paint(c.upper(), c) if c.strip() else "·" for c in visible)


def _health_line(health: dict[str, Any] | None) -> str:
    if not health:
        return "no report yet"
    parts: list[str] = []
    devices = health.get("devices")
    if isinstance(devices, dict):
        for name, info in devices.items():
            if isinstance(info, dict) and "connected" in info:
                state = "connected" if info.get("connected") else "DISCONNECTED"
                if info.get("state") == "opening":  # just started, first open attempt under way
                    state = "opening"
                parts.append(f"{name} {state}")
    broker = health.get("broker", health.get("publisher", health if "connected" in health else None))
    if isinstance(broker, dict):
        state = "connected" if broker.get("connected") else "DISCONNECTED"
        depth = broker.get("queue_depth", broker.get("undelivered"))
        parts.append(f"broker {state}" + (f", {depth} undelivered" if depth is not None else ""))
    return "; ".join(parts) or json.dumps(health)[:100]
