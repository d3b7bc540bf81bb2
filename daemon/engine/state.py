"""The table's state; ``fold.py`` is how each event changes it.

``TableState.apply(event)`` is the only place state changes. The engine decides
events from the state and applies each one as it emits it, so folding the engine's
own event history into a fresh ``TableState`` gives an identical state: that is how
the daemon resumes after a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from daemon.engine.audit_fold import AUDIT_APPLY, RecentShoe
from daemon.engine.events import Event, EventKind
from daemon.engine.fold import APPLY, note_read
from daemon.engine.payloads import (
    AlertData,
    CameraFill,
    DealerOnTable,
    DecidedRound,
    ExposedRead,
    LockRequest,
    LooseCard,
    ReadFields,
    ResultLine,
    SealedSlot,
)
from daemon.engine.phases import (
    DEALING,
    GAME_FLOW_ACTOR,
    OUTSIDE_SHOE,
    FlowPhase,
    Phase,
)
from daemon.engine.rounds import RoundState
from daemon.engine.settings import TableSettings
from daemon.engine.squeeze import SEALED, unsealed

# Bound once: ``Phase.X`` goes through the enum metaclass's ``__getattr__`` (~0.1 µs in
# Python 3.11), and the fold runs for every event.
_READ_HELD = EventKind.READ_HELD

_Fold = Callable[["TableState", Event], None]
# The fold's function and the shoe audit's for each kind, looked up once per event (hashing an
# enum member runs Python code).
_FOLDS: dict[str, tuple[_Fold | None, _Fold | None]] = {
    kind: (APPLY.get(kind), AUDIT_APPLY.get(kind)) for kind in EventKind
}
_NO_FOLD: tuple[None, None] = (None, None)

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
    # game flow (``game_flow: betting_window``): where the betting window is (a
    # ``FlowPhase``), the round id it is for, the last round id opened (kept across shoes: the
    # server's sequence), each of this shoe's rounds' round id, the engine's pending shoe lock
    flow_phase: str = "waiting"
    flow_round_id: str | None = None
    flow_closes_at: float | None = None
    flow_closed_at: float | None = None  # when betting closed, until the window ends
    last_card_at: float | None = None  # the running shoe's last card (or its start), for shoe_silent
    flow_windows: int = 0  # betting windows opened (numbers the engine's lock requests)
    last_round_id: str | None = None
    round_ids: dict[int, str] = field(default_factory=dict)
    lock_request: LockRequest | None = None
    burn_signalled: bool = False  # a slotless reader's BURN_STARTED, until BURN_ENDED
    # the shoe's counted cards in no round (unneeded burns, cards drawn outside the game): a
    # correction putting one into a round moves it, never counts it again
    loose_cards: list[LooseCard] = field(default_factory=list)
    # rounds of the shoe dealt unseen (server round ids skipped): side-bet hand limits count them
    rounds_lost: int = 0
    # the dealer on the table (the last ``dealer_changed``; kept across shoes), None until told
    dealer: DealerOnTable | None = None
    # squeeze tables: each round card's commitment and secret nonce, by "hand/slot", until its
    # round completes or is voided (``squeeze.py``; the journal keeps them, nothing publishes them)
    sealed_slots: dict[str, SealedSlot] = field(default_factory=dict)
    # the cards exposed while the current betting window was open (a late close may claim them)
    flow_exposed: list[ExposedRead] = field(default_factory=list)
    # the table's clock (``clock_status``): None until the service reports it; kept across shoes
    clock_synchronised: bool | None = None
    clock_detail: str | None = None
    # the shoe's audit (``audit_fold.py``): every counted card out of the shoe in dealt order, the
    # ones in no completed round by where they went, the remainder count being made (None: none),
    # the stage of the shoe's last certificate, the table's recent shoes (kept across shoes)
    audit_cards: list[str] = field(default_factory=list)
    audit_places: dict[str, list[str]] = field(default_factory=dict)
    remainder: list[str] | None = None
    certified: str | None = None
    recent_shoes: list[RecentShoe] = field(default_factory=list)

    # ------------------------------------------------------------------ fold
    def apply(self, event: Event) -> None:
        """Fold one event into the state (unknown kinds change nothing)."""
        if SEALED in event.data:  # a squeeze table's event: the fold sees its sealed cards too
            event = event._replace(data=unsealed(event.data))
        handler, audit = _FOLDS.get(event.kind, _NO_FOLD)
        if handler is not None:
            handler(self, event)
        if audit is not None:
            audit(self, event)
        read: ReadFields | None = event.data.get("read")
        if read is not None:
            note_read(self, read, advance_pull=event.kind != _READ_HELD)

    def round_for(self, hand: int) -> RoundState | None:
        """The current round or a held round with this hand number."""
        if self.round is not None and self.round.hand == hand:
            return self.round
        return self.held.get(hand)

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
