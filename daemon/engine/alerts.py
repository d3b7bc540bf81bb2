"""Alert codes the engine raises, with the reason an operator reads.

An alert stays open until its condition clears by itself (``auto`` below) or a
supervisor acknowledges it. Alerts marked ``holds`` hold a round for a supervisor
decision (``resolve_hold``, a correction, or ``void_round``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AlertCode(StrEnum):
    RESCAN_NEEDED = "rescan_needed"
    UNNEEDED_CARD = "unneeded_card"
    OVER_COMPOSITION = "over_composition"
    CARD_AFTER_LAST_ROUND = "card_after_last_round"
    NO_SHOE = "no_shoe"
    DEVICE_DISAGREEMENT = "device_disagreement"
    VERDICT_DISAGREEMENT = "verdict_disagreement"
    CAMERA_DISAGREEMENT = "camera_disagreement"
    CAMERA_SLOT_MISMATCH = "camera_slot_mismatch"
    AMBIGUOUS_RESCAN = "ambiguous_rescan"
    MISSING_CARD = "missing_card"
    READER_DISCONNECTED = "reader_disconnected"
    READER_ERROR = "reader_error"
    READER_REDEAL = "reader_redeal"
    FORCED_QUIT = "forced_quit"
    UNEXPECTED_CUT_CARD = "unexpected_cut_card"
    INVALID_INPUT = "invalid_input"
    CARD_OUTSIDE_GAME = "card_outside_game"
    JOURNAL_FULL_CARD_REFUSED = "journal_full_card_refused"
    READER_COMMAND_REFUSED = "reader_command_refused"
    SHOE_SETTINGS_DIFFER = "shoe_settings_differ"


@dataclass(frozen=True, slots=True)
class AlertSpec:
    """What an alert means and how it ends."""

    summary: str
    holds: bool = False
    auto: str | None = None  # the condition that clears it without a supervisor


ALERTS: dict[AlertCode, AlertSpec] = {
    AlertCode.RESCAN_NEEDED: AlertSpec(
        "the reader could not read a card: rescan it; no card is accepted until a valid read",
        auto="a valid read of the card (reader rescan or a confident camera read), or rescan_ack",
    ),
    AlertCode.UNNEEDED_CARD: AlertSpec(
        "a card came out right after a decided round (RULES.md dealing mistakes 1/2): that round stands; "
        "the engine took it as the next round's burn (or Player 1), which a fast dealer's real Player 1 "
        "would also look like, so the next round is held: acknowledge (the reading is right) or correct it",
        holds=True,
    ),
    AlertCode.OVER_COMPOSITION: AlertSpec(
        "this exact card has already appeared as often as the shoe holds it: misread or foreign card, "
        "refused; a reader's card keeps its slot waiting for a rescan and holds the round (or the next one)",
        holds=True,
    ),
    AlertCode.CARD_AFTER_LAST_ROUND: AlertSpec("a card came out after the shoe's last round: refused"),
    AlertCode.NO_SHOE: AlertSpec("a card came out while no shoe is running: refused (start a new shoe)"),
    AlertCode.DEVICE_DISAGREEMENT: AlertSpec(
        "the reader names a different slot for the card than the draw order gives", holds=True
    ),
    AlertCode.VERDICT_DISAGREEMENT: AlertSpec(
        "the reader's own round result differs from the engine's", holds=True
    ),
    AlertCode.CAMERA_DISAGREEMENT: AlertSpec(
        "the camera confidently sees a different card than the reader reported", holds=True
    ),
    AlertCode.CAMERA_SLOT_MISMATCH: AlertSpec(
        "the camera read a card in a box other than the slot the draw order expects: not used"
    ),
    AlertCode.AMBIGUOUS_RESCAN: AlertSpec(
        "the reader sent the card the camera already filled in: a rescan or a second identical card? "
        "refused; supply it with assign_card if it was a new card"
    ),
    AlertCode.MISSING_CARD: AlertSpec(
        "the reader reports the round over but the engine still needs cards: supply the missing card",
        holds=True,
    ),
    AlertCode.READER_DISCONNECTED: AlertSpec("a device went away", auto="the device comes back"),
    AlertCode.READER_ERROR: AlertSpec("the reader raised an error", auto="the reader clears the error"),
    AlertCode.READER_REDEAL: AlertSpec("the reader signalled a re-deal", holds=True),
    AlertCode.FORCED_QUIT: AlertSpec("the reader force-quit the round", holds=True),
    AlertCode.UNEXPECTED_CUT_CARD: AlertSpec("a cut card came out when none was expected"),
    AlertCode.INVALID_INPUT: AlertSpec("an input the engine cannot use (e.g. no valid time): ignored"),
    AlertCode.CARD_OUTSIDE_GAME: AlertSpec(
        "the reader says a card left the shoe outside the game flow (e.g. drawn while locked for betting): "
        "not a dealt card; a card exposed during betting may void the round (RULES.md dealing mistake 7), "
        "a supervisor decides"
    ),
    AlertCode.READER_COMMAND_REFUSED: AlertSpec(
        "the reader did not carry out a supervisor's lock/unlock (refused, no answer or no reader): "
        "the shoe's lock state is not what was asked"
    ),
    AlertCode.SHOE_SETTINGS_DIFFER: AlertSpec(
        "the engine was restarted with other decks/variant than this shoe was started with: the shoe "
        "goes on with its own (the configuration takes effect at the next shoe); if its variant cannot be "
        "loaded, its rounds are held (void them, or the shoe)"
    ),
    AlertCode.JOURNAL_FULL_CARD_REFUSED: AlertSpec(
        "the journal is full: cards that would open a new round are refused (not dealt, counted as out of "
        "the shoe); stop dealing until it has room (details.refused counts them)",
        auto="the journal has room again",
    ),
}

HOLDING_CODES: frozenset[str] = frozenset(code.value for code, spec in ALERTS.items() if spec.holds)
"""Codes of the alerts that hold a round."""
