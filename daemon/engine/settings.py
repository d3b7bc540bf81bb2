"""Per-table engine settings: the ``table:`` section of the daemon config.

Everything an operator may reasonably set differently lives here (daemon/rules/RULES.md:
"Anything a table operator may reasonably set differently is a table/variant
setting in YAML, never a code change"). Unknown keys are errors.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from common.inputs import GameFlowSource
from daemon.audit.settings import AuditSettings


class CutCardPolicy(StrEnum):
    """Which round is the shoe's last once the cut card comes out (daemon/rules/RULES.md "Shoe procedure").

    ``finish_current_round``: cut card during a round → that round is the last; between
    rounds → the next round is the last (seeds 000, 002, 003).
    ``one_more_round``: the round after the one in which the cut card appears is the last;
    between rounds → the next round is the last.
    """

    FINISH_CURRENT_ROUND = "finish_current_round"
    ONE_MORE_ROUND = "one_more_round"


class BurnSettings(BaseModel):
    """The opening burn: the indicator card's value decides how many cards are burned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    indicator_counts: bool = Field(
        default=False,
        description="True: the indicator is one of the burned cards (burn value-1 more); "
        "False (default, RULES.md): it is burned in addition to value cards.",
    )
    ace_burns: int = Field(default=1, ge=1, le=13, description="Cards burned for an ace indicator.")
    face_burns: int = Field(default=10, ge=1, le=13, description="Cards burned for a 10/J/Q/K indicator.")


