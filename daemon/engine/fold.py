"""The fold: how each event changes the table's state (``TableState.apply`` runs it).

One function per event kind (``APPLY``); an event of a kind not listed changes nothing. Every read
an event carries (``data["read"]``) is noted too (``note_read``): the reader devices, the memory
of recent transmissions for duplicates, and the position of a pull.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from common.inputs import ShoeSignalKind, Source
from common.slots import ROUND_SLOTS
from daemon.alerts import AlertCode, engine_alert_number
from daemon.engine.events import Event, EventKind
from daemon.engine.payloads import AlertData, ExposedRead, ReadFields
from daemon.engine.phases import (
    GAME_FLOW_ACTOR,
    LAST_ROUND_ENDS,
    NEXT_ROUND,
    BurnKind,
    CardPlace,
    FlowPhase,
    Phase,
)
from daemon.engine.reveal_fold import card_revealed, forget_round, note_commitment
from daemon.engine.rounds import RoundState, find_loose, oldest_loose_hand, result_line, rounds_skipped

if TYPE_CHECKING:
    from daemon.engine.state import TableState

# Bound once: ``Phase.X`` goes through the enum metaclass's ``__getattr__`` (~0.1 µs in
# Python 3.11), and the fold runs for every event.
_BURNING = Phase.BURNING
_READY = Phase.READY
_ROUND = Phase.ROUND
_OVER_COMPOSITION = AlertCode.OVER_COMPOSITION
_INDICATOR = CardPlace.INDICATOR
_BURN = CardPlace.BURN
_OPENING = BurnKind.OPENING
_ROUND_BURN = BurnKind.ROUND
_SIGNALLED = BurnKind.SIGNALLED
_READER = Source.READER
_CAMERA = Source.CAMERA


def _note_reader_device(st: TableState, device: str) -> None:
    if device not in st.reader_devices and device not in st.settings.camera.devices:
        st.reader_devices = sorted([*st.reader_devices, device])


def note_read(st: TableState, read: ReadFields, *, advance_pull: bool) -> None:
    source = read.get("source")
    if source == _READER and read["device"] not in st.reader_devices:  # (new devices only)
        _note_reader_device(st, read["device"])
    tid = read.get("transmission_id")
    card = read.get("card")
    if tid is not None and card is not None:
        key = (read["device"], tid, card)
        st.recent.pop(key, None)
        st.recent[key] = read["read_at"]
        if len(st.recent) > st.settings.duplicate_memory:
            del st.recent[next(iter(st.recent))]
    position = read.get("position")
    if advance_pull and source != _CAMERA:
        if position is not None:
            device = read["device"]
            st.pull_next[device] = position + 1
            # A held read released late keeps its own (older) time: the pull is as recent
            # as its newest card.
            last = st.pull_last_at.get(device)
            st.pull_last_at[device] = read["read_at"] if last is None else max(last, read["read_at"])
        elif st.pull_next:
            # A card read without a position ends that device's pull: a late card of the
            # pull is then not appended after it (its order is unknown: it waits as a gap).
            st.pull_next.pop(read["device"], None)
            st.pull_last_at.pop(read["device"], None)


def _ready_for_next_round(st: TableState, decided_at: float | None) -> None:
    st.phase = _READY
    st.decided_at = decided_at
    st.unneeded_count = 0
    cfg = st.settings
    st.round_burn_remaining = cfg.round_burn_cards if cfg.burn_before_each_round else 0


def _shoe_started(st: TableState, e: Event) -> None:
    st.shoes_started += 1
    st.shoe_id = e.data["shoe_id"]
    st.alert_counter = 0
    st.phase = Phase.INDICATOR
    st.shoe_end_reason = None
    st.counts = {}
    st.cards_out = 0
    st.burn_remaining = 0
    st.round_burn_remaining = 0
    st.hand = 0
    st.round = None
    st.held = {}
    st.last_decided = None
    st.decided_at = None
    st.unneeded_count = 0
    st.cut_card_seen = False
    st.last_hand = None
    st.offered_hand = None
    st.offered_bets = []
    st.dies = {}
    st.next_round_holds = []
    st.camera_fill = None
    st.results = []
    st.sealed_slots = {}
    _flow_waiting(st)
    st.round_ids = {}
    st.burn_signalled = False
    st.loose_cards = []
    st.last_card_at = e.at
    st.rounds_lost = 0


def _flow_waiting(st: TableState) -> None:
    st.flow_phase = FlowPhase.WAITING
    st.flow_round_id = None
    st.flow_closes_at = None
    st.flow_closed_at = None
    st.flow_exposed = []


def _card_dealt(st: TableState, e: Event) -> None:
    d = e.data
    if "commitment" in d:
        note_commitment(st, d)
    code = d["card"]
    if d.get("from_outside_game"):
        # exposed during betting, then made the round's by a late close: counted once, when drawn
        index = find_loose(st.loose_cards, code, "outside", d.get("round", st.hand + 1))
        if index is not None:
            del st.loose_cards[index]
    else:
        st.counts[code] = st.counts.get(code, 0) + 1
        st.cards_out += 1
    st.last_card_at = e.at
    slot = d["slot"]
    if slot == _INDICATOR:
        st.burn_remaining = d["burn_count"]
        st.phase = _BURNING
        if st.burn_remaining == 0:
            _ready_for_next_round(st, None)
    elif slot == _BURN:
        reason = d["burn"]
        if reason == _OPENING:
            st.burn_remaining -= 1
            if st.burn_remaining == 0:
                _ready_for_next_round(st, None)
        elif reason == _ROUND_BURN:
            st.round_burn_remaining -= 1
        elif reason == _SIGNALLED:  # a slotless reader's marked burn (BURN_STARTED)
            st.round_burn_remaining = max(0, st.round_burn_remaining - 1)
        else:  # unneeded: the next round's burn (daemon/rules/RULES.md dealing mistake 1)
            st.loose_cards.append({"card": code, "place": "burn", "hand": st.hand})
            st.unneeded_count += 1
            st.round_burn_remaining = max(0, st.round_burn_remaining - 1)
            st.decided_at = d["read"]["read_at"] if "read" in d else e.at
    else:
        hand = d["round"]
        rnd = st.round_for(hand)
        assert rnd is not None, f"card_dealt for unknown hand {hand}"
        rnd.cards[slot] = code
        rnd.sources[slot] = d["source"]
        if d.get("unneeded"):
            st.unneeded_count += 1
        if d.get("fills_rescan"):
            read_at = d["read"]["read_at"] if "read" in d else e.at
            st.camera_fill = {"hand": rnd.hand, "slot": slot, "card": code, "at": read_at}


def _card_outside_game(st: TableState, e: Event) -> None:
    st.last_card_at = e.at
    if e.data["counted"]:  # a real card left the shoe, though it was never dealt
        code = e.data["card"]
        st.counts[code] = st.counts.get(code, 0) + 1
        st.cards_out += 1
        if st.phase not in (Phase.NO_SHOE, Phase.OVER):
            st.loose_cards.append({"card": code, "place": "outside", "hand": st.hand})
    if e.data["mode"] == "betting" and "read" in e.data:
        read = cast(ReadFields, {k: v for k, v in e.data["read"].items() if k != "mode"})
        exposed: ExposedRead = {
            "card": e.data["card"],
            "read_at": read["read_at"],
            "counted": e.data["counted"],
            "read": read,
        }
        st.flow_exposed.append(exposed)


def _card_refused(st: TableState, e: Event) -> None:
    d = e.data
    if d["counted"]:  # the card left the shoe, though it was never dealt
        code = d["card"]
        st.counts[code] = st.counts.get(code, 0) + 1
        st.cards_out += 1
    if d["alert_id"] == st.storage_alert:  # (a squeeze card before its reveal is no storage refusal)
        st.storage_refused = d["refused"]
    alert = st.alerts.get(d["alert_id"])
    if alert is not None:  # a fresh copy: the raised event's own data stays as published
        st.alerts[d["alert_id"]] = _with_refused(alert, d["refused"])


def _cards_refused(st: TableState, e: Event) -> None:
    """A summary of refused cards absorbed into their episode (``aggregate.py``)."""
    d = e.data
    for code, k in d["counted"].items():
        st.counts[code] = st.counts.get(code, 0) + k
        st.cards_out += k
    if d["alert_id"] == st.storage_alert:
        st.storage_refused = d["refused"]
    alert = st.alerts.get(d["alert_id"])
    if alert is not None:  # a fresh copy, as for card_refused
        st.alerts[d["alert_id"]] = _with_refused(alert, d["refused"])


def _storage_state(st: TableState, e: Event) -> None:
    st.storage_full = e.data["full"]
    st.storage_detail = e.data["detail"]


def _round_opened(st: TableState, e: Event) -> None:
    hand = e.data["hand"]
    st.hand = hand
    st.round = RoundState(hand=hand, opened_at=e.at, die=st.dies.pop(hand, None), lost_before=st.rounds_lost)
    holds = st.next_round_holds
    # A card refused over the shoe's composition is somewhere on the layout or in the
    # discard until a supervisor settles it: every round dealt meanwhile is held too.
    for alert_id, alert in st.alerts.items():
        if alert["code"] == _OVER_COMPOSITION and alert_id not in holds:
            holds.append(alert_id)
    st.round.holds = holds
    st.next_round_holds = []
    st.phase = _ROUND
    round_id = e.data.get("round_id")
    if round_id is not None:
        st.round_ids[hand] = round_id


def _round_decided(st: TableState, rnd: RoundState, decided_at: float) -> None:
    st.last_decided = {"hand": rnd.hand, "cards": dict(rnd.cards), "at": decided_at}
    st.round = None
    _ready_for_next_round(st, decided_at)
    if st.flow_phase != FlowPhase.WAITING:
        _flow_waiting(st)


def _round_held(st: TableState, e: Event) -> None:
    rnd = st.round
    assert rnd is not None, "round_held without a round in progress"
    assert rnd.hand == e.data["hand"], "round_held for another round than the one in progress"
    rnd.awaiting_verdict = e.data["awaiting_verdict"]
    st.held[rnd.hand] = rnd
    _round_decided(st, rnd, e.data["decided_at"])
    if rnd.next_slot() is not None:  # cut short (the next round's betting opened): nothing to cross-check,
        st.last_decided = None  # and it was over on the table before that opening: no card after
        st.decided_at = None  # the opening is its unneeded card (a card drawn in betting is exposed)


def _round_completed(st: TableState, e: Event) -> None:
    hand = e.data["hand"]
    if st.sealed_slots:
        forget_round(st, hand)
    line = result_line(hand, e.data["outcome"])
    results = st.results
    at = len(results)
    while at > 0 and results[at - 1]["hand"] > hand:  # a held round completes after later ones
        at -= 1
    results.insert(at, line)
    if st.round is not None and st.round.hand == hand:
        _round_decided(st, st.round, e.data["decided_at"])
    else:
        st.held.pop(hand, None)


def _round_voided(st: TableState, e: Event) -> None:
    hand = e.data["hand"]
    if st.sealed_slots:
        forget_round(st, hand)
    if e.data.get("was_completed"):
        st.results = [r for r in st.results if r["hand"] != hand]
    if st.last_decided is not None and st.last_decided["hand"] == hand:
        st.last_decided = None  # nothing left to cross-check or to void again
    if st.round is not None and st.round.hand == hand:
        st.round = None
        _ready_for_next_round(st, None)
        if st.flow_phase != FlowPhase.WAITING:
            _flow_waiting(st)
    else:
        st.held.pop(hand, None)
    if e.data.get("opening_burn"):
        # Round 1's cards were the forgotten opening burn (they stay counted): the next round
        # is round 1 again.
        st.hand = hand - 1
        _ready_for_next_round(st, None)


def _round_corrected(st: TableState, e: Event) -> None:
    rnd = st.round_for(e.data["hand"])
    assert rnd is not None, "round_corrected for an unknown hand"
    after: dict[str, str] = e.data["after"]
    rnd.sources = {s: rnd.sources.get(s, "supervisor") for s in after}
    from_burn = e.data.get("from_unneeded_burn", ())
    from_outside = e.data.get("from_outside_game", ())
    for slot in e.data["supplied"]:
        rnd.sources[slot] = "supervisor"
        if slot in from_burn or slot in from_outside:
            # moved from where it was counted (an unneeded burn, a card outside the game)
            place = "burn" if slot in from_burn else "outside"
            oldest = oldest_loose_hand(place, slot, rnd.hand)
            index = find_loose(st.loose_cards, after[slot], place, rnd.hand, oldest_hand=oldest)
            if index is not None:
                del st.loose_cards[index]
            continue
        code = after[slot]
        st.counts[code] = st.counts.get(code, 0) + 1
        st.cards_out += 1
    rnd.cards = {s: after[s] for s in ROUND_SLOTS if s in after}
    rnd.corrected = True


def _hold_resolved(st: TableState, e: Event) -> None:
    rnd = st.round_for(e.data["hand"])
    if rnd is not None:
        rnd.holds = []
        rnd.awaiting_verdict = False


def _verdict_checked(st: TableState, e: Event) -> None:
    hand = e.data.get("hand")
    rnd = st.held.get(hand) if isinstance(hand, int) else None
    if rnd is not None:
        rnd.awaiting_verdict = False


def _bets_offered(st: TableState, e: Event) -> None:
    st.offered_hand = e.data["hand"]
    st.offered_bets = list(e.data["bets"])


def _cut_card(st: TableState, e: Event) -> None:
    st.cut_card_seen = True


def _last_round(st: TableState, e: Event) -> None:
    st.last_hand = e.data["hand"]


def _shoe_ended(st: TableState, e: Event) -> None:
    st.phase = Phase.OVER
    st.shoe_end_reason = e.data["reason"]
    st.next_round_holds = []  # no next round: such alerts stay open for acknowledgement
    _flow_waiting(st)
    st.burn_signalled = False
    if e.data["reason"] not in LAST_ROUND_ENDS:  # (after its last round: held rounds stay)
        st.round = None
        st.held = {}


def _alert_raised(st: TableState, e: Event) -> None:
    d = e.data
    alert_id = d["alert_id"]
    st.alerts[alert_id] = cast(AlertData, d)  # the event's own data (as published)
    st.alert_counter = max(st.alert_counter, engine_alert_number(alert_id))
    code = d["code"]
    if code == AlertCode.RESCAN_NEEDED:
        st.rescan_alert = alert_id
    if code == AlertCode.AMBIGUOUS_RESCAN:
        st.camera_fill = None
    if code == AlertCode.SHOE_SETTINGS_DIFFER:
        st.settings_notice_shoe = e.shoe_id
    if code == AlertCode.JOURNAL_FULL_CARD_REFUSED:
        st.storage_alert = alert_id
        st.storage_refused = 0
    if code == AlertCode.ROUND_ID_OUT_OF_SEQUENCE and d["details"].get("reason") == "skipped" and st.hand:
        # (a skip before the shoe's first round may be the last shoe's rounds: not counted)
        st.rounds_lost += rounds_skipped(d["details"].get("last_round_id"), d["details"].get("round_id"))
    holds = d.get("holds")
    if holds == NEXT_ROUND:
        st.next_round_holds.append(alert_id)
    elif isinstance(holds, int):
        rnd = st.round_for(holds)
        if rnd is not None:
            rnd.holds.append(alert_id)


def _alert_cleared(st: TableState, e: Event) -> None:
    alert_id = e.data["alert_id"]
    st.alerts.pop(alert_id, None)
    if alert_id == st.rescan_alert:
        st.rescan_alert = None
    if alert_id == st.storage_alert:
        st.storage_alert = None
        st.storage_refused = 0
    if alert_id in st.next_round_holds:
        st.next_round_holds = [a for a in st.next_round_holds if a != alert_id]
    for rnd in [*([st.round] if st.round is not None else []), *st.held.values()]:
        if alert_id in rnd.holds:
            rnd.holds = [a for a in rnd.holds if a != alert_id]


def _read_held(st: TableState, e: Event) -> None:
    read: ReadFields = e.data["read"]
    st.held_reads.append(read)
    st.hold_counter = max(st.hold_counter, read["hold_id"])


def _pull_released(st: TableState, e: Event) -> None:
    released = set(e.data["hold_ids"])
    st.held_reads = [r for r in st.held_reads if r["hold_id"] not in released]


def _card_confirmed(st: TableState, e: Event) -> None:
    st.camera_fill = None


def _device_connection(st: TableState, e: Event) -> None:
    device = e.data["device"]
    _note_reader_device(st, device)
    if e.data["connected"]:
        st.disconnected = [d for d in st.disconnected if d != device]
    elif device not in st.disconnected:
        st.disconnected = sorted([*st.disconnected, device])


def _super_round_die(st: TableState, e: Event) -> None:
    hand, value = e.data["hand"], e.data["value"]
    rnd = st.round_for(hand)
    if rnd is not None:
        rnd.die = value
    else:
        st.dies[hand] = value


def _betting_opened(st: TableState, e: Event) -> None:
    st.flow_phase = FlowPhase.BETTING
    st.flow_round_id = e.data["round_id"]
    st.flow_closes_at = e.data.get("closes_at")
    st.flow_windows += 1
    if e.data["round_id"] is not None:
        st.last_round_id = e.data["round_id"]
    st.flow_exposed = []


def _betting_closed(st: TableState, e: Event) -> None:
    st.flow_phase = FlowPhase.DEALING
    st.flow_closes_at = None
    st.flow_closed_at = e.at
    st.flow_exposed = []


def _clock_status(st: TableState, e: Event) -> None:
    st.clock_synchronised = e.data["synchronised"]
    st.clock_detail = e.data["detail"]


def _shoe_signal(st: TableState, e: Event) -> None:
    kind = e.data["signal"]
    if not e.data["applied"]:
        return
    if kind == ShoeSignalKind.BURN_STARTED:
        st.burn_signalled = True
    elif kind == ShoeSignalKind.BURN_ENDED:
        st.burn_signalled = False


def _reader_command_requested(st: TableState, e: Event) -> None:
    if e.data.get("actor") == GAME_FLOW_ACTOR:
        st.lock_request = {"action": e.data["action"], "command_id": e.data["command_id"]}


def _reader_status(st: TableState, e: Event) -> None:
    request = st.lock_request
    if request is not None and e.data.get("command_id") == request["command_id"]:
        st.lock_request = None  # answered (confirmed, or refused: alerted)


def _dealer_changed(st: TableState, e: Event) -> None:
    st.dealer = {"dealer_id": e.data["dealer_id"], "name": e.data.get("name"), "since": e.at}


def _with_refused(alert: AlertData, refused: int) -> AlertData:
    """A fresh copy of ``alert`` whose details count ``refused`` cards: the raised event's own data
    stays as it was published."""
    return {**alert, "details": {**alert["details"], "refused": refused}}


APPLY: dict[str, Callable[[TableState, Event], None]] = {
    EventKind.SHOE_STARTED: _shoe_started,
    EventKind.CARD_DEALT: _card_dealt,
    EventKind.CARD_OUTSIDE_GAME: _card_outside_game,
    EventKind.CARD_REFUSED: _card_refused,
    EventKind.CARDS_REFUSED: _cards_refused,
    EventKind.STORAGE_STATE: _storage_state,
    EventKind.ROUND_OPENED: _round_opened,
    EventKind.ROUND_HELD: _round_held,
    EventKind.ROUND_COMPLETED: _round_completed,
    EventKind.ROUND_VOIDED: _round_voided,
    EventKind.ROUND_CORRECTED: _round_corrected,
    EventKind.HOLD_RESOLVED: _hold_resolved,
    EventKind.VERDICT_CHECKED: _verdict_checked,
    EventKind.BETS_OFFERED: _bets_offered,
    EventKind.CUT_CARD: _cut_card,
    EventKind.LAST_ROUND: _last_round,
    EventKind.SHOE_ENDED: _shoe_ended,
    EventKind.ALERT_RAISED: _alert_raised,
    EventKind.ALERT_CLEARED: _alert_cleared,
    EventKind.READ_HELD: _read_held,
    EventKind.PULL_RELEASED: _pull_released,
    EventKind.CARD_CONFIRMED: _card_confirmed,
    EventKind.DEVICE_CONNECTION: _device_connection,
    EventKind.SUPER_ROUND_DIE: _super_round_die,
    EventKind.BETTING_OPENED: _betting_opened,
    EventKind.BETTING_CLOSED: _betting_closed,
    EventKind.CLOCK_STATUS: _clock_status,
    EventKind.SHOE_SIGNAL: _shoe_signal,
    EventKind.READER_COMMAND_REQUESTED: _reader_command_requested,
    EventKind.READER_STATUS: _reader_status,
    EventKind.DEALER_CHANGED: _dealer_changed,
    EventKind.CARD_REVEALED: card_revealed,
}
