"""USB HID "keyboard wedge" readers: 8-byte boot-keyboard reports (drivers/protocols/PROTOCOLS.md §3).

Byte 0 holds the modifiers (Shift = 0x02 left, 0x20 right), bytes 2-7 the usage
codes of the keys held down. A character is typed on a key-down transition, so a
key that stays in the report is not typed twice, and the all-zero report releases
every key (which is how "22" arrives as two characters). Enter ends a code; the
code → card mapping is a setting.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from common.cards import Card
from common.inputs import CardRead, ReadFailed, Source
from drivers.protocols.card_codes import CANONICAL_GRAMMAR, CardCodeGrammar, CardCodeMapper
from drivers.protocols.frames import DecodedFrame, hex_raw
from drivers.protocols.signals import SignalName, SignalTexts, signal_conflicts, signal_input

SHIFT_MASK = 0x22
ERROR_ROLLOVER = 0x01
ENTER_KEYS = frozenset({0x28, 0x58})
RAW_KEEP = 64 * 8
"""At most this many report bytes are kept in one frame's audit trail."""

_PLAIN: dict[int, str] = {0x04 + i: chr(ord("a") + i) for i in range(26)}
_PLAIN.update({0x1E + i: "1234567890"[i] for i in range(10)})
_PLAIN.update({0x59 + i: "1234567890"[i] for i in range(10)})  # keypad digits
_PLAIN.update({0x2C: " ", 0x2D: "-", 0x2E: "=", 0x36: ",", 0x37: ".", 0x38: "/", 0x33: ";"})
_SHIFTED: dict[int, str] = {0x04 + i: chr(ord("A") + i) for i in range(26)}
_SHIFTED.update({0x1E + i: "!@#$%^&*()"[i] for i in range(10)})
_SHIFTED.update({0x59 + i: "1234567890"[i] for i in range(10)})
_SHIFTED.update({0x2C: " ", 0x2D: "_", 0x2E: "+", 0x36: "<", 0x37: ">", 0x38: "?", 0x33: ":"})

_USAGE_BY_CHAR: dict[str, tuple[int, bool]] = {}
for _usage, _char in _SHIFTED.items():
    if _usage < 0x59:
        _USAGE_BY_CHAR.setdefault(_char, (_usage, True))
for _usage, _char in _PLAIN.items():
    if _usage < 0x59:
        _USAGE_BY_CHAR[_char] = (_usage, False)


