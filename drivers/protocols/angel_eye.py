"""Angel Eye II-EX shoe protocol (see /work/shared/design/PROTOCOLS.md §1).

Shoe → host frame: ``ENQ SEQ CODE DATA... ETX BCC`` where BCC is two ASCII hex
characters, the XOR of every byte from SEQ through ETX. Each frame is sent
several times; repeats are recognised on (SEQ, payload) and the memory is reset
by a start (``S``) frame. Host → shoe commands are ``STX 'O' 'P' TYPE DATA ETX
BCC`` and the shoe answers ACK, or NAK followed by a two-character code.

The decoder is pure and incremental: bytes in, :class:`DecodedFrame` out. It
never raises on input and never produces a card from a frame whose BCC, length,
target/index or card byte is wrong.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from functools import reduce
from operator import attrgetter, xor
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from common.cards import Card, Rank, Suit
from common.inputs import (
    CardRead,
    CutCardDrawn,
    DeviceTarget,
    OutsideGameCard,
    OutsideGameMode,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
    VerdictOutcome,
)
from drivers.protocols.frames import CommandReply, DecodedFrame, ReaderInput, hex_raw

STX = 0x02
ETX = 0x03
ENQ = 0x05
ACK = 0x06
NAK = 0x15

MAX_GARBAGE_RUN = 256
"""Bytes outside any frame are reported in runs of at most this many."""

SEQUENCE_MARKS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The SEQ cycle assumed by default ('1', '2', ... 'A' ... per PROTOCOLS.md; the wrap is *open*)."""


class AngelEyeSettings(BaseModel):
    """Decoder settings for the parts of the protocol the public sources leave open."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dedup_window: int = Field(
        default=4,
        ge=1,
        le=64,
        description="How many recent distinct (SEQ, payload) frames are remembered to drop repeats.",
    )
    max_frame_length: int = Field(
        default=32,
        ge=8,
        le=1024,
        description="Bytes from ENQ to ETX beyond which a frame is dropped as garbage.",
    )
    command_bcc_includes_stx: bool = Field(
        default=True,
        description="Host-command BCC covers STX too (the spec's own lock example needs it).",
    )
    redeal_payload_lengths: tuple[int, ...] = Field(
        default=(0, 2), description="Accepted payload lengths of an 'R' (re-deal) frame."
    )
    sequence_marks: str = Field(
        default=SEQUENCE_MARKS,
        max_length=94,
        description="The shoe's SEQ marks in the order it uses them (cycling); a new frame that skips "
        "marks tells the engine a frame was lost (rescan). Empty: no gap check.",
    )
    max_sequence_gap: int = Field(
        default=3,
        ge=1,
        le=16,
        description="At most this many skipped marks count as lost frames; a longer jump is taken as "
        "the shoe restarting its numbering.",
    )

    @field_validator("sequence_marks")
    @classmethod
    def _distinct_printable_marks(cls, marks: str) -> str:
        if len(set(marks)) != len(marks) or not all(0x20 < ord(c) < 0x7F for c in marks):
            raise ValueError("sequence_marks must be distinct printable ASCII characters")
        return marks


_TARGETS: dict[int, DeviceTarget] = {
    2: DeviceTarget.BURN,
    4: DeviceTarget.FIRST_CARD,
    5: DeviceTarget.BURN_COUNT,
}
_SLOTS: dict[tuple[int, int], DeviceTarget] = {
    (0, 1): DeviceTarget.P1,
    (0, 2): DeviceTarget.P2,
    (0, 3): DeviceTarget.P3,
    (1, 1): DeviceTarget.B1,
    (1, 2): DeviceTarget.B2,
    (1, 3): DeviceTarget.B3,
}
_SUITS: dict[int, Suit] = {1: Suit.DIAMONDS, 2: Suit.CLUBS, 3: Suit.SPADES, 4: Suit.HEARTS}
_OUTCOMES: dict[int, VerdictOutcome] = {
    1: VerdictOutcome.PLAYER,
    2: VerdictOutcome.TIE,
    4: VerdictOutcome.BANKER,
    7: VerdictOutcome.FORCED_QUIT,
}
ERROR_MEANINGS: dict[int, str] = {
    1: "cannot read",
    2: "overdraw",
    3: "button mishandled",
    4: "card pulled back at the exit",
    5: "card pulled back midway",
    6: "card-code error",
    7: "draw time-out",
}
READ_FAILURE_CODES = frozenset({1, 6})
"""Error codes meaning the shoe saw a card it could not identify: the engine must ask for a rescan."""

NAK_MEANINGS: dict[str, str] = {
    "01": "overrun, framing or parity error",
    "02": "BCC error",
    "03": "no ETX",
    "11": "format or length error",
    "12": "address error",
    "13": "command error",
    "14": "type error",
    "21": "busy",
    "22": "write in progress",
    "FF": "other error",
}
OUTSIDE_GAME_MODES: dict[int, OutsideGameMode] = {
    0: OutsideGameMode.LOCK,
    1: OutsideGameMode.ERROR,
    2: OutsideGameMode.SETTING,
}


class CardByteError(ValueError):
    """A card byte that names no card."""


def _card_of(byte: int) -> Card | str:
    suit = _SUITS.get((byte >> 4) & 0x07)
    rank = byte & 0x0F
    if suit is None:
        return f"card byte 0x{byte:02X}: invalid suit {(byte >> 4) & 0x07}"
    if not 1 <= rank <= 13:
        return f"card byte 0x{byte:02X}: invalid rank {rank}"
    return Card(Rank(rank), suit)


_CARD_BYTES: tuple[Card | str, ...] = tuple(_card_of(byte) for byte in range(256))
"""Every byte value's card, or why it names none (cards are immutable: shared)."""


