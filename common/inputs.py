"""Everything the engine can be fed. Drivers produce these; so does the command channel.

Every input carries ``at``: the monotonic-or-wall time (seconds, float) at which
the driver observed it. The engine never reads a clock.

Inputs are immutable ``NamedTuple`` values (``_replace`` makes a changed copy, ``_fields``
lists the fields). Not frozen dataclasses: their ``__init__`` sets each field through
``object.__setattr__``, which made a ``CardRead`` cost ~2.2 us to build against ~0.4 us, on
the path of every card (bench/README.md, "plain code against the tricks"). Compare inputs of one
type only: like any tuples, two of different types with equal values compare equal.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from common.cards import Card


class Source(StrEnum):
    """Who produced an input (a ``StrEnum``: each member is its string, as events carry it)."""

    READER = "reader"
    CAMERA = "camera"
    SUPERVISOR = "supervisor"
    SYSTEM = "system"


class DeviceTarget(StrEnum):
    """Where the device itself says a card went (Angel Eye target/index byte)."""

    P1 = "P1"
    P2 = "P2"
    P3 = "P3"
    B1 = "B1"
    B2 = "B2"
    B3 = "B3"
    BURN = "burn"
    FIRST_CARD = "first_card"
    BURN_COUNT = "burn_count"


class CardRead(NamedTuple):
    """A card identified by a reader or the camera.

    ``position`` is the card's place within a multi-card pull when the device
    reports one (1 = top card, dealt first). ``target`` is the slot the device
    claims for the card, if it names one. ``transmission_id`` identifies one
    physical read on the device (e.g. the Angel Eye frame sequence mark): two
    reads with the same transmission id and card are one card sent twice, while
    two reads without one are always two cards. ``confidence`` is set by the
    camera (0..1). ``raw`` is the wire form, for audit.
    """

    card: Card
    at: float
    source: Source = Source.READER
    position: int | None = None
    target: DeviceTarget | None = None
    transmission_id: str | None = None
    confidence: float | None = None
    raw: str | None = None
    device: str = "reader"
    nonce: str | None = None
    """A squeeze table's card: 32 lowercase hex characters from the OS's random source, given by
    the service (the engine does no I/O); None on an open table."""


class ReadFailed(NamedTuple):
    """The device saw a card but could not identify it ("cannot read", card-code error).

    ``position`` is the unread card's place within a multi-card pull, when known.
    """

    at: float
    source: Source = Source.READER
    reason: str = "cannot read"
    code: int | None = None
    raw: str | None = None
    device: str = "reader"
    position: int | None = None


class CutCardDrawn(NamedTuple):
    """The cut card came out of the shoe."""

    at: float
    source: Source = Source.READER
    raw: str | None = None
    device: str = "reader"


class ReaderSignalKind(StrEnum):
    STARTED = "started"  # power-up / reset / start of communication
    STANDBY = "standby"
    LOCKED = "locked"
    UNLOCKED = "unlocked"
    ERROR_RAISED = "error_raised"
    ERROR_CLEARED = "error_cleared"
    REDEAL = "redeal"
    PRESET_CHANGED = "preset_changed"
    COMMAND_REFUSED = "command_refused"  # a host command (lock/unlock) was NAKed, unanswered or unsendable


class ReaderSignal(NamedTuple):
    """A status message from the reader that is not a card.

    ``command_id`` names the supervisor command (lock/unlock) this answers, when the
    service knows it (the reader's answer to a host command it sent).
    """

    kind: ReaderSignalKind
    at: float
    code: int | None = None
    detail: str | None = None
    raw: str | None = None
    device: str = "reader"
    command_id: str | None = None


class OutsideGameMode(StrEnum):
    """Why the reader says a card left the shoe outside the game flow (Angel Eye ``d`` mode)."""

    LOCK = "lock"  # the shoe was locked (betting time)
    ERROR = "error"  # the shoe was in an error state
    SETTING = "setting"  # the shoe was in its settings mode


class OutsideGameCard(NamedTuple):
    """A card that left the shoe outside the game flow (Angel Eye ``d`` frame).

    It is never a dealt card: the engine raises an alert for a supervisor (daemon/rules/RULES.md
    dealing mistake 7, a card exposed during betting) and counts it against the shoe's
    composition, since a real card left the shoe. ``transmission_id`` and ``raw`` are as
    for :class:`CardRead`.
    """

    card: Card
    mode: OutsideGameMode
    at: float
    transmission_id: str | None = None
    raw: str | None = None
    device: str = "reader"


class VerdictOutcome(StrEnum):
    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    FORCED_QUIT = "forced_quit"


class ShoeVerdict(NamedTuple):
    """The reader's own result for the round (Angel Eye ``G`` frame)."""

    outcome: VerdictOutcome
    player_pair: bool
    banker_pair: bool
    at: float
    raw: str | None = None
    device: str = "reader"


class DeviceConnection(NamedTuple):
    """A device went away or came back (emitted by the driver, not the device)."""

    connected: bool
    at: float
    device: str = "reader"
    detail: str | None = None


class Tick(NamedTuple):
    """Clock tick, so time-based rules (pull hold window) can fire without a new read."""

    at: float


class SupervisorCommand(NamedTuple):
    """A supervisor action, already authenticated by the command channel.

    ``action`` names the command (see the engine for the accepted set and the
    arguments each takes); ``args`` carries JSON-ready arguments; ``actor`` is who
    asked; ``command_id`` is the caller's id, echoed in the reply. ``issued_at`` is the time
    the sender signed into the command (its ``ts``; None when it carries none): ``at`` is when
    the table received it.
    """

    action: str
    at: float
    actor: str
    command_id: str
    args: dict[str, object]
    issued_at: float | None = None


class ClockStatus(NamedTuple):
    """Whether the table's system clock is synchronised (polled by the service, not a device).

    ``source`` names where the status was read (e.g. ``adjtimex``); ``detail`` says why it is
    not synchronised (or the estimated error), for the alert and health.
    """

    synchronised: bool
    at: float
    source: str
    detail: str | None = None


class StorageState(NamedTuple):
    """Whether the daemon's journal can take a new round (emitted by the service, not a device).

    While ``full``, a card that would open a new round is refused (``card_refused``): the
    round in progress still completes, nothing new starts until there is room again.
    ``detail`` says why (e.g. "disk full", "backlog over its limit"), for the alert.
    """

    full: bool
    at: float
    detail: str | None = None


class GameFlowSource(StrEnum):
    """Who told the edge that betting opened or closed (``table.game_flow: betting_window``)."""

    SERVER = "server"  # the game server's signed open_betting / close_betting command
    BUTTON = "button"  # a dealer button: a configured HID key or line pattern of a reader
    SHOE_LOCK = "shoe_lock"  # the Angel Eye shoe's own lock state (locked = betting open)


class BettingOpened(NamedTuple):
    """Betting opened for a round: cards drawn from now until it closes are exposed cards.

    ``round_id`` is the game server's id for the round (None from a button or the shoe's lock
    state, which carry no id); ``closes_at`` is the server's announced close time, if any.
    """

    at: float
    source: GameFlowSource
    round_id: str | None = None
    closes_at: float | None = None
    device: str = "server"
    command_id: str | None = None


class BettingClosed(NamedTuple):
    """Betting closed: the next cards drawn are the round's cards, in draw order."""

    at: float
    source: GameFlowSource
    round_id: str | None = None
    device: str = "server"
    command_id: str | None = None


class ShoeSignalKind(StrEnum):
    """Shoe procedure marks a slotless reader (line or HID) can send by a configured pattern."""

    SHOE_STARTED = "shoe_started"  # a new shoe is in the reader; the next cards are its first
    SHOE_ENDED = "shoe_ended"  # the shoe was closed and taken out
    BURN_STARTED = "burn_started"  # the next cards are burn cards, until BURN_ENDED
    BURN_ENDED = "burn_ended"


class ShoeSignal(NamedTuple):
    """A shoe procedure mark from a reader that has no target byte (cut card: :class:`CutCardDrawn`)."""

    kind: ShoeSignalKind
    at: float
    raw: str | None = None
    device: str = "reader"


class RevealSignal(NamedTuple):
    """A squeeze table's dealer button press or reader mark: reveal the next slot in the configured
    order (``table.reveal``). ``source`` is ``button`` or ``reader_signal``."""

    at: float
    source: str
    raw: str | None = None
    device: str = "reader"


EngineInput = (
    CardRead
    | ReadFailed
    | OutsideGameCard
    | CutCardDrawn
    | ReaderSignal
    | ShoeVerdict
    | DeviceConnection
    | Tick
    | SupervisorCommand
    | StorageState
    | ClockStatus
    | BettingOpened
    | BettingClosed
    | ShoeSignal
    | RevealSignal
)
