"""The shoe audit's part of the fold: what ``TableState.apply`` notes for the shoe's certificate
and the irregular-shoe detectors (``shoe_audit.py`` reads it).

Every card that comes out of the shoe and is counted against its composition is noted in dealt
order (``TableState.audit_cards``); the ones that end up in no completed round are also noted by
where they went (``audit_places``: burned, exposed, voided, extras, and ``foreign``: a card refused
over the composition, never counted). The cards of completed rounds are the rest of the shoe's
counts, so a correction that supplies or moves a card needs no second bookkeeping. The remainder
count's cards (``remainder``) and the table's recent shoes (``recent_shoes``, kept across shoes
for the repeated-stretch detector) are folded here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from daemon.alerts import AlertCode
from daemon.audit.streaks import encode_codes
from daemon.engine.events import Event, EventKind
from daemon.engine.phases import BurnKind, CardPlace

if TYPE_CHECKING:
    from daemon.engine.state import TableState

BURNED = "burned"
EXPOSED = "exposed"
VOIDED = "voided"
EXTRAS = "extras"
FOREIGN = "foreign"
"""The keys of ``TableState.audit_places``."""

END_STAGE = "end"
REMAINDER_STAGE = "remainder"
"""A ``shoe_certificate``'s ``stage``: at the shoe's end, after a remainder count."""

WINNER_LETTERS = {"player": "P", "banker": "B", "tie": "T"}

# Bound once (an enum member through its class costs a metaclass lookup; this runs per card).
_INDICATOR = CardPlace.INDICATOR
_BURN = CardPlace.BURN
_UNNEEDED = BurnKind.UNNEEDED


class RecentShoe(TypedDict):
    """A finished shoe as the table keeps it for the repeated-stretch detector: its cards in
    dealt order (``daemon.audit.streaks.encode``'s bytes, in hex) and its rounds' winners
    (``P``/``B``/``T``)."""

    shoe_id: str
    cards: str
    winners: str


def _put(st: TableState, place: str, code: str) -> None:
    st.audit_places.setdefault(place, []).append(code)


def _take(st: TableState, place: str, code: str) -> bool:
    cards = st.audit_places.get(place)
    if cards is None or code not in cards:
        return False
    cards.remove(code)
    return True


def _shoe_started(st: TableState, e: Event) -> None:
    st.audit_cards = []
    st.audit_places = {}
    st.remainder = None
    st.certified = None


def _card_dealt(st: TableState, e: Event) -> None:
    data = e.data
    code = data["card"]
    if data.get("from_outside_game"):
        # exposed during betting, then made a round's card by a late close: noted when it was drawn
        if not _take(st, EXPOSED, code):
            _take(st, EXTRAS, code)
    else:
        st.audit_cards.append(code)
    slot = data["slot"]
    if slot == _INDICATOR:
        _put(st, BURNED, code)
    elif slot == _BURN:
        _put(st, EXTRAS if data["burn"] == _UNNEEDED else BURNED, code)


def _card_outside_game(st: TableState, e: Event) -> None:
    if e.data["counted"]:
        code = e.data["card"]
        st.audit_cards.append(code)
        _put(st, EXPOSED if e.data.get("mode") == "betting" else EXTRAS, code)


def _card_refused(st: TableState, e: Event) -> None:
    if e.data["counted"]:
        st.audit_cards.append(e.data["card"])
        _put(st, EXTRAS, e.data["card"])


def _cards_refused(st: TableState, e: Event) -> None:
    for code, k in e.data["counted"].items():
        for _ in range(k):
            st.audit_cards.append(code)
            _put(st, EXTRAS, code)


def _round_voided(st: TableState, e: Event) -> None:
    place = BURNED if e.data.get("opening_burn") else VOIDED
    for code in e.data["cards"].values():
        _put(st, place, code)


def _round_corrected(st: TableState, e: Event) -> None:
    after: dict[str, str] = e.data["after"]
    moved = {*e.data.get("from_unneeded_burn", ()), *e.data.get("from_outside_game", ())}
    for slot in e.data["supplied"]:
        code = after[slot]
        if slot in moved:  # a card counted in no round put into this one
            if not _take(st, EXTRAS, code):
                _take(st, EXPOSED, code)
        else:
            st.audit_cards.append(code)  # a card the reader never delivered, supplied now


def _alert_raised(st: TableState, e: Event) -> None:
    # a reader's card over the composition is refused and never counted: a foreign card (or a
    # misread, which its rescan shows); a camera read of it would be the same card again
    if e.data["code"] == AlertCode.OVER_COMPOSITION and e.source != "camera":
        _put(st, FOREIGN, e.data["details"]["card"])


def _remainder_count_started(st: TableState, e: Event) -> None:
    st.remainder = []


def _remainder_card(st: TableState, e: Event) -> None:
    if st.remainder is not None:
        st.remainder.append(e.data["card"])


def _shoe_certificate(st: TableState, e: Event) -> None:
    stage = e.data["stage"]
    st.certified = stage
    if stage == REMAINDER_STAGE:
        st.remainder = None
        return
    keep = st.settings.audit.irregular.recent_shoes
    winners = "".join(WINNER_LETTERS[r["winner"]] for r in st.results)
    cards = encode_codes(st.audit_cards).hex()
    shoe: RecentShoe = {"shoe_id": e.data["shoe_id"], "cards": cards, "winners": winners}
    # a shoe certified again (ended by its cut card, then voided) replaces its first record
    earlier = [s for s in st.recent_shoes if s["shoe_id"] != shoe["shoe_id"]]
    st.recent_shoes = [*earlier, shoe][-keep:] if keep else []


AUDIT_APPLY: dict[str, Callable[[TableState, Event], None]] = {
    EventKind.SHOE_STARTED: _shoe_started,
    EventKind.CARD_DEALT: _card_dealt,
    EventKind.CARD_OUTSIDE_GAME: _card_outside_game,
    EventKind.CARD_REFUSED: _card_refused,
    EventKind.CARDS_REFUSED: _cards_refused,
    EventKind.ROUND_VOIDED: _round_voided,
    EventKind.ROUND_CORRECTED: _round_corrected,
    EventKind.ALERT_RAISED: _alert_raised,
    EventKind.REMAINDER_COUNT_STARTED: _remainder_count_started,
    EventKind.REMAINDER_CARD: _remainder_card,
    EventKind.SHOE_CERTIFICATE: _shoe_certificate,
}
"""The audit's fold, one function per event kind, run after ``fold.APPLY``'s."""