def decode_card(byte: int) -> Card:
    """Card byte (bit 7 ignored): bits 6-4 suit 1♦ 2♣ 3♠ 4♥, bits 3-0 rank 1..13."""
    card = _CARD_BYTES[byte & 0xFF] if 0 <= byte <= 0xFF else _card_of(byte)
    if isinstance(card, str):
        raise CardByteError(card)
    return card


def encode_card(card: Card) -> int:
    """Inverse of :func:`decode_card`, with bit 7 set as real shoes send it."""
    suit = next(code for code, suit in _SUITS.items() if suit is card.suit)
    return 0x80 | suit << 4 | int(card.rank)


def encode_target(target: DeviceTarget, index: int = 1) -> int:
    """Target/index byte for a card (bit 7 set); ``index`` is used for burn targets."""
    for (tgt, idx), slot in _SLOTS.items():
        if slot is target:
            return 0x80 | tgt << 4 | idx
    code = next(code for code, t in _TARGETS.items() if t is target)
    return 0x80 | code << 4 | (index & 0x0F)


_BCC_TEXT = tuple(f"{value:02X}".encode("ascii") for value in range(256))
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_BCC_VALUES: dict[bytes, int] = {
    bytes([high, low]): int(bytes([high, low]), 16) for high in _HEX_DIGITS for low in _HEX_DIGITS
}
"""Every two-hex-character BCC (either case) and its value."""


def bcc(data: bytes) -> bytes:
    """Two upper-case ASCII hex characters of the XOR of ``data``."""
    return _BCC_TEXT[reduce(xor, data, 0)]


def encode_frame(seq: int, code: str, data: bytes = b"") -> bytes:
    """A shoe → host frame, as the shoe sends it (used by the simulator and tests)."""
    body = bytes([seq]) + code.encode("ascii") + data + bytes([ETX])
    return bytes([ENQ]) + body + bcc(body)


class HostCommand(Enum):
    """Host → shoe commands."""

    UNLOCK = ("LK", 1)
    LOCK = ("LK", 2)
    CONFIRM_GAME = ("GP", 0)

    @property
    def type_code(self) -> str:
        return self.value[0]


def encode_command(
    type_code: Literal["LK", "EC", "GP"], data: int, *, bcc_includes_stx: bool = True
) -> bytes:
    """Encode ``STX 'O' 'P' TYPE DATA ETX BCC``; ``data`` is two decimal digits (0..99).

    ``encode_command("LK", 2)`` locks the shoe, ``("LK", 1)`` unlocks it, ``("EC", n)``
    clears error ``n`` and ``("GP", 0)`` confirms the game result.
    """
    if type_code not in ("LK", "EC", "GP"):
        raise ValueError(f"unknown command type {type_code!r} (expected LK, EC or GP)")
    if not 0 <= data <= 99:
        raise ValueError(f"command data {data} out of range 0..99")
    body = b"OP" + type_code.encode("ascii") + f"{data:02d}".encode("ascii") + bytes([ETX])
    covered = bytes([STX]) + body if bcc_includes_stx else body
    return bytes([STX]) + body + bcc(covered)


