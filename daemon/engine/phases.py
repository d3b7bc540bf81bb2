"""The names the table's state is told in: the shoe procedure's phase, the betting window's, and
where a card that belongs to no round goes (``README.md``, "State machine", "Game flow").

Each is a ``StrEnum``: a member is its string, as events and the retained state carry it.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Where the table is in the shoe procedure (``README.md``, "State machine")."""

    NO_SHOE = "no_shoe"
    INDICATOR = "indicator"  # the first card
    BURNING = "burning"  # the opening burn
    READY = "ready"  # between rounds
    ROUND = "round"  # a round in progress
    OVER = "over"  # the shoe ended


class FlowPhase(StrEnum):
    """Where the betting window is (``game_flow: betting_window``; ``README.md``, "Game flow")."""

    WAITING = "waiting"  # no betting window since the last round was decided: cards are unneeded
    BETTING = "betting"  # betting is open: a card drawn now is exposed (RULES.md mistake 7)
    DEALING = "dealing"  # betting closed: the next cards are the round's (after its burn cards)


OUTSIDE_SHOE: frozenset[Phase] = frozenset({Phase.NO_SHOE, Phase.OVER})
"""The phases in which no shoe is being dealt."""
DEALING: frozenset[Phase] = frozenset({Phase.READY, Phase.ROUND})
"""The phases in which the next card may belong to a round (a reader's target may reorder a pull)."""

GAME_FLOW_ACTOR = "game_flow"
"""The ``actor`` of the shoe lock/unlock the engine itself requests with the betting window."""


NEXT_ROUND = "next_round"
"""An alert's ``holds`` when it holds the next round to open (else a hand, or None)."""


class CardPlace(StrEnum):
    """Where a card goes that is no round's (a round's card goes to a ``common.slots.Slot``)."""

    INDICATOR = "indicator"  # the shoe's first card: its value says how many to burn
    BURN = "burn"  # a burn card (``BurnKind`` says which)
    EXPOSED = "exposed"  # drawn while betting is open: never placed (RULES.md mistake 7)


class BurnKind(StrEnum):
    """Why a card is burned."""

    OPENING = "opening"  # the opening burn the indicator asks for
    ROUND = "round"  # the per-round burn (``burn_before_each_round``)
    UNNEEDED = "unneeded"  # a card the last round did not need: the next round's burn (mistake 1)
    SIGNALLED = "signalled"  # marked a burn card by a slotless reader (``BURN_STARTED``)


class ShoeEnd(StrEnum):
    """Why a shoe ended (``shoe_ended`` data ``reason``)."""

    CUT_CARD = "cut_card"  # its last round (after the cut card) was decided
    ROUND_LIMIT = "round_limit"  # its last round by the configured limit (max_rounds_per_shoe) was decided
    REPLACED = "replaced"  # a new shoe started before it ended
    VOIDED = "voided"  # a supervisor voided it


LAST_ROUND_ENDS: frozenset[str] = frozenset({ShoeEnd.CUT_CARD, ShoeEnd.ROUND_LIMIT})
"""The ``shoe_ended`` reasons of a shoe that ended after its last round (its held rounds stay)."""
