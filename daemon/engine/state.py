"""The table's state, and the fold that rebuilds it from events.

``TableState.apply(event)`` is the only place state changes. The engine decides
events from the state and applies each one as it emits it, so folding the engine's
own event history into a fresh ``TableState`` gives an identical state: that is how
the daemon resumes after a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from common.slots import ROUND_SLOTS
from daemon.alerts import AlertCode, engine_alert_number
from daemon.engine.events import Event, EventKind
from daemon.engine.payloads import AlertData, CameraFill, DecidedRound, LockRequest, ReadFields, ResultLine
from daemon.engine.phases import (
    DEALING,
    GAME_FLOW_ACTOR,
    OUTSIDE_SHOE,
    BurnKind,
    CardPlace,
    FlowPhase,
    Phase,
)
from daemon.engine.rounds import RoundState, result_line
from daemon.engine.settings import TableSettings

# Bound once: ``Phase.X`` goes through the enum metaclass's ``__getattr__`` (~0.1 µs in
# Python 3.11), and the fold runs for every event.
_BURNING = Phase.BURNING
_READY = Phase.READY
_ROUND = Phase.ROUND
_READ_HELD = EventKind.READ_HELD
_OVER_COMPOSITION = AlertCode.OVER_COMPOSITION
_INDICATOR = CardPlace.INDICATOR
_BURN = CardPlace.BURN
_OPENING = BurnKind.OPENING
_ROUND_BURN = BurnKind.ROUND
_SIGNALLED = BurnKind.SIGNALLED

__all__ = ["DEALING", "GAME_FLOW_ACTOR", "OUTSIDE_SHOE", "FlowPhase", "Phase", "TableState"]


@dataclass
class TableState:
    """Everything the engine knows about its table; changed only by ``apply``."""

    settings: TableSettings
    shoe_id: str | None = None
    shoes_started: int = 0
    phase: Phase = Phase.NO_SHOE
    shoe_end_reason: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    cards_out: int = 0
    burn_remaining: int = 0
    round_burn_remaining: int = 0
    hand: int = 0
    round: RoundState | None = None
    held: dict[int, RoundState] = field(default_factory=dict)
    last_decided: DecidedRound | None = None
    decided_at: float | None = None
    unneeded_count: int = 0
    cut_card_seen: bool = False
    last_hand: int | None = None
    offered_hand: int | None = None
    offered_bets: list[str] = field(default_factory=list)
    dies: dict[int, int] = field(default_factory=dict)
    next_round_holds: list[str] = field(default_factory=list)
    alerts: dict[str, AlertData] = field(default_factory=dict)
    alert_counter: int = 0
    rescan_alert: str | None = None
    disconnected: list[str] = field(default_factory=list)
    # devices that supply cards (sent a reader read, or are announced, and are not cameras)
    reader_devices: list[str] = field(default_factory=list)
    camera_fill: CameraFill | None = None
    # (device, transmission id, card) -> read time, oldest first, at most duplicate_memory
    recent: dict[tuple[str, str, str], float] = field(default_factory=dict)
    pull_next: dict[str, int] = field(default_factory=dict)
    pull_last_at: dict[str, float] = field(default_factory=dict)
    held_reads: list[ReadFields] = field(default_factory=list)
    hold_counter: int = 0
    # the current shoe's completed rounds, by hand (compact: see ``result_line``)
    results: list[ResultLine] = field(default_factory=list)
    # the journal cannot take a new round (StorageState): opening cards are refused
    storage_full: bool = False
    storage_detail: str | None = None
    storage_alert: str | None = None
    storage_refused: int = 0  # cards refused under the open journal-full alert
    # the shoe for which a restart under other decks/variant was alerted (once per shoe)
    settings_notice_shoe: str | None = None
    # game flow (``game_flow: betting_window``, issue #12): where the betting window is (a
    # ``FlowPhase``), the round id it is for, the last round id opened (kept across shoes: the
    # server's sequence), each of this shoe's rounds' round id, the engine's pending shoe lock
    flow_phase: str = "waiting"
    flow_round_id: str | None = None
    flow_closes_at: float | None = None
    flow_windows: int = 0  # betting windows opened (numbers the engine's lock requests)
    last_round_id: str | None = None
    round_ids: dict[int, str] = field(default_factory=dict)
    lock_request: LockRequest | None = None
    burn_signalled: bool = False  # a slotless reader's BURN_STARTED, until BURN_ENDED

    # ------------------------------------------------------------------ fold
    def apply(self, event: Event) -> None:
        """Fold one event into the state (unknown kinds change nothing)."""
        handler = _APPLY.get(event.kind)
        if handler is not None:
            handler(self, event)
        read: ReadFields | None = event.data.get("read")
        if read is not None:
            self._note_read(read, advance_pull=event.kind != _READ_HELD)

    def _note_reader_device(self, device: str) -> None:
        if device not in self.reader_devices and device not in self.settings.camera.devices:
            self.reader_devices = sorted([*self.reader_devices, device])

    def _note_read(self, read: ReadFields, *, advance_pull: bool) -> None:
        source = read.get("source")
        if source == "reader" and read["device"] not in self.reader_devices:  # (new devices only)
            self._note_reader_device(read["device"])
        tid = read.get("transmission_id")
        card = read.get("card")
        if tid is not None and card is not None:
            key = (read["device"], tid, card)
            self.recent.pop(key, None)
            self.recent[key] = read["read_at"]
            if len(self.recent) > self.settings.duplicate_memory:
                del self.recent[next(iter(self.recent))]
        position = read.get("position")
        if advance_pull and source != "camera":
            if position is not None:
                device = read["device"]
                self.pull_next[device] = position + 1
                # A held read released late keeps its own (older) time: the pull is as recent
                # as its newest card.
                last = self.pull_last_at.get(device)
                self.pull_last_at[device] = read["read_at"] if last is None else max(last, read["read_at"])
            elif self.pull_next:
                # A card read without a position ends that device's pull: a late card of the
                # pull is then not appended after it (its order is unknown: it waits as a gap).
                self.pull_next.pop(read["device"], None)
                self.pull_last_at.pop(read["device"], None)

    def round_for(self, hand: int) -> RoundState | None:
        """The current round or a held round with this hand number."""
        if self.round is not None and self.round.hand == hand:
            return self.round
        return self.held.get(hand)

    def _ready_for_next_round(self, decided_at: float | None) -> None:
        self.phase = _READY
        self.decided_at = decided_at
        self.unneeded_count = 0
        cfg = self.settings
        self.round_burn_remaining = cfg.round_burn_cards if cfg.burn_before_each_round else 0

    def _shoe_started(self, e: Event) -> None:
        self.shoes_started += 1
        self.shoe_id = e.data["shoe_id"]
        self.alert_counter = 0
        self.phase = Phase.INDICATOR
        self.shoe_end_reason = None
        self.counts = {}
        self.cards_out = 0
        self.burn_remaining = 0
        self.round_burn_remaining = 0
        self.hand = 0
        self.round = None
        self.held = {}
        self.last_decided = None
        self.decided_at = None
        self.unneeded_count = 0
        self.cut_card_seen = False
        self.last_hand = None
        self.offered_hand = None
        self.offered_bets = []
        self.dies = {}
        self.next_round_holds = []
        self.camera_fill = None
        self.results = []
        self._flow_waiting()
        self.round_ids = {}
        self.burn_signalled = False

    def _flow_waiting(self) -> None:
        self.flow_phase = FlowPhase.WAITING
        self.flow_round_id = None
        self.flow_closes_at = None

    def _card_dealt(self, e: Event) -> None:
        d = e.data
        code = d["card"]
        self.counts[code] = self.counts.get(code, 0) + 1
        self.cards_out += 1
        slot = d["slot"]
        if slot == _INDICATOR:
            self.burn_remaining = d["burn_count"]
            self.phase = _BURNING
            if self.burn_remaining == 0:
                self._ready_for_next_round(None)
        elif slot == _BURN:
            reason = d["burn"]
            if reason == _OPENING:
                self.burn_remaining -= 1
                if self.burn_remaining == 0:
                    self._ready_for_next_round(None)
            elif reason == _ROUND_BURN:
                self.round_burn_remaining -= 1
            elif reason == _SIGNALLED:  # a slotless reader's marked burn (BURN_STARTED)
                self.round_burn_remaining = max(0, self.round_burn_remaining - 1)
            else:  # unneeded: the next round's burn (daemon/rules/RULES.md dealing mistake 1)
                self.unneeded_count += 1
                self.round_burn_remaining = max(0, self.round_burn_remaining - 1)
                self.decided_at = d["read"]["read_at"] if "read" in d else e.at
        else:
            hand = d["round"]
            rnd = self.round_for(hand)
            assert rnd is not None, f"card_dealt for unknown hand {hand}"
            rnd.cards[slot] = code
            rnd.sources[slot] = d["source"]
            if d.get("unneeded"):
                self.unneeded_count += 1
            if d.get("fills_rescan"):
                read_at = d["read"]["read_at"] if "read" in d else e.at
                self.camera_fill = {"hand": rnd.hand, "slot": slot, "card": code, "at": read_at}

    def _card_outside_game(self, e: Event) -> None:
        if e.data["counted"]:  # a real card left the shoe, though it was never dealt
            code = e.data["card"]
            self.counts[code] = self.counts.get(code, 0) + 1
            self.cards_out += 1

    def _card_refused(self, e: Event) -> None:
        d = e.data
        if d["counted"]:  # the card left the shoe, though it was never dealt
            code = d["card"]
            self.counts[code] = self.counts.get(code, 0) + 1
            self.cards_out += 1
        self.storage_refused = d["refused"]
        alert = self.alerts.get(d["alert_id"])
        if alert is not None:  # a fresh copy: the raised event's own data stays as published
            self.alerts[d["alert_id"]] = _with_refused(alert, d["refused"])

    def _cards_refused(self, e: Event) -> None:
        """A summary of refused cards absorbed into their episode (``aggregate.py``)."""
        d = e.data
        for code, k in d["counted"].items():
            self.counts[code] = self.counts.get(code, 0) + k
            self.cards_out += k
        if d["alert_id"] == self.storage_alert:
            self.storage_refused = d["refused"]
        alert = self.alerts.get(d["alert_id"])
        if alert is not None:  # a fresh copy, as for card_refused
            self.alerts[d["alert_id"]] = _with_refused(alert, d["refused"])

    def _storage_state(self, e: Event) -> None:
        self.storage_full = e.data["full"]
        self.storage_detail = e.data["detail"]

    def _round_opened(self, e: Event) -> None:
        hand = e.data["hand"]
        self.hand = hand
        self.round = RoundState(hand=hand, opened_at=e.at, die=self.dies.pop(hand, None))
        holds = self.next_round_holds
        # A card refused over the shoe's composition is somewhere on the layout or in the
        # discard until a supervisor settles it: every round dealt meanwhile is held too.
        for alert_id, alert in self.alerts.items():
            if alert["code"] == _OVER_COMPOSITION and alert_id not in holds:
                holds.append(alert_id)
        self.round.holds = holds
        self.next_round_holds = []
        self.phase = _ROUND
        round_id = e.data.get("round_id")
        if round_id is not None:
            self.round_ids[hand] = round_id

    def _round_decided(self, rnd: RoundState, decided_at: float) -> None:
        self.last_decided = {"hand": rnd.hand, "cards": dict(rnd.cards), "at": decided_at}
        self.round = None
        self._ready_for_next_round(decided_at)
        if self.flow_phase != FlowPhase.WAITING:
            self._flow_waiting()

    def _round_held(self, e: Event) -> None:
        rnd = self.round
        assert rnd is not None, "round_held without a round in progress"
        assert rnd.hand == e.data["hand"], "round_held for another round than the one in progress"
        rnd.awaiting_verdict = e.data["awaiting_verdict"]
        self.held[rnd.hand] = rnd
        self._round_decided(rnd, e.data["decided_at"])

    def _round_completed(self, e: Event) -> None:
        hand = e.data["hand"]
        line = result_line(hand, e.data["outcome"])
        results = self.results
        at = len(results)
        while at > 0 and results[at - 1]["hand"] > hand:  # a held round completes after later ones
            at -= 1
        results.insert(at, line)
        if self.round is not None and self.round.hand == hand:
            self._round_decided(self.round, e.data["decided_at"])
        else:
            self.held.pop(hand, None)

    def _round_voided(self, e: Event) -> None:
        hand = e.data["hand"]
        if e.data.get("was_completed"):
            self.results = [r for r in self.results if r["hand"] != hand]
        if self.last_decided is not None and self.last_decided["hand"] == hand:
            self.last_decided = None  # nothing left to cross-check or to void again
        if self.round is not None and self.round.hand == hand:
            self.round = None
            self._ready_for_next_round(None)
            if self.flow_phase != FlowPhase.WAITING:
                self._flow_waiting()
        else:
            self.held.pop(hand, None)
        if e.data.get("opening_burn"):
            # Round 1's cards were the forgotten opening burn (they stay counted): the next round
            # is round 1 again.
            self.hand = hand - 1
            self._ready_for_next_round(None)

    def _round_corrected(self, e: Event) -> None:
        rnd = self.round_for(e.data["hand"])
        assert rnd is not None, "round_corrected for an unknown hand"
        after: dict[str, str] = e.data["after"]
        rnd.sources = {s: rnd.sources.get(s, "supervisor") for s in after}
        from_burn = e.data.get("from_unneeded_burn", ())
        for slot in e.data["supplied"]:
            rnd.sources[slot] = "supervisor"
            if slot in from_burn:
                continue  # the unneeded burn card, counted when it was burned
            code = after[slot]
            self.counts[code] = self.counts.get(code, 0) + 1
            self.cards_out += 1
        rnd.cards = {s: after[s] for s in ROUND_SLOTS if s in after}
        rnd.corrected = True

    def _hold_resolved(self, e: Event) -> None:
        rnd = self.round_for(e.data["hand"])
        if rnd is not None:
            rnd.holds = []
            rnd.awaiting_verdict = False

    def _verdict_checked(self, e: Event) -> None:
        hand = e.data.get("hand")
        rnd = self.held.get(hand) if isinstance(hand, int) else None
        if rnd is not None:
            rnd.awaiting_verdict = False

    def _bets_offered(self, e: Event) -> None:
        self.offered_hand = e.data["hand"]
        self.offered_bets = list(e.data["bets"])

    def _cut_card(self, e: Event) -> None:
        self.cut_card_seen = True

    def _last_round(self, e: Event) -> None:
        self.last_hand = e.data["hand"]

    def _shoe_ended(self, e: Event) -> None:
        self.phase = Phase.OVER
        self.shoe_end_reason = e.data["reason"]
        self.next_round_holds = []  # no next round: such alerts stay open for acknowledgement
        self._flow_waiting()
        self.burn_signalled = False
        if e.data["reason"] != "cut_card":
            self.round = None
            self.held = {}

    def _alert_raised(self, e: Event) -> None:
        d = e.data
        alert_id = d["alert_id"]
        self.alerts[alert_id] = cast(AlertData, d)  # the event's own data (as published)
        self.alert_counter = max(self.alert_counter, engine_alert_number(alert_id))
        code = d["code"]
        if code == AlertCode.RESCAN_NEEDED:
            self.rescan_alert = alert_id
        if code == AlertCode.AMBIGUOUS_RESCAN:
            self.camera_fill = None
        if code == AlertCode.SHOE_SETTINGS_DIFFER:
            self.settings_notice_shoe = e.shoe_id
        if code == AlertCode.JOURNAL_FULL_CARD_REFUSED:
            self.storage_alert = alert_id
            self.storage_refused = 0
        holds = d.get("holds")
        if holds == "next_round":
            self.next_round_holds.append(alert_id)
        elif isinstance(holds, int):
            rnd = self.round_for(holds)
            if rnd is not None:
                rnd.holds.append(alert_id)

    def _alert_cleared(self, e: Event) -> None:
        alert_id = e.data["alert_id"]
        self.alerts.pop(alert_id, None)
        if alert_id == self.rescan_alert:
            self.rescan_alert = None
        if alert_id == self.storage_alert:
            self.storage_alert = None
            self.storage_refused = 0
        if alert_id in self.next_round_holds:
            self.next_round_holds = [a for a in self.next_round_holds if a != alert_id]
        for rnd in [*([self.round] if self.round is not None else []), *self.held.values()]:
            if alert_id in rnd.holds:
                rnd.holds = [a for a in rnd.holds if a != alert_id]

    def _read_held(self, e: Event) -> None:
        read: ReadFields = e.data["read"]
        self.held_reads.append(read)
        self.hold_counter = max(self.hold_counter, read["hold_id"])

    def _pull_released(self, e: Event) -> None:
        released = set(e.data["hold_ids"])
        self.held_reads = [r for r in self.held_reads if r["hold_id"] not in released]

    def _card_confirmed(self, e: Event) -> None:
        self.camera_fill = None

    def _device_connection(self, e: Event) -> None:
        device = e.data["device"]
        self._note_reader_device(device)
        if e.data["connected"]:
            self.disconnected = [d for d in self.disconnected if d != device]
        elif device not in self.disconnected:
            self.disconnected = sorted([*self.disconnected, device])

    def _super_round_die(self, e: Event) -> None:
        hand, value = e.data["hand"], e.data["value"]
        rnd = self.round_for(hand)
        if rnd is not None:
            rnd.die = value
        else:
            self.dies[hand] = value

    def _betting_opened(self, e: Event) -> None:
        self.flow_phase = FlowPhase.BETTING
        self.flow_round_id = e.data["round_id"]
        self.flow_closes_at = e.data.get("closes_at")
        self.flow_windows += 1
        if e.data["round_id"] is not None:
            self.last_round_id = e.data["round_id"]

    def _betting_closed(self, e: Event) -> None:
        self.flow_phase = FlowPhase.DEALING
        self.flow_closes_at = None

    def _shoe_signal(self, e: Event) -> None:
        kind = e.data["signal"]
        if not e.data["applied"]:
            return
        if kind == "burn_started":
            self.burn_signalled = True
        elif kind == "burn_ended":
            self.burn_signalled = False

    def _reader_command_requested(self, e: Event) -> None:
        if e.data.get("actor") == GAME_FLOW_ACTOR:
            self.lock_request = {"action": e.data["action"], "command_id": e.data["command_id"]}

    def _reader_status(self, e: Event) -> None:
        request = self.lock_request
        if request is not None and e.data.get("command_id") == request["command_id"]:
            self.lock_request = None  # answered (confirmed, or refused: alerted)

    # ------------------------------------------------------------------ views
    def open_alert_ids(self, code: str, device: str | None = None) -> list[str]:
        """Ids of open alerts with this code (and device, when given)."""
        return [
            a
            for a, d in self.alerts.items()
            if d["code"] == code and (device is None or d.get("device") == device)
        ]

    def comparable(self) -> dict[str, Any]:
        """Every field as plain data (for equality checks between live and restored engines)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "settings":
                continue
            value = getattr(self, name)
            if isinstance(value, RoundState):
                value = value.to_dict()
            elif name == "held":
                value = {h: r.to_dict() for h, r in value.items()}
            out[name] = value
        return out