class _State(Enum):
    OUTSIDE = 0
    IN_FRAME = 1
    BCC = 2
    NAK_CODE = 3


_OUTSIDE = _State.OUTSIDE
_ENQ_BYTE, _ETX_BYTE = bytes([ENQ]), bytes([ETX])
_D = ord("D")


def _card_target_of(byte: int) -> DeviceTarget | None:
    tgt, index = (byte >> 4) & 0x07, byte & 0x0F
    return _SLOTS.get((tgt, index)) if tgt in (0, 1) else _TARGETS.get(tgt)


_CARD_FRAME_TARGETS: tuple[DeviceTarget | None, ...] = tuple(
    None if byte in (ETX, ENQ) else _card_target_of(byte) for byte in range(256)
)
"""The target of a ``D`` frame's target/index byte, for the single-card-frame read path. ETX
and ENQ map to None though 0x03 names P3: as a data byte they end or cut the frame."""

PARSED_FRAME_CACHE = 512
"""How many distinct whole frames (bytes ENQ..BCC) keep their parse; the oldest goes first."""

InputBuilder = Callable[[float], ReaderInput]
"""Makes a valid frame's engine input for the time it was observed."""

_ParsedFrame = tuple[tuple[int, bytes], InputBuilder, bool] | str
"""A whole frame's parse: its repeat key, its input builder and whether it is a start (``S``)
frame; or the reason it is refused. A pure function of the frame's bytes and the settings."""


_FIELDS: dict[type, tuple[Callable[[ReaderInput], tuple[object, ...]], int]] = {}
"""Per input class: a getter of every field in constructor order, and where ``at`` is."""


def _builder(template: ReaderInput) -> InputBuilder:
    """A builder of ``template`` with ``at`` replaced, every other field shared as is."""
    make: Callable[..., ReaderInput] = type(template)
    fields = _FIELDS.get(make)  # type: ignore[call-overload]
    if fields is None:
        names: tuple[str, ...] = template.__slots__  # every field, in constructor order
        fields = _FIELDS[make] = (attrgetter(*names), names.index("at"))  # type: ignore[index]
    values, split = fields[0](template), fields[1]
    before, after = values[:split], values[split + 1 :]
    return lambda at: make(*before, at, *after)


