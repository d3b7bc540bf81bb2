"""Plain ASCII line readers: one card per line, ``\\n`` or ``\\r\\n`` terminated.

The line format and what each kind of line becomes: drivers/protocols/PROTOCOLS.md §2.

No checksum and no position: the engine assigns draw order. A complete line that
names no card is a read the shoe made but could not identify; by default it
becomes a ``ReadFailed`` (the engine asks for a rescan) rather than being dropped.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.inputs import CardRead, ReadFailed, Source
from drivers.protocols.card_codes import LINE_READER_GRAMMAR, CardCodeGrammar, CardCodeMapper
from drivers.protocols.frames import DecodedFrame, hex_raw
from drivers.protocols.signals import SignalTexts, signal_conflicts, signal_input

RAW_KEEP = 256
"""At most this many bytes of an overlong line are kept for the audit trail."""
_BLANKS = b" \t\r\x0b\x0c"  # blanks around a code; every other byte below 0x20 is refused


class AsciiLineSettings(BaseModel):
    """Line grammar and what to do with lines that name no card."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grammar: CardCodeGrammar = Field(default=LINE_READER_GRAMMAR, description="How a line names a card.")
    error_pattern: str | None = Field(
        default=None,
        description="Regex (whole line) of the reader's own 'cannot read' message, if it has one.",
    )
    unmatched: Literal["read_failed", "reject"] = Field(
        default="read_failed",
        description="A line naming no card: 'read_failed' asks the engine for a rescan, 'reject' logs it.",
    )
    max_line_length: int = Field(default=64, ge=2, le=4096, description="Longer lines are rejected.")
    signals: SignalTexts = Field(
        default_factory=SignalTexts,
        description="Exact lines the reader sends for the cut card, burn, shoe start/end and the "
        "dealer button (none by default).",
    )

    @field_validator("error_pattern")
    @classmethod
    def _error_pattern_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _signals_distinct(self) -> Self:
        problems = signal_conflicts(self.signals, CardCodeMapper(self.grammar), self.error_pattern)
        problems += [
            f"{name.value}: {text!r} is longer than max_line_length {self.max_line_length}"
            for name, text in self.signals.pairs()
            if len(text) > self.max_line_length
        ]
        if problems:
            raise ValueError("signals: " + "; ".join(problems))
        return self


class AsciiLineDecoder:
    """Incremental decoder of a line reader's byte stream."""

    def __init__(self, settings: AsciiLineSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or AsciiLineSettings()
        self.device = device
        self._mapper = CardCodeMapper(self.settings.grammar)
        self._error = re.compile(self.settings.error_pattern) if self.settings.error_pattern else None
        self._signals = self.settings.signals.lookup()
        self._line = bytearray()
        self._overlong = 0  # bytes seen beyond what _line keeps

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume ``data`` observed at ``at``; return one frame per completed non-blank line."""
        out: list[DecodedFrame] = []
        for byte in data:
            if byte == 0x0A:
                frame = self._finish(at)
                if frame is not None:
                    out.append(frame)
            elif len(self._line) < max(RAW_KEEP, self.settings.max_line_length + 2):
                self._line.append(byte)
            else:
                self._overlong += 1
        return out

    def reset(self, reason: str = "partial line discarded: device disconnected") -> list[DecodedFrame]:
        """Drop a partial line (unplug, end of input), reported as a rejected frame."""
        out = [DecodedFrame(raw=bytes(self._line), rejected=reason)] if self._line or self._overlong else []
        self._line.clear()
        self._overlong = 0
        return out

    @property
    def has_partial_frame(self) -> bool:
        return bool(self._line)

    def _finish(self, at: float) -> DecodedFrame | None:
        raw = bytes(self._line) + b"\n"
        length = len(self._line) + self._overlong
        self._line.clear()
        self._overlong = 0
        body = raw[:-1].removesuffix(b"\r")
        if length > self.settings.max_line_length + 1 or len(body) > self.settings.max_line_length:
            return DecodedFrame(
                raw=raw, rejected=f"line of {length} bytes exceeds {self.settings.max_line_length}"
            )
        # Only real blanks are trimmed: str.strip() would also drop the control characters
        # 0x1C-0x1F and read a card in b"\x1fS08", which is refused like any control byte.
        if not body.strip(_BLANKS):
            return None
        if all(byte <= 0x20 or byte == 0x7F for byte in body):
            # Control bytes and blanks only: line noise, not a card the reader failed to read.
            return DecodedFrame(raw=raw, rejected="line noise: control bytes only")
        try:
            text = body.decode("ascii").strip(_BLANKS.decode())
        except UnicodeDecodeError:
            return self._unreadable(raw, at, "line holds non-ASCII bytes")
        if not text.isprintable():
            return self._unreadable(raw, at, "line holds control characters")
        if self._error is not None and self._error.fullmatch(text):
            return DecodedFrame(
                raw=raw,
                input=ReadFailed(at=at, source=Source.READER, reason=f"reader reports {text!r}",
                                 raw=hex_raw(raw), device=self.device),
            )  # fmt: skip
        card = self._mapper.card(text)
        signal = self._signals.get(self.settings.signals.fold(text))
        if signal is not None and not isinstance(card, str):
            # Settings refuse such a text; should one get through, a card is never guessed away.
            return self._unreadable(raw, at, f"{text!r} is both the {signal.value} signal and a card")
        if signal is not None:
            return DecodedFrame(raw=raw, input=signal_input(signal, at, raw=hex_raw(raw), device=self.device))
        if isinstance(card, str):
            return self._unreadable(raw, at, card)
        return DecodedFrame(
            raw=raw,
            input=CardRead(card=card, at=at, source=Source.READER, raw=hex_raw(raw), device=self.device),
        )

    def _unreadable(self, raw: bytes, at: float, reason: str) -> DecodedFrame:
        if self.settings.unmatched == "reject":
            return DecodedFrame(raw=raw, rejected=reason)
        return DecodedFrame(
            raw=raw,
            input=ReadFailed(at=at, source=Source.READER, reason=f"unreadable line: {reason}",
                             raw=hex_raw(raw), device=self.device),
        )  # fmt: skip
