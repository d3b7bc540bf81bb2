"""Shoe and game-flow signals of slotless readers: configured lines, typed codes and keys.

Many line and keyboard-wedge readers send more than cards: a line or code when the cut card
comes out, when a burn starts and ends, when a shoe starts and ends, and some have a dealer
button. None of it has a fixed form, so each reader's signals are settings
(drivers/protocols/PROTOCOLS.md §2.5 and §3.5). What each signal becomes:

=================  =====================================================================
signal             engine input
=================  =====================================================================
``cut_card``       :class:`~common.inputs.CutCardDrawn`
``shoe_started``   :class:`~common.inputs.ShoeSignal` ``SHOE_STARTED``
``shoe_ended``     :class:`~common.inputs.ShoeSignal` ``SHOE_ENDED``
``burn_started``   :class:`~common.inputs.ShoeSignal` ``BURN_STARTED``
``burn_ended``     :class:`~common.inputs.ShoeSignal` ``BURN_ENDED``
``betting_closed`` :class:`~common.inputs.BettingClosed` from ``GameFlowSource.BUTTON``:
                   the dealer's "no more bets" press, the next cards are the round's
``betting_opened`` :class:`~common.inputs.BettingOpened` from ``GameFlowSource.BUTTON``:
                   the dealer's "place your bets" press
``reveal_button``  :class:`~common.inputs.RevealSignal` from ``button``: a squeeze table's
                   dealer button, the next slot in ``table.reveal.order`` is shown
``reveal_signal``  :class:`~common.inputs.RevealSignal` from ``reader_signal``: the reader's
                   own mark that the next card was turned over (squeeze tables)
=================  =====================================================================

Signals are **exact texts**, not regular expressions, so that a configuration is proved
safe when it loads: no signal text is also a card code of the reader's grammar, the
reader's error line or another signal's text (two regular expressions can overlap in ways
no check finds; two texts cannot).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.cards import Card
from common.inputs import (
    BettingClosed,
    BettingOpened,
    CutCardDrawn,
    GameFlowSource,
    RevealSignal,
    ShoeSignal,
    ShoeSignalKind,
    Source,
)
from drivers.protocols.card_codes import CardCodeMapper

MAX_SIGNAL_TEXT = 64
"""Longest signal text accepted (a line reader's ``max_line_length`` caps it further)."""


class SignalName(StrEnum):
    """The signals a slotless reader can be configured to send."""

    CUT_CARD = "cut_card"
    SHOE_STARTED = "shoe_started"
    SHOE_ENDED = "shoe_ended"
    BURN_STARTED = "burn_started"
    BURN_ENDED = "burn_ended"
    BETTING_CLOSED = "betting_closed"
    BETTING_OPENED = "betting_opened"
    REVEAL_BUTTON = "reveal_button"
    REVEAL_SIGNAL = "reveal_signal"


SignalInput = CutCardDrawn | ShoeSignal | BettingOpened | BettingClosed | RevealSignal
"""The engine inputs a signal becomes."""

_REVEAL_SOURCES: dict[SignalName, str] = {
    SignalName.REVEAL_BUTTON: "button",
    SignalName.REVEAL_SIGNAL: "reader_signal",
}
_SHOE_KINDS: dict[SignalName, ShoeSignalKind] = {
    SignalName.SHOE_STARTED: ShoeSignalKind.SHOE_STARTED,
    SignalName.SHOE_ENDED: ShoeSignalKind.SHOE_ENDED,
    SignalName.BURN_STARTED: ShoeSignalKind.BURN_STARTED,
    SignalName.BURN_ENDED: ShoeSignalKind.BURN_ENDED,
}


def signal_input(name: SignalName, at: float, *, raw: str | None, device: str) -> SignalInput:
    """The engine input for signal ``name`` observed at ``at`` on ``device``."""
    if name is SignalName.CUT_CARD:
        return CutCardDrawn(at=at, source=Source.READER, raw=raw, device=device)
    if name is SignalName.BETTING_CLOSED:
        return BettingClosed(at=at, source=GameFlowSource.BUTTON, device=device)
    if name is SignalName.BETTING_OPENED:
        return BettingOpened(at=at, source=GameFlowSource.BUTTON, device=device)
    if name in _REVEAL_SOURCES:
        return RevealSignal(at=at, source=_REVEAL_SOURCES[name], raw=raw, device=device)
    return ShoeSignal(kind=_SHOE_KINDS[name], at=at, raw=raw, device=device)


class SignalTexts(BaseModel):
    """The exact line (or typed code) a reader sends for each signal; none by default.

    Each signal takes a list of texts (a reader that says ``CUT`` or ``CUTCARD``). Texts are
    compared after the blanks around them are trimmed; with ``ignore_case`` in any case.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cut_card: tuple[str, ...] = Field(default=(), description="Text(s) sent when the cut card comes out.")
    shoe_started: tuple[str, ...] = Field(default=(), description="Text(s) for a new shoe put in.")
    shoe_ended: tuple[str, ...] = Field(default=(), description="Text(s) for the shoe closed and taken out.")
    burn_started: tuple[str, ...] = Field(default=(), description="Text(s) before burn cards.")
    burn_ended: tuple[str, ...] = Field(default=(), description="Text(s) after the burn cards.")
    betting_closed: tuple[str, ...] = Field(
        default=(), description="Dealer button: 'no more bets', the next cards are the round's."
    )
    betting_opened: tuple[str, ...] = Field(default=(), description="Dealer button: 'place your bets'.")
    reveal_button: tuple[str, ...] = Field(
        default=(), description="Squeeze table's dealer button: show the next slot (table.reveal.order)."
    )
    reveal_signal: tuple[str, ...] = Field(
        default=(), description="Squeeze table: the reader's mark that the next card was turned over."
    )
    ignore_case: bool = Field(default=False, description="Match the texts in any case.")

    @field_validator(*(name.value for name in SignalName))
    @classmethod
    def _plain_texts(cls, texts: tuple[str, ...]) -> tuple[str, ...]:
        for text in texts:
            if not text or text != text.strip(" \t"):
                raise ValueError(f"{text!r}: a signal text must be non-empty, with no blanks around it")
            if len(text) > MAX_SIGNAL_TEXT:
                raise ValueError(f"{text!r}: longer than {MAX_SIGNAL_TEXT} characters")
            if not (text.isascii() and text.isprintable()):
                raise ValueError(f"{text!r}: only printable ASCII characters can be sent")
        return texts

    @model_validator(mode="after")
    def _no_text_twice(self) -> Self:
        seen: dict[str, SignalName] = {}
        for name, text in self.pairs():
            key = self.fold(text)
            if key in seen:
                other = seen[key]
                where = "twice" if other is name else f"for both {other.value} and {name.value}"
                raise ValueError(f"signal text {text!r} is given {where}: one text, one signal")
            seen[key] = name
        return self

    def fold(self, text: str) -> str:
        """``text`` as it is compared (upper case with ``ignore_case``)."""
        return text.upper() if self.ignore_case else text

    def pairs(self) -> list[tuple[SignalName, str]]:
        """Every configured (signal, text), in signal order."""
        return [(name, text) for name in SignalName for text in getattr(self, name.value)]

    def lookup(self) -> dict[str, SignalName]:
        """Folded text → signal, for the decoder."""
        return {self.fold(text): name for name, text in self.pairs()}


def _spellings(text: str) -> list[str]:
    """Every upper/lower-case spelling of ``text`` (of its first 12 letters; card codes are short)."""
    out = [""]
    for index, char in enumerate(text):
        cases = {char.lower(), char.upper()} if index < 12 else {char}
        out = [head + case for head in out for case in sorted(cases)]
    return out


def signal_conflicts(
    signals: SignalTexts, mapper: CardCodeMapper, error_pattern: str | None = None
) -> list[str]:
    """Why some signal text could be mistaken for something else; empty when none can.

    A text the card grammar maps to a card would make a card into a signal (or the other way
    round); a text the reader's error line matches would make a misread into a signal. Any
    case counts when either side ignores case.
    """
    problems: list[str] = []
    error = re.compile(error_pattern, re.IGNORECASE if signals.ignore_case else 0) if error_pattern else None
    for name, text in signals.pairs():
        for spelling in _spellings(text) if signals.ignore_case else [text]:
            card = mapper.card(spelling)
            if isinstance(card, Card):
                problems.append(f"{name.value}: {text!r} is the card code of {card.code}")
                break
            if error is not None and error.fullmatch(spelling):
                problems.append(f"{name.value}: {text!r} matches the reader's error_pattern")
                break
    return problems