class AngelEyeDecoder:
    """Incremental decoder of the shoe → host byte stream (frames, ACK and NAK replies).

    A read that is exactly one well-formed card (``D``) frame is checked in one expression,
    and a read equal to the last frame taken is a repeat at once. Any other whole frame met
    outside any other frame is cut out of the input in one slice; its parse (BCC, length,
    event code, the input it stands for) is kept per frame bytes, so the shoe's repeat
    transmissions of a frame cost a dictionary lookup and a repeat check. Any other byte
    (garbage, replies, a frame split across reads) goes through a per-byte state machine;
    every path gives exactly the same frames.
    """

    def __init__(self, settings: AngelEyeSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or AngelEyeSettings()
        self._device = device
        self._state = _State.OUTSIDE
        self._frame = bytearray()
        self._garbage = bytearray()
        self._bcc_pending = 0
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=self.settings.dedup_window)
        self._last_seq: int | None = None  # SEQ of the last new frame taken
        self._failed_seqs: set[int] = set()  # SEQs already reported as a lost card since then
        self._parsed: dict[bytes, _ParsedFrame] = {}
        marks = self.settings.sequence_marks
        self._mark_index = {ord(mark): n for n, mark in enumerate(marks)}
        self._next_mark: dict[int | None, int] = {
            ord(mark): ord(marks[(n + 1) % len(marks)]) for n, mark in enumerate(marks)
        }
        self._emit_duplicates = True
        self._dropped_duplicates = 0
        # The whole frame (ENQ..BCC) last taken as new: its repeat key is always the newest
        # in the repeat memory, so a read of exactly these bytes is a repeat.
        self._taken = b""

    def drop_duplicates(self) -> None:
        """Stop returning repeat transmissions as frames: count them instead.

        For a caller that only forwards new inputs (the reader driver): a read that is
        exactly one repeat of a frame already taken then costs a dictionary lookup and a
        repeat check, no :class:`DecodedFrame` and no input object. Every other frame is
        returned exactly as before. The decode CLI keeps the default (repeats reported).
        """
        self._emit_duplicates = False

    def take_dropped_duplicates(self) -> int:
        """How many repeats were dropped (not returned) since the last call."""
        count, self._dropped_duplicates = self._dropped_duplicates, 0
        return count

    @property
    def device(self) -> str:
        """The device name stamped on every input."""
        return self._device

    @device.setter
    def device(self, name: str) -> None:
        self._device = name
        self._parsed.clear()  # cached inputs carry the old name

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume ``data`` observed at ``at``; return the frames it completed, in order."""
        if type(data) is not bytes:
            data = bytes(data)
        if self._state is _OUTSIDE and not self._garbage:
            # The shoe's usual read: one whole frame. The slice path below would take it as is.
            if data == self._taken and not self._emit_duplicates:
                self._dropped_duplicates += 1
                return []
            if len(data) == 8 and data[2] == _D:
                card_frame = self._card_frame(data, at)
                if card_frame is not None:
                    return card_frame
            # A whole frame already parsed: ``_finish_frame``'s work without the frame search.
            parsed = None if self._emit_duplicates else self._parsed.get(data)
            if type(parsed) is tuple:
                key, build, start = parsed
                recent = self._recent
                if key in recent:
                    self._dropped_duplicates += 1
                    return []
                if start:
                    recent.clear()
                recent.append(key)
                out: list[DecodedFrame] = []
                self._settle(DecodedFrame(data, build(at)), at, out)
                return out
        out = []
        i, n = 0, len(data)
        reach = self.settings.max_frame_length + 1
        step = self._step
        while i < n:
            if data[i] == ENQ and self._state is _OUTSIDE:
                # The per-byte machine would take exactly this slice as one frame: an ETX within
                # max_frame_length bytes of the ENQ, two BCC bytes after it, no ENQ in between.
                etx = data.find(_ETX_BYTE, i + 1, i + reach)
                end = etx + 3
                if etx != -1 and end <= n and data.find(_ENQ_BYTE, i + 1, end) == -1:
                    if self._garbage:
                        self._flush_garbage(out)
                    self._settle(self._finish_frame(data[i:end], at), at, out)
                    i = end
                    continue
            step(data[i], at, out)
            i += 1
        return out

    def _card_frame(self, data: bytes, at: float) -> list[DecodedFrame] | None:
        """``data`` (8 bytes, code ``D``) if it is one well-formed card frame; else None.

        What the slice path and ``_check`` make of such a frame, with no parse cache: every
        check they would make, in one expression (the ETX at index 5 is always within
        ``max_frame_length``, at least 8). Anything else (a refused frame, ETX or ENQ inside
        it) is None and goes the general way, which gives the reason.
        """
        seq, target_byte, card_byte = data[1], data[3], data[4]
        target = _CARD_FRAME_TARGETS[target_byte]
        card = _CARD_BYTES[card_byte]
        if (
            target is None
            or isinstance(card, str)
            or data[0] != ENQ
            or data[5] != ETX
            or not 0x20 < seq < 0x7F
            or _BCC_VALUES.get(data[6:]) != seq ^ _D ^ target_byte ^ card_byte ^ ETX
        ):
            return None
        key = seq, data[2:5]
        recent = self._recent
        if key in recent:
            if not self._emit_duplicates:
                self._dropped_duplicates += 1
                return []
            duplicate = True
        else:
            recent.append(key)
            duplicate = False
        inp = CardRead(
            card=card, at=at, source=Source.READER, target=target,
            transmission_id=chr(seq), raw=data.hex(" "), device=self._device,
        )  # fmt: skip
        if duplicate:
            return [DecodedFrame(data, inp, None, None, None, True)]
        out: list[DecodedFrame] = []
        self._settle(DecodedFrame(data, inp), at, out)
        return out

    def reset(self, reason: str = "partial frame discarded: device disconnected") -> list[DecodedFrame]:
        """Drop the partial frame and unreported garbage (on unplug or end of input).

        The repeat memory is kept: a shoe that comes back resends its last frame,
        which must still be recognised as a repeat.
        """
        out: list[DecodedFrame] = []
        self._flush_garbage(out)
        if self._frame:
            out.append(DecodedFrame(raw=bytes(self._frame), rejected=reason))
        self._frame.clear()
        self._state = _State.OUTSIDE
        return out

    @property
    def has_partial_frame(self) -> bool:
        return bool(self._frame)

    # -- byte-level state machine -------------------------------------------------

    def _step(self, byte: int, at: float, out: list[DecodedFrame]) -> None:
        state = self._state
        if byte == ENQ:
            if state is _State.OUTSIDE:
                self._flush_garbage(out)
            else:
                self._settle(DecodedFrame(raw=bytes(self._frame), rejected=self._cut_reason()), at, out)
            self._frame = bytearray([ENQ])
            self._state = _State.IN_FRAME
            return
        if state is _State.OUTSIDE:
            if byte == ACK:
                self._flush_garbage(out)
                out.append(DecodedFrame(raw=bytes([ACK]), reply=CommandReply(ok=True)))
            elif byte == NAK:
                self._flush_garbage(out)
                self._frame = bytearray([NAK])
                self._state = _State.NAK_CODE
            else:
                self._garbage.append(byte)
                if len(self._garbage) >= MAX_GARBAGE_RUN:
                    self._flush_garbage(out)
            return
        self._frame.append(byte)
        if state is _State.IN_FRAME:
            if byte == ETX:
                self._state = _State.BCC
                self._bcc_pending = 2
            elif len(self._frame) > self.settings.max_frame_length:
                self._settle(
                    DecodedFrame(
                        raw=bytes(self._frame),
                        rejected=f"no ETX within {self.settings.max_frame_length} bytes of ENQ",
                    ),
                    at,
                    out,
                )
                self._frame.clear()
                self._state = _State.OUTSIDE
        elif state is _State.BCC:
            self._bcc_pending -= 1
            if self._bcc_pending == 0:
                self._settle(self._finish_frame(bytes(self._frame), at), at, out)
                self._frame.clear()
                self._state = _State.OUTSIDE
        else:  # NAK code: two characters
            if len(self._frame) == 3:
                out.append(self._finish_nak(bytes(self._frame)))
                self._frame.clear()
                self._state = _State.OUTSIDE

    # -- cards lost on the wire ------------------------------------------------------
    # A card frame the decoder must refuse, or a frame missing from the SEQ cycle, is a card
    # the shoe dealt that the engine would otherwise never hear of: it gets a ReadFailed
    # (rescan). Copies of one frame share its SEQ, so a bad copy of a frame already taken,
    # or a further bad copy of one already reported, is only counted; a good copy after a
    # bad one is the valid read that satisfies the rescan.

    def _settle(self, frame: DecodedFrame, at: float, out: list[DecodedFrame]) -> None:
        if frame.duplicate:
            if self._emit_duplicates:
                out.append(frame)
            else:
                self._dropped_duplicates += 1
            return
        raw = frame.raw
        if frame.rejected is not None:
            if len(raw) >= 3 and raw[0] == ENQ and raw[2] == ord("D"):
                seq = raw[1]
                if seq != self._last_seq and seq not in self._failed_seqs:
                    self._failed_seqs.add(seq)
                    reason = f"card frame refused: {frame.rejected}"
                    frame = replace(frame, rescan=self._lost(at, reason, raw))
            out.append(frame)
            return
        if frame.input is not None:
            seq = raw[1]
            # 'S' restarts the marks; the next mark in the cycle skips none
            if raw[2] != 0x53 and self._next_mark.get(self._last_seq) != seq:
                skipped = self._skipped_marks(seq)
                if skipped:
                    marks = "".join(skipped)
                    reason = f"sequence mark(s) {marks!r} skipped: frame(s) lost on the line"
                    out.append(DecodedFrame(raw=b"", rejected=reason, rescan=self._lost(at, reason, b"")))
            self._last_seq = seq
            self._taken = raw
            if self._failed_seqs:
                self._failed_seqs.clear()
        out.append(frame)

    def _skipped_marks(self, seq: int) -> list[str]:
        last = self._last_seq
        if last is None:
            return []
        start = self._mark_index.get(last)
        position = self._mark_index.get(seq)
        if start is None or position is None:
            return []
        marks = self.settings.sequence_marks
        distance = (position - start) % len(marks)
        if distance <= 1 or distance - 1 > self.settings.max_sequence_gap:
            return []
        missing = [marks[(start + k) % len(marks)] for k in range(1, distance)]
        return [m for m in missing if ord(m) not in self._failed_seqs]

    def _lost(self, at: float, reason: str, raw: bytes) -> ReadFailed:
        return ReadFailed(
            at=at, source=Source.READER, reason=reason, raw=hex_raw(raw) if raw else None, device=self.device
        )

    def _cut_reason(self) -> str:
        if self._state is _State.NAK_CODE:
            return "NAK reply cut short by ENQ"
        if self._state is _State.BCC:
            return "frame cut short by ENQ before its BCC"
        return "frame cut short by ENQ before its ETX"

    def _flush_garbage(self, out: list[DecodedFrame]) -> None:
        if self._garbage:
            out.append(DecodedFrame(raw=bytes(self._garbage), rejected="bytes outside any frame"))
            self._garbage.clear()

    def _finish_nak(self, raw: bytes) -> DecodedFrame:
        text = raw[1:].decode("ascii", errors="replace").upper()
        meaning = NAK_MEANINGS.get(text)
        if meaning is None:
            return DecodedFrame(raw=raw, rejected=f"NAK with unknown code {raw[1:]!r}")
        return DecodedFrame(raw=raw, reply=CommandReply(ok=False, code=text, meaning=meaning))

    def _finish_frame(self, raw: bytes, at: float) -> DecodedFrame:
        """The frame ``raw`` (ENQ through BCC) stands for; a new valid one enters the repeat memory."""
        parsed = self._parsed.get(raw)
        inp: ReaderInput | None = None
        if parsed is None:  # first copy: check it, then remember how to rebuild its input
            raw = bytes(raw)
            checked = self._check(raw, at)
            if isinstance(checked, str):
                parsed = checked
            else:
                inp, payload = checked, raw[2:-3]
                parsed = (raw[1], payload), _builder(inp), payload[:1] == b"S"
            if len(self._parsed) >= PARSED_FRAME_CACHE:
                del self._parsed[next(iter(self._parsed))]
            self._parsed[raw] = parsed
        if isinstance(parsed, str):
            return DecodedFrame(raw, None, parsed)
        key, build, start = parsed
        recent = self._recent
        if key in recent:
            return DecodedFrame(raw, build(at) if inp is None else inp, None, None, None, True)
        if inp is None:
            inp = build(at)
        if start:
            recent.clear()
        recent.append(key)
        return DecodedFrame(raw, inp)

    def _check(self, raw: bytes, at: float) -> ReaderInput | str:
        """The input a whole frame (ENQ through BCC) stands for, or why it is refused."""
        body = raw[1:-2]
        sent = raw[-2:]
        if not (sent[0] in _HEX_DIGITS and sent[1] in _HEX_DIGITS):
            return f"BCC {sent!r} is not two hex characters"
        sent_value = int(sent, 16)
        expected = reduce(xor, body, 0)
        if sent_value != expected:
            return f"bad BCC: frame says {sent_value:02X}, bytes give {expected:02X}"
        if len(body) < 3:
            return "frame has no event code"
        seq = body[0]
        if not 0x20 < seq < 0x7F:
            return f"sequence byte 0x{seq:02X} is not a printable ASCII mark"
        payload = body[1:-1]
        code = chr(payload[0]) if payload[0] < 0x80 else ""
        return self._interpret(code, payload[1:], seq, raw, at)

    def _interpret(self, code: str, data: bytes, seq: int, raw: bytes, at: float) -> ReaderInput | str:
        """The engine input a valid frame stands for, or the reason it is refused."""
        if code == "D" and len(data) == 2:  # the usual frame, first: no helpers to set up
            card = _CARD_BYTES[data[1]]
            target_byte = data[0]
            tgt, index = (target_byte >> 4) & 0x07, target_byte & 0x0F
            target = _SLOTS.get((tgt, index)) if tgt in (0, 1) else _TARGETS.get(tgt)
            if target is not None and not isinstance(card, str):
                return CardRead(
                    card=card, at=at, source=Source.READER, target=target,
                    transmission_id=chr(seq), raw=raw.hex(" "), device=self._device,
                )  # fmt: skip
        audit = hex_raw(raw)
        dev = self.device

        def need(length: int) -> str | None:
            if len(data) != length:
                return f"'{code}' frame needs {length} data byte(s), got {len(data)}"
            return None

        def signal(
            kind: ReaderSignalKind, code_: int | None = None, detail: str | None = None
        ) -> ReaderSignal:
            return ReaderSignal(kind=kind, at=at, code=code_, detail=detail, raw=audit, device=dev)

        if code in ("S", "P", "C"):
            if (problem := need(0)) is not None:
                return problem
            if code == "C":
                return CutCardDrawn(at=at, source=Source.READER, raw=audit, device=dev)
            return signal(ReaderSignalKind.STARTED if code == "S" else ReaderSignalKind.STANDBY)
        if code == "D":
            if (problem := need(2)) is not None:
                return problem
            target_byte, card_byte = data
            tgt, index = (target_byte >> 4) & 0x07, target_byte & 0x0F
            target = _SLOTS.get((tgt, index)) if tgt in (0, 1) else _TARGETS.get(tgt)
            if target is None:
                return f"target/index byte 0x{target_byte:02X}: invalid target {tgt} index {index}"
            try:
                card = decode_card(card_byte)
            except CardByteError as exc:
                return str(exc)
            return CardRead(
                card=card, at=at, source=Source.READER, target=target,
                transmission_id=chr(seq), raw=audit, device=dev,
            )  # fmt: skip
        if code == "d":
            if (problem := need(2)) is not None:
                return problem
            mode_byte, card_byte = data
            mode = OUTSIDE_GAME_MODES.get((mode_byte >> 4) & 0x07)
            if mode is None:
                return f"'d' mode byte 0x{mode_byte:02X}: unknown mode {(mode_byte >> 4) & 0x07}"
            try:
                card = decode_card(card_byte)
            except CardByteError as exc:
                return str(exc)
            return OutsideGameCard(
                card=card, mode=mode, at=at, transmission_id=chr(seq), raw=audit, device=dev
            )
        if code == "R":
            if len(data) not in self.settings.redeal_payload_lengths:
                accepted = list(self.settings.redeal_payload_lengths)
                return f"'R' frame with {len(data)} data byte(s); accepted: {accepted}"
            return signal(ReaderSignalKind.REDEAL, detail=data.hex(" ") or None)
        if code == "G":
            if (problem := need(1)) is not None:
                return problem
            outcome = _OUTCOMES.get((data[0] >> 4) & 0x07)
            if outcome is None:
                return f"result byte 0x{data[0]:02X}: unknown outcome {(data[0] >> 4) & 0x07}"
            return ShoeVerdict(
                outcome=outcome, player_pair=bool(data[0] & 0x01), banker_pair=bool(data[0] & 0x02),
                at=at, raw=audit, device=dev,
            )  # fmt: skip
        if code in ("E", "e"):
            if (problem := need(1)) is not None:
                return problem
            err = data[0] & 0x3F
            meaning = ERROR_MEANINGS.get(err, f"unknown error code {err}")
            if code == "E" and err in READ_FAILURE_CODES:
                return ReadFailed(
                    at=at, source=Source.READER, reason=meaning, code=err, raw=audit, device=dev
                )
            kind = ReaderSignalKind.ERROR_RAISED if code == "E" else ReaderSignalKind.ERROR_CLEARED
            return signal(kind, code_=err, detail=meaning)
        if code == "L":
            if (problem := need(1)) is not None:
                return problem
            return signal(ReaderSignalKind.LOCKED if data[0] & 0x01 else ReaderSignalKind.UNLOCKED)
        if code == "M":
            if (problem := need(6)) is not None:
                return problem
            if not all(0x20 <= c < 0x7F for c in data):
                return "'M' frame: address/value are not printable ASCII"
            text = data.decode("ascii")
            return signal(ReaderSignalKind.PRESET_CHANGED, detail=f"address={text[:2]} value={text[2:]}")
        return f"unknown event code {raw[2:3]!r}"
