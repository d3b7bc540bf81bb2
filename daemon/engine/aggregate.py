"""Refused cards aggregated per episode, so a dealer dealing on cannot grow the journal.

Two refusals repeat for every card a dealer keeps dealing: a full journal refusing the card
that would open a round (``journal_full_card_refused``), and a card after the shoe's last
round or while no shoe runs (``card_after_last_round`` / ``no_shoe``). Each used to journal
its own event (an alert per card for the latter: the open alerts grew too). Now each
*episode* has one open alert; its cards are recorded like this:

* a full journal: the first :data:`LISTED` refused cards each get their ``card_refused`` event
  (with the read), as before; after the shoe-procedure refusals: the first card raises the alert
  (with its read, ``details.refused`` 1);
* every later card of the episode is **absorbed**: no event, and the service does not journal
  its input either; the engine tallies it and emits one ``cards_refused`` summary per
  :data:`SUMMARY_EVERY` cards, when the oldest absorbed card is :data:`SUMMARY_AFTER_S` old (on
  the next card or idle tick), and before any input the tally cannot wait for (a command, the
  journal having room, a card that is placed, a new shoe...). The summary says how many cards,
  which (their codes in order, the first and last read), how many count against the shoe's
  composition (by code) and the episode's total (``refused``), which the alert's
  ``details.refused`` then shows.

So the journal grows by one summary (~1 kB) per :data:`SUMMARY_EVERY` cards, not by an input
and an event per card. The tally is the engine's only state outside the fold
(:class:`~daemon.engine.state.TableState` changes by the summary alone, so a restored engine is
the live one): a crash loses the cards absorbed since the last summary (at most
``SUMMARY_EVERY - 1`` cards or ``SUMMARY_AFTER_S`` seconds of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.inputs import CardRead, DeviceTarget, EngineInput, ReadFailed, Source, Tick
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.payloads import ReadFields
from daemon.engine.phases import OUTSIDE_SHOE
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

LISTED = 10
"""Cards refused for a full journal that each keep their own ``card_refused`` event."""
SUMMARY_EVERY = 50
"""Absorbed cards per ``cards_refused`` summary at most."""
SUMMARY_AFTER_S = 30.0
"""The oldest absorbed card waits at most this long (by input time) for its summary."""
JOURNAL_FULL = "journal_full"
AFTER_LAST_ROUND = "after_last_round"
NO_SHOE = "no_shoe"


@dataclass(slots=True)
class PendingRefusals:
    """Cards absorbed into one episode's alert since its last summary."""

    reason: str
    alert_id: str
    refused_before: int
    """The episode's total before these cards."""
    first_read: ReadFields
    last_read: ReadFields
    codes: list[str | None] = field(default_factory=list)
    counted: dict[str, int] = field(default_factory=dict)
    not_counted: int = 0
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    """(device, transmission id, card) of the absorbed reads: a resend is not a new card."""

    @property
    def first_at(self) -> float:
        return float(self.first_read["read_at"])


class RefusalEpisodes:
    """The absorbing of repeated refusals into their episode's alert (see the module doc)."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    pending: PendingRefusals | None
    """The cards absorbed since the episode's last summary: the engine's only memory outside the fold."""
    absorbed: bool
    """True when the last input handled was absorbed (no event): the service does not journal it."""

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.pending = None
        self.absorbed = False

    def settle(self, inp: EngineInput) -> None:
        """Before an input: emit the pending summary unless this input may be absorbed too."""
        self.absorbed = False
        pending = self.pending
        if pending is not None and not self._may_absorb(pending, inp):
            self.flush()

    def _may_absorb(self, pending: PendingRefusals, inp: EngineInput) -> bool:
        if isinstance(inp, Tick):
            return inp.at - pending.first_at < SUMMARY_AFTER_S
        if not isinstance(inp, CardRead | ReadFailed) or inp.source is not Source.READER:
            return False
        st = self.state
        if inp.position is not None or st.held_reads or st.rescan_alert is not None:
            return False
        if pending.reason == JOURNAL_FULL:
            return st.storage_full and isinstance(inp, CardRead)
        starts_shoe = (
            self.shoe.settings.device_starts_shoe
            and isinstance(inp, CardRead)
            and inp.target == DeviceTarget.FIRST_CARD
        )
        return st.phase in OUTSIDE_SHOE and not starts_shoe

    def absorb(self, reason: str, alert_id: str | None, code: str | None, fields: ReadFields) -> bool:
        """Absorb this refused card into its episode if the episode is past its listed cards;
        False when the caller records it as before (the first cards, or no open alert)."""
        st = self.state
        alert = None if alert_id is None else st.alerts.get(alert_id)
        if alert_id is None or alert is None:
            return False
        pending = self.pending
        if pending is not None and pending.alert_id != alert_id:
            self.flush()
            pending = None
        if pending is None:
            before = int(alert["details"].get("refused", 1))
            if reason == JOURNAL_FULL:
                before = st.storage_refused
                if before < LISTED:
                    return False
            pending = PendingRefusals(reason, alert_id, before, fields, fields)
            self.pending = pending
        key = (str(fields.get("device")), str(fields.get("transmission_id")), str(code))
        if fields.get("transmission_id") is not None:
            if key in pending.seen:
                self.absorbed = True
                return True  # a resend of a card absorbed already
            pending.seen.add(key)
        pending.codes.append(code)
        pending.last_read = fields
        if reason == JOURNAL_FULL and code is not None:
            seen = st.counts.get(code, 0) + pending.counted.get(code, 0)
            if seen < self.shoe.settings.decks:  # it left the shoe: it counts, as a listed refused card does
                pending.counted[code] = pending.counted.get(code, 0) + 1
            else:
                pending.not_counted += 1
        elif reason == JOURNAL_FULL:
            pending.not_counted += 1
        self.absorbed = True
        if (
            len(pending.codes) >= SUMMARY_EVERY
            or float(fields["read_at"]) - pending.first_at >= SUMMARY_AFTER_S
        ):
            self.flush()
        return True

    def flush(self) -> None:
        """Emit the pending ``cards_refused`` summary (nothing when none is pending)."""
        pending = self.pending
        if pending is None:
            return
        self.pending = None
        if not pending.codes:
            return
        data: dict[str, Any] = {
            "alert_id": pending.alert_id,
            "reason": pending.reason,
            "cards": len(pending.codes),
            "refused": pending.refused_before + len(pending.codes),
            "codes": list(pending.codes),
            "counted": dict(sorted(pending.counted.items())),
            "not_counted": pending.not_counted,
            "first_read": pending.first_read,
            "last_read": pending.last_read,
        }
        self.emitter.emit(
            EventKind.CARDS_REFUSED, float(pending.last_read["read_at"]), pending.last_read["source"], data
        )
