"""The shapes of the data the engine keeps in its state and puts in events.

Each is a ``TypedDict``: at run time a plain dict (what JSON gives back when the state is folded
from stored events or a checkpoint), checked by the type checker wherever the engine builds or
reads one. Event ``data`` and an alert's ``details`` stay JSON objects: their keys are the
contract's (``daemon/mqtt/contract/``) and the alert catalogue's (``daemon/alerts.py``).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ReadFields(TypedDict):
    """A read as events carry it (``data["read"]``): a reader's or camera's card, a misread, or a
    card drawn outside the game flow (``reads.py`` builds each)."""

    source: str
    device: str
    read_at: float
    raw: str | None
    card: str | None
    """None for a misread."""
    position: int | None
    target: NotRequired[str | None]
    transmission_id: NotRequired[str | None]
    confidence: NotRequired[float | None]
    failed: NotRequired[str]
    """A misread's reason."""
    code: NotRequired[int | None]
    """A misread's reader error code."""
    mode: NotRequired[str]
    """A card drawn outside the game flow: how."""
    hold_id: NotRequired[int]
    """A read held in a pull (``read_held``): its number, in order of holding."""
    nonce: NotRequired[str]
    """A squeeze table's card: the secret nonce its commitment is made with (sealed)."""


class AlertData(TypedDict):
    """An open alert, as its ``alert_raised`` event says (``data``); ``details`` by the catalogue."""

    alert_id: str
    code: str
    message: str
    hand: int | None
    holds: int | str | None
    """A hand, ``"next_round"`` or None."""
    device: str | None
    details: dict[str, Any]
    read: NotRequired[ReadFields]


class DealerOnTable(TypedDict):
    """The dealer on the table (the last ``dealer_changed``): who, and since when."""

    dealer_id: str
    name: str | None
    since: float


class SealedSlot(TypedDict):
    """A squeeze round's card as the engine keeps it until the round ends: where it is, its
    commitment, its secret nonce and when it was revealed (None: not yet)."""

    hand: int
    slot: str
    commitment: str
    nonce: str
    revealed_at: float | None


class LockRequest(TypedDict):
    """The shoe lock/unlock the engine asked for with the betting window, until the shoe answers."""

    action: str
    command_id: str


class LooseCard(TypedDict):
    """A card counted out of the shoe that is in no round: burned as unneeded (``place`` "burn") or
    drawn outside the game, e.g. exposed during betting ("outside"). ``hand``: the last round
    opened when it was drawn. A correction may put it back into that round or the next one: it
    is then moved, never counted again."""

    card: str
    place: str
    hand: int


class ExposedRead(TypedDict):
    """A reader's card exposed while the current betting window was open (``card_outside_game``,
    mode "betting"): a late ``close_betting`` issued before it was read makes it the round's card."""

    card: str
    read_at: float
    counted: bool
    read: ReadFields


class CameraFill(TypedDict):
    """A card the camera filled in for a failed reader, until the reader's rescan confirms it."""

    hand: int
    slot: str
    card: str
    at: float


class DecidedRound(TypedDict):
    """The last round decided: what a late camera read or a verdict is checked against."""

    hand: int
    cards: dict[str, str]
    at: float


class ResultLine(TypedDict):
    """A completed round as the shoe's history keeps it; pairs are ``[player, banker]``."""

    hand: int
    winner: str
    totals: list[int]
    pairs: list[bool]
    naturals: list[bool]


class Verdict(TypedDict):
    """A reader's verdict on a round (``verdict_checked``)."""

    outcome: str
    player_pair: bool
    banker_pair: bool
    raw: str | None
    device: str


class ShoeRecord(TypedDict):
    """What a shoe's ``shoe_started`` recorded of its decks and variant."""

    decks: int
    variant: str
    variant_digest: str | None


class ShoeDifference(TypedDict):
    """How the shoe being dealt differs from the configuration (``shoe_settings_differ``)."""

    shoe: dict[str, object]
    configured: dict[str, object]
    variant_available: bool
    pay_table_changed: bool


class WaitingCard(TypedDict):
    """A card waiting below a pull's missing one (``missing_card`` details ``waiting``)."""

    position: int | None
    card: str | None


class OutcomeSummary(TypedDict):
    """A decided round's outcome without its cards (``RoundOutcome.to_dict()``'s other keys, in order)."""

    player_total: int
    banker_total: int
    winner: str
    margin: int
    player_natural: bool
    banker_natural: bool
    player_pair: bool
    banker_pair: bool
    player_suited_pair: bool
    banker_suited_pair: bool
    cards: int
    first_card: str


class RoundOutcomeData(OutcomeSummary):
    """A decided round's outcome (``round_completed`` data ``outcome``): its cards, then the summary."""

    player: list[str]
    banker: list[str]


class BetResolution(TypedDict):
    """How one offered bet resolved (``Resolution.to_dict()``)."""

    outcome: str
    multiplier: str
    multiplier_float: float