class CameraArbitration(BaseModel):
    """How camera reads are weighed against the reader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_confidence: float = Field(
        default=0.9, ge=0.0, le=1.0, description="Camera reads below this are abstentions, never used."
    )
    devices: tuple[str, ...] = Field(
        default=("camera",),
        description="Device names that are cameras (their disconnection is no reader failure).",
    )
    late_read_window_s: float = Field(
        default=3.0,
        ge=0.0,
        le=60.0,
        description="A camera read this soon after a round was decided is checked against that round.",
    )
    fill_confirm_window_s: float = Field(
        default=10.0,
        ge=0.0,
        le=120.0,
        description="After the camera filled in a misread card, a reader read of the same card within "
        "this window is taken as the dealer's rescan of it, never as a new card.",
    )


class GameFlow(StrEnum):
    """How the engine learns where a round starts (``README.md``, "Game flow").

    ``cards_only``: from the cards alone (their timing tells an unneeded card from the next
    round's Player 1; see the README's known limits). ``betting_window``: from the betting
    window (``open_betting``/``close_betting`` from the game server, or a dealer button, or the
    shoe's lock state): only cards drawn after betting closed are the round's cards.
    """

    CARDS_ONLY = "cards_only"
    BETTING_WINDOW = "betting_window"


class BettingSettings(BaseModel):
    """Where the betting window comes from (``game_flow: betting_window``), and the shoe lock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: GameFlowSource = Field(
        default=GameFlowSource.SERVER,
        description="Who opens and closes betting: 'server' (signed open_betting/close_betting commands, "
        "with the server's round id), 'button' (a dealer button of a reader) or 'shoe_lock' (the Angel "
        "Eye shoe's own lock state). Betting inputs from another source are refused with an alert.",
    )
    lock_shoe: bool = Field(
        default=False,
        description="Lock the shoe (Angel Eye LK) when betting opens and unlock it when betting closes; "
        "a shoe that does not confirm the lock raises shoe_not_locked. Not with source 'shoe_lock'.",
    )

    empty_window_s: float = Field(
        default=60.0,
        ge=0,
        allow_inf_nan=False,
        description="Seconds after betting closes without a card of its round before empty_betting_window "
        "is raised (naming the round id); 0 turns it off.",
    )
    # the game server's command times (late commands, the clock gate: README "Game flow")
    max_skew_s: float = Field(
        default=1.0,
        ge=0,
        le=30,
        allow_inf_nan=False,
        description="How far a server command's own time (its signed ts) may be from the table's receive "
        "time: a close_betting arriving after cards it was issued before is honoured within it (those "
        "cards are the round's); an open_betting further off is refused (clock_gate_closed). 0: late "
        "closes are never honoured and the skew is not checked.",
    )
    unneeded_window_s: float = Field(
        default=1.5,
        ge=0,
        le=30,
        allow_inf_nan=False,
        description="A card read within this time after a round was decided (or after the unneeded card "
        "before it), before the next round's betting closes, is that round's unneeded card (burned, "
        "RULES.md dealing mistake 1) even if betting has reopened; later cards while betting is open are "
        "exposed (mistake 7). 0: every card while betting is open is exposed.",
    )
    clock_gate: bool = Field(
        default=True,
        description="Refuse open_betting (clock_gate_closed) while the table's clock is reported "
        "unsynchronised (service.clock.source) or a server command's skew exceeds max_skew_s.",
    )

    @model_validator(mode="after")
    def _lock_needs_another_source(self) -> BettingSettings:
        if self.lock_shoe and self.source is GameFlowSource.SHOE_LOCK:
            raise ValueError("lock_shoe cannot be used when the shoe's own lock state is the betting source")
        return self


class RestartCheck(BaseModel):
    """How the first reader frames after a restart are checked against the last ones journaled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sequence_marks: str = Field(
        default="123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        max_length=94,
        description="The reader's frame sequence-mark cycle (Angel Eye SEQ; the same as the driver's "
        "sequence_marks); '' turns the check off.",
    )
    max_mark_step: int = Field(
        default=4,
        ge=1,
        le=93,
        description="After a restart, a device's first card may be at most this many marks after the last "
        "one journaled (a round boundary sends the verdict and status frames in between); further is a "
        "restart_gap that holds the round.",
    )


class RevealMode(StrEnum):
    """How the table shows its cards: ``open`` (each card published as it is read) or ``squeeze``
    (each card published as a commitment, its face only when its slot is revealed)."""

    OPEN = "open"
    SQUEEZE = "squeeze"


class RevealSource(StrEnum):
    """Who reveals a squeeze table's cards."""

    SERVER = "server"  # the game server's signed ``reveal`` command naming slots
    BUTTON = "button"  # a dealer button: each press reveals the next slot in ``order``
    READER_SIGNAL = "reader_signal"  # the reader's own mark: each reveals the next slot in ``order``


_SQUEEZE_SLOTS = ("P1", "P2", "B1", "B2", "P3", "B3")


class RevealSettings(BaseModel):
    """Open or squeeze dealing, and where a squeeze table's reveals come from (``README.md``, "Squeeze")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: RevealMode = Field(
        default=RevealMode.OPEN,
        description="'open' (every card published as it is read) or 'squeeze' (each card published as a "
        "commitment: a SHA-256 of the card with a secret nonce; its face and nonce only when its slot is "
        "revealed).",
    )
    order_source: RevealSource = Field(
        default=RevealSource.SERVER,
        description="Who reveals a squeeze table's cards: 'server' (the signed reveal command naming "
        "slots), 'button' (a dealer button) or 'reader_signal' (the reader's mark); a button or reader "
        "mark reveals the next slot in 'order'. Reveals from another source are refused.",
    )
    order: tuple[str, ...] = Field(
        default=_SQUEEZE_SLOTS,
        description="The order a squeeze table reveals a round's slots in (each of P1 P2 B1 B2 P3 B3 once; "
        "P3 and B3 after the four opening slots). A reveal before an earlier dealt slot is refused.",
    )

    @model_validator(mode="after")
    def _order_is_the_six_slots(self) -> RevealSettings:
        if sorted(self.order) != sorted(_SQUEEZE_SLOTS):
            raise ValueError(f"reveal.order must name each of {', '.join(_SQUEEZE_SLOTS)} exactly once")
        if min(self.order.index("P3"), self.order.index("B3")) < 4:
            raise ValueError("reveal.order must put P3 and B3 after the four opening slots")
        return self


class TableSettings(BaseModel):
    """Validated settings of one table's engine (pydantic, extra keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decks: int = Field(default=8, ge=1, le=8, description="Decks in the shoe (RULES.md: 1-8).")
    variant: str = Field(
        default="standard",
        pattern=r"^([a-z0-9][a-z0-9_-]*|.*/.*|.+\.ya?ml)$",
        description=(
            "Game variant: a shipped name (config/variants/<name>.yaml) or the path of a variant "
            "YAML file (ends in .yaml/.yml or has a '/'; a relative path is relative to the config "
            "file's folder). Each shoe_started records the pay table's digest; a shoe resumed after "
            "a restart is settled only under a pay table with that digest."
        ),
    )
    burn: BurnSettings = BurnSettings()
    burn_before_each_round: bool = Field(
        default=False, description="Burn cards before every round (seed 001)."
    )
    round_burn_cards: int = Field(
        default=1, ge=1, le=3, description="Cards burned before each round when enabled."
    )
    cut_card_policy: CutCardPolicy = CutCardPolicy.FINISH_CURRENT_ROUND
    pull_hold_window_s: float = Field(
        default=0.3,
        ge=0.0,
        le=5.0,
        description="How long reads carrying a pull position wait for the cards above them.",
    )
    max_rounds_per_shoe: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="The shoe ends when this round is decided (held or completed), voided or cut short, "
        "counting the rounds dealt while the edge was down (server round ids skipped), as after the cut "
        "card's last round; null: only the cut card, new_shoe or void_shoe end it.",
    )
    silent_shoe_s: float = Field(
        default=300.0,
        ge=0.0,
        allow_inf_nan=False,
        description="A running shoe with no card for this long raises shoe_silent (the reader out, a "
        "shoe left open); 0 turns it off.",
    )
    unneeded_card_window_s: float = Field(
        default=1.5,
        ge=0.0,
        le=30.0,
        description="A card read within this time after a round was decided is an unneeded card "
        "(RULES.md dealing mistakes 1 and 2); 0 disables the detection.",
    )
    duplicate_window_s: float = Field(
        default=2.0,
        ge=0.0,
        le=60.0,
        description="A re-sent read (same device, transmission id, card) is dropped within this time.",
    )
    duplicate_memory: int = Field(
        default=8, ge=1, le=64, description="How many recent transmissions are remembered."
    )
    await_device_verdict: bool = Field(
        default=False,
        description="Hold every decided round until the reader's own verdict (Angel Eye 'G') agrees.",
    )
    device_starts_shoe: bool = Field(
        default=False,
        description="A card the reader marks as the shoe's first card starts a new shoe "
        "when none is running.",
    )
    camera: CameraArbitration = CameraArbitration()
    game_flow: GameFlow = Field(
        default=GameFlow.CARDS_ONLY,
        description="'cards_only' (rounds told apart by the cards and their timing) or 'betting_window' "
        "(only cards drawn after betting closed are a round's cards; cards between a decided round "
        "and the next close are unneeded cards, cards while betting is open are exposed cards).",
    )
    betting: BettingSettings = BettingSettings()
    restart_check: RestartCheck = RestartCheck()
    reveal: RevealSettings = RevealSettings()
    audit: AuditSettings = AuditSettings()

    def burn_count(self, indicator_points_rank: int) -> int:
        """Further cards to burn after an indicator of rank ``indicator_points_rank`` (1..13)."""
        if indicator_points_rank == 1:
            value = self.burn.ace_burns
        elif indicator_points_rank >= 10:
            value = self.burn.face_burns
        else:
            value = indicator_points_rank
        return value - 1 if self.burn.indicator_counts else value
