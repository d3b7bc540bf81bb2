"""A live model of one table built from its MQTT topics (drawn as text by ``table_text``).

Fed every message of ``baccarat/v1/{table_id}/#``. The retained ``status``, ``health`` and
``state`` are taken only when valid by the contract's schemas (the fleet view's parser, one for
the whole product); a payload that is not, or an event that is not JSON or lacks a field, is
counted and named as a problem, never a crash. Duplicates (same ``event_id``, at-least-once
delivery) are ignored and gaps in ``seq`` are reported, like the reference consumer does.

A squeeze table (``table.reveal.mode: squeeze``) deals face down: its ``card_dealt`` carries a
``commitment`` and no card, its retained ``state`` a ``null`` card and the slot's commitment.
Such a slot is in :attr:`TableView.round_hidden` (drawn face down, never a face) until its
``card_revealed`` puts the card in :attr:`TableView.round_cards`, with the card, nonce and
commitment in :attr:`TableView.round_reveals` for whoever checks it against the commitment
(the console's page does, :mod:`daemon.mqtt.reveal_check`'s rules).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from common.cards import Card, CardParseError, hand_total
from common.slots import BANKER_SLOTS, PLAYER_SLOTS, SLOT_NAMED
from daemon.fleet.payloads import KINDS as RETAINED_KINDS
from daemon.fleet.payloads import check as check_retained

SEEN_IDS = 4096
"""Event ids remembered to drop duplicates: at-least-once delivery repeats an event soon after
the original (a reconnect's resend), so the newest few thousand suffice, and a table-day of
events costs no memory that is never given back."""


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
    """The current round's cards whose face is known (dealt on an open table, or revealed)."""
    round_hidden: list[str] = field(default_factory=list)
    """Slots of the current round dealt face down and not revealed yet (squeeze)."""
    round_commitments: dict[str, str] = field(default_factory=dict)
    """The current round's commitments by slot, as published at the deal (squeeze)."""
    round_reveals: dict[str, dict[str, str]] = field(default_factory=dict)
    """The current round's reveals by slot: ``card``, ``nonce``, ``commitment`` (squeeze)."""
    round_open: bool = False
    offered_bets: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    last_rounds: deque[RoundLine] = field(default_factory=lambda: deque(maxlen=8))
    recent_rounds: list[dict[str, Any]] = field(default_factory=list)  # the state's recall, oldest first
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
        if suffix in RETAINED_KINDS:
            self._apply_checked(suffix, payload)
            return
        body = self._json(topic, payload)
        if body is None:
            return
        if not isinstance(body, dict):
            self._problem(topic, "payload is not a JSON object")
        elif suffix == "events":
            self._apply_event(body)
        # alerts are also in events; cmd/reply are not shown

    def _apply_checked(self, kind: str, payload: bytes) -> None:
        """A retained ``status``, ``health`` or ``state`` checked against the contract's schema
        (the fleet view's parser): used only when valid, else counted as malformed with why, as
        ``"state: shoe: 'decks' is a required property"``."""
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
            self._apply_state(message["state"])

    def _json(self, topic: str, payload: bytes) -> Any:
        try:
            return json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            self._problem(topic, "payload is not JSON")
            return None

    def _problem(self, topic: str, text: str) -> None:
        self.malformed += 1
        self.last_problem = f"{topic}: {text}"

    def _apply_state(self, snapshot: dict[str, Any]) -> None:
        """The engine's snapshot from a schema-valid retained ``state``: every member read is
        there with its contract shape."""
        self.state = snapshot
        shoe: dict[str, Any] = snapshot["shoe"]
        same_shoe = shoe["shoe_id"] == self.shoe_id
        self.shoe_id = _str_or(shoe["shoe_id"], self.shoe_id)
        self.cards_in_shoe = shoe["cards_out"]
        if shoe["phase"] == "over" and shoe["end_reason"] is not None:
            self.shoe_ended = shoe["end_reason"]
        self.hand = snapshot["hand"]
        rnd = snapshot["round"]
        self.round_open = rnd is not None
        if rnd is not None:
            if rnd["hand"] != self.round_hand:
                self._new_round(rnd["hand"])
            cards: dict[str, Any] = rnd["cards"]
            self.round_cards = {slot: card for slot, card in cards.items() if isinstance(card, str)}
            self.round_hidden = [slot for slot, card in cards.items() if card is None]
            commitments = rnd.get("commitments")
            if isinstance(commitments, dict):
                self.round_commitments |= {
                    str(slot): digest for slot, digest in commitments.items() if isinstance(digest, str)
                }
        self.offered_bets = list(snapshot["offered_bets"]["bets"])
        self.open_alerts = {alert["alert_id"]: alert for alert in snapshot["alerts"]}
        flow = snapshot["game_flow"]
        if flow["phase"] != "waiting" or self.betting_phase is not None:
            self.betting_phase = flow["phase"]
        self.betting_round_id = flow["round_id"]
        self.recent_rounds = list(snapshot.get("recent_rounds", []))  # absent from older tables
        history = [(line["hand"], line["winner"], line) for line in snapshot["results"]]
        self._take_results(history, same_shoe)

    def _take_results(self, history: list[tuple[int, str, dict[str, Any]]], same_shoe: bool) -> None:
        """The snapshot's results (the engine's history of the shoe) replace what this view pieced
        together from events, keeping only rounds of the same shoe completed after the snapshot."""
        newest = max((h for h, _, _ in history), default=0)
        later = [
            (h, w)
            for h, w in zip(self._result_hands, self.results, strict=True)
            if same_shoe and h is not None and h > newest
        ]
        pairs: list[tuple[int | None, str]] = [(h, w) for h, w, _ in history]
        pairs += later
        self._result_hands = [h for h, _ in pairs]
        self.results = [w for _, w in pairs]
        if not self.last_rounds:  # after a monitor restart: the last rounds, without their cards
            for hand, winner, line in history[-(self.last_rounds.maxlen or 8) :]:
                self.last_rounds.appendleft(
                    RoundLine(
                        hand=hand,
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
        self._new_round(self.round_hand)
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

    def _new_round(self, hand: Any) -> None:
        self.round_hand = hand
        self.round_cards = {}
        self.round_hidden = []
        self.round_commitments = {}
        self.round_reveals = {}

    def _round_opened(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        self._new_round(data.get("hand", env.get("hand")))
        self.round_open = True

    def _card_dealt(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        """A card of a round: its face on an open table; face down (its commitment) on a squeeze one."""
        self.cards_in_shoe += 1
        slot = SLOT_NAMED.get(str(data.get("slot")))
        if slot is None:
            return
        if data.get("round") is not None and data.get("round") != self.round_hand:
            self._new_round(data["round"])
        if "card" in data:
            self.round_cards[slot] = str(data["card"])
            return
        digest = data["commitment"]  # no card and no commitment: counted as unexpected data
        self.round_commitments[slot] = str(digest)
        if slot not in self.round_cards and slot not in self.round_hidden:
            self.round_hidden.append(slot)

    def _card_revealed(self, env: dict[str, Any], data: dict[str, Any]) -> None:
        """A squeeze slot turned face up: its card (and what checks it against the commitment)."""
        slot = SLOT_NAMED.get(str(data.get("slot")))
        if slot is None or data.get("round") != self.round_hand:
            return  # a reveal of an earlier round: that round's cards come with its result
        card = str(data["card"])
        self.round_cards[slot] = card
        self.round_reveals[slot] = {
            "card": card,
            "nonce": str(data["nonce"]),
            "commitment": str(data["commitment"]),
        }
        if slot in self.round_hidden:
            self.round_hidden.remove(slot)

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
            cards = {slot: str(c) for slot, c in zip(PLAYER_SLOTS, player, strict=False)}
            cards |= {slot: str(c) for slot, c in zip(BANKER_SLOTS, banker, strict=False)}
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
        self.round_hidden = []
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


_EVENT_HANDLERS = {
    "betting_opened": TableView._betting_opened,
    "betting_closed": TableView._betting_closed,
    "round_held": TableView._round_decided,
    "shoe_started": TableView._shoe_started,
    "round_opened": TableView._round_opened,
    "card_dealt": TableView._card_dealt,
    "card_revealed": TableView._card_revealed,
    "card_outside_game": TableView._card_outside_game,
    "round_completed": TableView._round_completed,
    "round_voided": TableView._round_voided,
    "bets_offered": TableView._bets_offered,
    "alert_raised": TableView._alert_raised,
    "alert_cleared": TableView._alert_cleared,
    "shoe_ended": TableView._shoe_ended,
}


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
    slots = PLAYER_SLOTS if side == "player" else BANKER_SLOTS
    try:
        parsed = [Card.parse(cards[slot]) for slot in slots if slot in cards]
    except CardParseError:
        return None
    return hand_total(parsed) if parsed else None