def _with_refused(alert: AlertData, refused: int) -> AlertData:
    """A fresh copy of ``alert`` whose details count ``refused`` cards: the raised event's own data
    stays as it was published."""
    return {**alert, "details": {**alert["details"], "refused": refused}}


_APPLY: dict[str, Callable[[TableState, Event], None]] = {
    EventKind.SHOE_STARTED: TableState._shoe_started,
    EventKind.CARD_DEALT: TableState._card_dealt,
    EventKind.CARD_OUTSIDE_GAME: TableState._card_outside_game,
    EventKind.CARD_REFUSED: TableState._card_refused,
    EventKind.CARDS_REFUSED: TableState._cards_refused,
    EventKind.STORAGE_STATE: TableState._storage_state,
    EventKind.ROUND_OPENED: TableState._round_opened,
    EventKind.ROUND_HELD: TableState._round_held,
    EventKind.ROUND_COMPLETED: TableState._round_completed,
    EventKind.ROUND_VOIDED: TableState._round_voided,
    EventKind.ROUND_CORRECTED: TableState._round_corrected,
    EventKind.HOLD_RESOLVED: TableState._hold_resolved,
    EventKind.VERDICT_CHECKED: TableState._verdict_checked,
    EventKind.BETS_OFFERED: TableState._bets_offered,
    EventKind.CUT_CARD: TableState._cut_card,
    EventKind.LAST_ROUND: TableState._last_round,
    EventKind.SHOE_ENDED: TableState._shoe_ended,
    EventKind.ALERT_RAISED: TableState._alert_raised,
    EventKind.ALERT_CLEARED: TableState._alert_cleared,
    EventKind.READ_HELD: TableState._read_held,
    EventKind.PULL_RELEASED: TableState._pull_released,
    EventKind.CARD_CONFIRMED: TableState._card_confirmed,
    EventKind.DEVICE_CONNECTION: TableState._device_connection,
    EventKind.SUPER_ROUND_DIE: TableState._super_round_die,
    EventKind.BETTING_OPENED: TableState._betting_opened,
    EventKind.BETTING_CLOSED: TableState._betting_closed,
    EventKind.SHOE_SIGNAL: TableState._shoe_signal,
    EventKind.READER_COMMAND_REQUESTED: TableState._reader_command_requested,
    EventKind.READER_STATUS: TableState._reader_status,
}
