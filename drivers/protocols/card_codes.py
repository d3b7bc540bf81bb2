"""Text card codes → cards, for readers that send a card as text (line readers, HID wedges).

The mapping is a setting: a regular expression with named groups ``rank`` and
``suit`` plus tables mapping what those groups capture to a rank and a suit, and
optionally an explicit table of whole codes (checked first). A code that maps to
no card is never guessed at.
"""

from __future__ import annotations

import re
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.cards import Card, CardParseError, Rank, Suit

_RANK_SYMBOLS = "A23456789TJQK"


def _rank_of(value: str) -> Rank:
    text = value.strip().upper()
    if text == "10":
        text = "T"
    if len(text) == 1 and text in _RANK_SYMBOLS:
        return Rank(_RANK_SYMBOLS.index(text) + 1)
    raise ValueError(f"{value!r} is not a rank (expected A 2-9 T J Q K)")


def _suit_of(value: str) -> Suit:
    try:
        return Suit(value.strip().lower())
    except ValueError:
        raise ValueError(f"{value!r} is not a suit (expected c d h s)") from None


class CardCodeGrammar(BaseModel):
    """How a text code names a card."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str = Field(
        description="Regex matched against the whole code, with named groups 'rank' and 'suit'."
    )
    ignore_case: bool = Field(default=False, description="Match the pattern and the maps case-insensitively.")
    rank_map: dict[str, str] = Field(description="What the 'rank' group captures → rank (A 2-9 T J Q K).")
    suit_map: dict[str, str] = Field(description="What the 'suit' group captures → suit (c d h s).")
    codes: dict[str, str] = Field(
        default_factory=dict, description="Whole codes mapped directly to a card ('8s'); checked first."
    )

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        missing = {"rank", "suit"} - set(compiled.groupindex)
        if missing:
            raise ValueError(f"pattern lacks the named group(s) {sorted(missing)}")
        return value

    @field_validator("rank_map")
    @classmethod
    def _ranks_valid(cls, value: dict[str, str]) -> dict[str, str]:
        for key, rank in value.items():
            try:
                _rank_of(rank)
            except ValueError as exc:
                raise ValueError(f"rank_map[{key!r}]: {exc}") from None
        return value

    @field_validator("suit_map")
    @classmethod
    def _suits_valid(cls, value: dict[str, str]) -> dict[str, str]:
        for key, suit in value.items():
            try:
                _suit_of(suit)
            except ValueError as exc:
                raise ValueError(f"suit_map[{key!r}]: {exc}") from None
        return value

    @field_validator("codes")
    @classmethod
    def _codes_valid(cls, value: dict[str, str]) -> dict[str, str]:
        for key, card in value.items():
            try:
                Card.parse(card)
            except CardParseError as exc:
                raise ValueError(f"codes[{key!r}]: {exc}") from None
        return value

    @model_validator(mode="after")
    def _maps_not_empty(self) -> Self:
        if not self.rank_map or not self.suit_map:
            raise ValueError("rank_map and suit_map must not be empty")
        return self


class CardCodeMapper:
    """Applies a :class:`CardCodeGrammar`; build once, call for every code."""

    def __init__(self, grammar: CardCodeGrammar) -> None:
        flags = re.IGNORECASE if grammar.ignore_case else 0
        self._regex = re.compile(grammar.pattern, flags)
        fold = str.upper if grammar.ignore_case else str
        self._fold = fold
        self._ranks = {fold(k): _rank_of(v) for k, v in grammar.rank_map.items()}
        self._suits = {fold(k): _suit_of(v) for k, v in grammar.suit_map.items()}
        self._codes = {fold(k): Card.parse(v) for k, v in grammar.codes.items()}

    def card(self, code: str) -> Card | str:
        """The card ``code`` names, or a message saying why it names none."""
        direct = self._codes.get(self._fold(code))
        if direct is not None:
            return direct
        match = self._regex.fullmatch(code)
        if match is None:
            return f"code {code!r} does not match the card grammar"
        rank = self._ranks.get(self._fold(match.group("rank") or ""))
        suit = self._suits.get(self._fold(match.group("suit") or ""))
        if rank is None:
            return f"code {code!r}: rank {match.group('rank')!r} is not in the rank map"
        if suit is None:
            return f"code {code!r}: suit {match.group('suit')!r} is not in the suit map"
        return Card(rank, suit)


LINE_READER_GRAMMAR = CardCodeGrammar(
    pattern=r"(?P<suit>[SHCD])(?P<rank>\d{2})",
    rank_map={f"{i:02d}": _RANK_SYMBOLS[i - 1] for i in range(1, 14)},
    suit_map={"S": "s", "H": "h", "C": "c", "D": "d"},
)
"""``S08`` = 8♠, ``H13`` = K♥: suit letter then two-digit rank (drivers/protocols/PROTOCOLS.md §2)."""

CANONICAL_GRAMMAR = CardCodeGrammar(
    pattern=r"(?P<rank>10|[2-9ATJQK])(?P<suit>[CDHS])",
    ignore_case=True,
    rank_map={**{s: s for s in _RANK_SYMBOLS}, "10": "T"},
    suit_map={s: s.lower() for s in "CDHS"},
)
"""``8S``, ``TH``, ``10H``: the project's own card code, any case."""