class HidWedgeSettings(BaseModel):
    """Report layout and the code → card mapping of a keyboard-wedge reader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grammar: CardCodeGrammar = Field(default=CANONICAL_GRAMMAR, description="How a typed code names a card.")
    report_length: int = Field(default=8, ge=8, le=64, description="Bytes per input report.")
    unmatched: Literal["read_failed", "reject"] = Field(
        default="read_failed",
        description="A code naming no card: 'read_failed' asks the engine for a rescan, 'reject' logs it.",
    )
    max_code_length: int = Field(default=32, ge=2, le=256, description="Longer codes are rejected.")
    signals: SignalTexts = Field(
        default_factory=SignalTexts,
        description="Exact codes (typed, then Enter) the reader sends for the cut card, burn, shoe "
        "start/end and the dealer button (none by default).",
    )
    signal_keys: dict[SignalName, int] = Field(
        default_factory=dict,
        description="A key that types no character (e.g. F1 = 0x3A) standing for a signal: it acts "
        "when it goes down, with no Enter (a dealer button wired as a key).",
    )

    @field_validator("signal_keys", mode="before")
    @classmethod
    def _hex_usages(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out: dict[object, object] = {}
        for name, usage in value.items():
            if isinstance(usage, str):
                try:
                    usage = int(usage, 16)  # usage codes are written in hex, with or without 0x
                except ValueError:
                    raise ValueError(f"{name}: {usage!r} is not a hexadecimal key usage code") from None
            out[name] = usage
        return out

    @model_validator(mode="after")
    def _signals_distinct(self) -> Self:
        problems = signal_conflicts(self.signals, CardCodeMapper(self.grammar))
        problems += [
            f"{name.value}: {text!r} is longer than max_code_length {self.max_code_length}"
            for name, text in self.signals.pairs()
            if len(text) > self.max_code_length
        ]
        problems += [
            f"{name.value}: {text!r} cannot be typed by a keyboard wedge"
            for name, text in self.signals.pairs()
            if any(char not in _USAGE_BY_CHAR for char in text)
        ]
        seen: dict[int, SignalName] = {}
        for name, usage in self.signal_keys.items():
            if usage in seen:
                problems.append(f"key 0x{usage:02X} is given for both {seen[usage].value} and {name.value}")
            seen[usage] = name
            if not 0x04 <= usage <= 0xFF:
                problems.append(f"{name.value}: 0x{usage:02X} is not a key usage code (0x04-0xFF)")
            elif usage in _PLAIN or usage in ENTER_KEYS:
                what = "ends a code" if usage in ENTER_KEYS else f"types {_PLAIN[usage]!r}"
                problems.append(f"{name.value}: key 0x{usage:02X} {what}; a signal key must type nothing")
        if problems:
            raise ValueError("signals: " + "; ".join(problems))
        return self


def type_text(text: str, *, release_between: bool = True, report_length: int = 8) -> list[bytes]:
    """The reports a wedge sends to type ``text`` then Enter (simulator and tests).

    With ``release_between`` every key-down is followed by an all-zero report;
    without it consecutive different keys roll over without a release (as fast
    scanners do), while a repeated character still gets its release.
    """
    release = bytes(report_length)
    reports: list[bytes] = []
    previous: int | None = None
    for char in text:
        usage, shifted = _USAGE_BY_CHAR[char]
        if previous == usage and not release_between:
            reports.append(release)
        report = bytearray(report_length)
        report[0] = 0x02 if shifted else 0
        report[2] = usage
        reports.append(bytes(report))
        if release_between:
            reports.append(release)
        previous = usage
    enter = bytearray(report_length)
    enter[2] = 0x28
    reports += [bytes(enter), release]
    return reports


class HidWedgeDecoder:
    """Incremental decoder of keyboard-wedge reports."""

    def __init__(self, settings: HidWedgeSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or HidWedgeSettings()
        self.device = device
        self._mapper = CardCodeMapper(self.settings.grammar)
        self._signals = self.settings.signals.lookup()
        self._signal_keys = {usage: name for name, usage in self.settings.signal_keys.items()}
        self._pending = bytearray()  # bytes of a report not yet complete (stream feeding)
        self._pressed: frozenset[int] = frozenset()
        self._code: list[str] = []
        self._raw = bytearray()
        self._problem: str | None = None

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume a stream of back-to-back reports; a trailing partial report carries over."""
        self._pending += data
        size = self.settings.report_length
        out: list[DecodedFrame] = []
        while len(self._pending) >= size:
            report = bytes(self._pending[:size])
            del self._pending[:size]
            out += self._report(report, at)
        return out

    def feed_report(self, report: bytes, at: float) -> list[DecodedFrame]:
        """Consume one report as read from the interrupt endpoint."""
        if len(report) != self.settings.report_length:
            return [
                DecodedFrame(
                    raw=report,
                    rejected=f"report of {len(report)} bytes, expected {self.settings.report_length}",
                )
            ]
        return self._report(report, at)

    def reset(self, reason: str = "partial code discarded: device disconnected") -> list[DecodedFrame]:
        """Drop a half-typed code and the key state (unplug, end of input)."""
        raw = bytes(self._raw) + bytes(self._pending)
        out = [DecodedFrame(raw=raw, rejected=reason)] if self._code or self._problem or self._pending else []
        self._pending.clear()
        self._pressed = frozenset()
        self._code.clear()
        self._raw.clear()
        self._problem = None
        return out

    @property
    def has_partial_frame(self) -> bool:
        return bool(self._code or self._pending or self._problem)

    def _report(self, report: bytes, at: float) -> list[DecodedFrame]:
        if len(self._raw) < RAW_KEEP:
            self._raw += report
        keys = [k for k in report[2:] if k != 0]
        if ERROR_ROLLOVER in keys:
            self._problem = self._problem or "keyboard rollover error (too many keys reported)"
            return []
        pressed = [key for key in keys if key not in self._pressed]
        self._pressed = frozenset(keys)
        # A signal key is a button of its own: it acts on its key-down, whatever else is typed.
        out: list[DecodedFrame] = [
            DecodedFrame(
                raw=report,
                input=signal_input(self._signal_keys[key], at, raw=hex_raw(report), device=self.device),
            )
            for key in pressed
            if key in self._signal_keys
        ]
        pressed = [key for key in pressed if key not in self._signal_keys]
        keys = [key for key in keys if key not in self._signal_keys]
        if len(pressed) > 1:
            out += self._pressed_together(report, pressed, at)
        elif pressed:
            out += self._key_down(pressed[0], bool(report[0] & SHIFT_MASK), at)
        if not keys and not self._code and self._problem is None:
            self._raw.clear()  # idle releases between codes are not part of the next frame
        return out

    def _key_down(self, key: int, shifted: bool, at: float) -> list[DecodedFrame]:
        if key in ENTER_KEYS:
            return [self._finish(at)]
        char = (_SHIFTED if shifted else _PLAIN).get(key)
        if char is None:
            self._problem = self._problem or f"key usage 0x{key:02X} types no character"
        elif len(self._code) >= self.settings.max_code_length:
            self._problem = self._problem or f"code longer than {self.settings.max_code_length} characters"
        else:
            self._code.append(char)
        return []

    def _pressed_together(self, report: bytes, pressed: list[int], at: float) -> list[DecodedFrame]:
        """Several keys went down in one report: a boot-keyboard report lists the keys held,
        not the order they were pressed in, so the code they belong to cannot be read."""
        usages = " ".join(f"0x{key:02X}" for key in pressed)
        problem = f"keys {usages} pressed in one report: their order is unknown"
        self._problem = self._problem or problem
        if not any(key in ENTER_KEYS for key in pressed):
            return []
        frame = self._finish(at)  # the code ends here, whether before or after the other keys
        if any(key not in ENTER_KEYS for key in pressed):
            # They may have been typed after the Enter: the next code may have lost its start.
            self._problem = problem
            self._raw += report
        return [frame]

    def _finish(self, at: float) -> DecodedFrame:
        raw = bytes(self._raw)
        code = "".join(self._code)
        problem = self._problem
        self._code.clear()
        self._raw.clear()
        self._problem = None
        if problem is None and not code:
            return DecodedFrame(raw=raw, rejected="Enter with no code typed")
        card: Card | str = problem if problem is not None else self._mapper.card(code)
        signal = self._signals.get(self.settings.signals.fold(code)) if problem is None else None
        if signal is not None and isinstance(card, Card):
            # Settings refuse such a code; should one get through, a card is never guessed away.
            card = f"{code!r} is both the {signal.value} signal and a card"
        elif signal is not None:
            return DecodedFrame(raw=raw, input=signal_input(signal, at, raw=hex_raw(raw), device=self.device))
        if isinstance(card, Card):
            return DecodedFrame(
                raw=raw,
                input=CardRead(card=card, at=at, source=Source.READER, raw=hex_raw(raw), device=self.device),
            )
        if self.settings.unmatched == "reject":
            return DecodedFrame(raw=raw, rejected=card)
        return DecodedFrame(
            raw=raw,
            input=ReadFailed(at=at, source=Source.READER, reason=f"unreadable code: {card}",
                             raw=hex_raw(raw), device=self.device),
        )  # fmt: skip
