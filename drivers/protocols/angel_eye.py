"""Angel Eye II-EX decoder: the shoe's byte stream → frames (drivers/protocols/PROTOCOLS.md §1).

The frame format itself (bytes, checksum, what one frame means) is in
:mod:`drivers.protocols.angel_eye_codec`. This module finds frames in the stream
incrementally (bytes in, :class:`DecodedFrame` out; the same frames whatever way the bytes
are cut into reads), recognises the shoe's repeat transmissions on (SEQ, payload),
and turns a card the shoe sent but the decoder must refuse, or a skipped sequence mark, into a
rescan. It also encodes host → shoe commands (``STX 'O' 'P' TYPE DATA ETX BCC``), which the
shoe answers with ACK, or NAK followed by a two-character code.

It never raises on input and never produces a card from a frame whose BCC, length,
target/index or card byte is wrong.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from common.inputs import (
    BettingClosed,
    BettingOpened,
    GameFlowSource,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
)
from drivers.protocols.angel_eye_codec import (
    ACK,
    ENQ,
    ETX,
    NAK,
    NAK_MEANINGS,
    STX,
    bcc,
    check_frame,
    frame_meaning,
)
from drivers.protocols.frames import CommandReply, DecodedFrame, hex_raw

MAX_GARBAGE_RUN = 256
"""Bytes outside any frame are reported in runs of at most this many."""

START_CODE = ord("S")
"""Event code of the start-of-communication frame (it restarts the repeat memory and the marks)."""
CARD_CODE = ord("D")

SEQUENCE_MARKS = "123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The SEQ cycle assumed by default ('1', '2', ... 'A' ...; the real cycle is *open*: PROTOCOLS.md §1.3)."""


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

    lock_is_betting_window: bool = Field(
        default=False,
        description="The shoe's lock state is the table's betting window (no game server, no button): "
        "'locked' also opens betting, 'unlocked' closes it (BettingOpened/BettingClosed, source "
        "shoe_lock, after the reader signal).",
    )

    @field_validator("sequence_marks")
    @classmethod
    def _distinct_printable_marks(cls, marks: str) -> str:
        if len(set(marks)) != len(marks) or not all(0x20 < ord(c) < 0x7F for c in marks):
            raise ValueError("sequence_marks must be distinct printable ASCII characters")
        return marks


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


_REPLY_OR_FRAME = re.compile(b"[\x05\x06\x15]")
"""A byte that ends a run of garbage: ENQ, ACK or NAK."""


class AngelEyeDecoder:
    """Incremental decoder of the shoe → host byte stream (frames, ACK and NAK replies).

    The bytes not yet taken (a frame, reply or run of garbage that a later read must finish)
    wait in ``_pending``; each read is appended and the decoder takes, from the front, what
    is complete: a frame (ENQ, up to an ETX within ``max_frame_length`` bytes, two BCC
    characters), an ACK, a NAK with its two code characters, or a run of garbage up to the
    next ENQ, ACK or NAK. An ENQ cuts any frame or reply short.
    """

    def __init__(self, settings: AngelEyeSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or AngelEyeSettings()
        self.device = device
        self._pending = b""  # the front of the stream not yet taken
        self._mark_positions = {ord(mark): n for n, mark in enumerate(self.settings.sequence_marks)}
        self._recent: deque[bytes] = deque(maxlen=self.settings.dedup_window)  # frames taken
        self._last_seq: int | None = None  # SEQ of the last new frame taken
        self._failed_seqs: set[int] = set()  # SEQs already reported as a lost card since then
        self._emit_duplicates = True
        self._dropped_duplicates = 0

    def drop_duplicates(self) -> None:
        """Stop returning repeat transmissions as frames: count them instead.

        For a caller that only forwards new inputs (the reader driver): a repeat then builds
        no :class:`DecodedFrame` and no input. Every other frame is returned as before. The
        decode CLI keeps the default (repeats reported).
        """
        self._emit_duplicates = False

    def take_dropped_duplicates(self) -> int:
        """How many repeats were dropped (not returned) since the last call."""
        count, self._dropped_duplicates = self._dropped_duplicates, 0
        return count

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume ``data`` observed at ``at``; return the frames it completed, in order."""
        if not self._emit_duplicates and not self._pending and self._recent and data == self._recent[-1]:
            # A shoe sends every frame three times, each copy its own read: a copy of the newest
            # frame taken (as remembered: BCC in upper case), with nothing buffered, is what the
            # loop below would count as a repeat (``_finish_frame``), decided here without
            # finding the frame again. Measured worth
            # it: bench/README.md, "plain code against the tricks".
            self._dropped_duplicates += 1
            return []
        stream = self._pending + data if self._pending else bytes(data)
        out: list[DecodedFrame] = []
        pos, end = 0, len(stream)
        while pos < end:
            first = stream[pos]
            if first == ENQ:
                taken = self._take_frame(stream, pos, at, out)
            elif first == NAK:
                taken = self._take_nak(stream, pos, at, out)
            elif first == ACK:
                out.append(DecodedFrame(raw=bytes([ACK]), reply=CommandReply(ok=True)))
                taken = 1
            else:
                taken = self._take_garbage(stream, pos, out)
            if taken == 0:
                break  # unfinished: the next read completes it
            pos += taken
        self._pending = stream[pos:]
        if self.settings.lock_is_betting_window:
            out = [derived for frame in out for derived in self._with_betting(frame)]
        return out

    def _with_betting(self, frame: DecodedFrame) -> list[DecodedFrame]:
        """``frame``, then the betting window its lock state opens or closes (a repeat adds nothing)."""
        signal = frame.input
        if frame.duplicate or not isinstance(signal, ReaderSignal):
            return [frame]
        if signal.kind is ReaderSignalKind.LOCKED:
            opened = BettingOpened(at=signal.at, source=GameFlowSource.SHOE_LOCK, device=self.device)
            return [frame, DecodedFrame(raw=b"", input=opened)]
        if signal.kind is ReaderSignalKind.UNLOCKED:
            closed = BettingClosed(at=signal.at, source=GameFlowSource.SHOE_LOCK, device=self.device)
            return [frame, DecodedFrame(raw=b"", input=closed)]
        return [frame]

    def reset(self, reason: str = "partial frame discarded: device disconnected") -> list[DecodedFrame]:
        """Drop the partial frame and unreported garbage (on unplug or end of input).

        The repeat memory is kept: a shoe that comes back resends its last frame,
        which must still be recognised as a repeat.
        """
        out: list[DecodedFrame] = []
        if self.has_partial_frame:
            out.append(DecodedFrame(raw=self._pending, rejected=reason))
        elif self._pending:
            out.append(DecodedFrame(raw=self._pending, rejected="bytes outside any frame"))
        self._pending = b""
        return out

    @property
    def has_partial_frame(self) -> bool:
        """Whether bytes of an unfinished frame or NAK reply are buffered."""
        return bool(self._pending) and self._pending[0] in (ENQ, NAK)

    # -- what is complete at the front of the stream ------------------------------------
    # Each step looks at ``stream`` from ``pos``, adds what it completes to ``out`` and
    # returns how many bytes it took; 0 means the bytes there are not complete yet.

    def _take_frame(self, stream: bytes, pos: int, at: float, out: list[DecodedFrame]) -> int:
        limit = self.settings.max_frame_length
        # the ETX must come within ``limit`` bytes counted from the ENQ, both included
        etx = stream.find(ETX, pos + 1, pos + limit)
        frame_end = pos + limit if etx == -1 else etx + 3
        cut = stream.find(ENQ, pos + 1, frame_end)
        if cut != -1:
            if etx == -1 or cut < etx:
                return self._cut(stream[pos:cut], "frame cut short by ENQ before its ETX", at, out)
            return self._cut(stream[pos:cut], "frame cut short by ENQ before its BCC", at, out)
        if etx == -1:
            if len(stream) < pos + limit:
                return 0
            reason = f"no ETX within {limit} bytes of ENQ"
            self._settle(DecodedFrame(raw=stream[pos : pos + limit], rejected=reason), at, out)
            return limit
        if len(stream) < frame_end:
            return 0
        self._finish_frame(stream[pos:frame_end], at, out)
        return frame_end - pos

    def _take_nak(self, stream: bytes, pos: int, at: float, out: list[DecodedFrame]) -> int:
        cut = stream.find(ENQ, pos + 1, pos + 3)
        if cut != -1:
            return self._cut(stream[pos:cut], "NAK reply cut short by ENQ", at, out)
        if len(stream) < pos + 3:
            return 0
        out.append(self._finish_nak(stream[pos : pos + 3]))
        return 3

    def _take_garbage(self, stream: bytes, pos: int, out: list[DecodedFrame]) -> int:
        """Bytes outside any frame, reported in runs up to the next ENQ, ACK or NAK."""
        end = _REPLY_OR_FRAME.search(stream, pos, pos + MAX_GARBAGE_RUN)
        if end is not None:
            run = stream[pos : end.start()]
        elif len(stream) >= pos + MAX_GARBAGE_RUN:
            run = stream[pos : pos + MAX_GARBAGE_RUN]
        else:
            return 0
        out.append(DecodedFrame(raw=run, rejected="bytes outside any frame"))
        return len(run)

    def _cut(self, raw: bytes, reason: str, at: float, out: list[DecodedFrame]) -> int:
        """A frame or reply an ENQ cut short: refused; the ENQ starts the next one."""
        self._settle(DecodedFrame(raw=raw, rejected=reason), at, out)
        return len(raw)

    def _finish_nak(self, raw: bytes) -> DecodedFrame:
        text = raw[1:].decode("ascii", errors="replace").upper()
        meaning = NAK_MEANINGS.get(text)
        if meaning is None:
            return DecodedFrame(raw=raw, rejected=f"NAK with unknown code {raw[1:]!r}")
        return DecodedFrame(raw=raw, reply=CommandReply(ok=False, code=text, meaning=meaning))

    # -- a whole frame: checked, repeat or new, its meaning --------------------------------

    def _finish_frame(self, raw: bytes, at: float, out: list[DecodedFrame]) -> None:
        # A repeat transmission has the SEQ and payload of a frame already taken, hence the
        # same BCC value, which a shoe may write in either case: the memory keeps each frame
        # taken with its BCC in upper case, so a repeat's check and meaning were settled then.
        # A start frame resets the repeat memory, so the memory holds nothing older than the
        # last start: a start frame is a repeat only while it is still the newest frame taken
        # (its copies follow it); the same start frame after other frames is the shoe starting
        # again, and resets the memory again.
        recent = self._recent
        key = raw[:-2] + raw[-2:].upper()
        if key in recent and (raw[2] != START_CODE or recent[-1] == key):
            if not self._emit_duplicates:
                self._dropped_duplicates += 1
                return
            meaning = frame_meaning(
                raw, at, device=self.device, redeal_payload_lengths=self.settings.redeal_payload_lengths
            )
            assert not isinstance(meaning, str)  # only frames with a meaning are remembered
            out.append(DecodedFrame(raw=raw, input=meaning, duplicate=True))
            return
        problem = check_frame(raw)
        if problem is not None:
            self._settle(DecodedFrame(raw=raw, rejected=problem), at, out)
            return
        meaning = frame_meaning(
            raw, at, device=self.device, redeal_payload_lengths=self.settings.redeal_payload_lengths
        )
        if isinstance(meaning, str):
            self._settle(DecodedFrame(raw=raw, rejected=meaning), at, out)
            return
        if raw[2] == START_CODE:
            recent.clear()
        recent.append(key)
        self._settle(DecodedFrame(raw=raw, input=meaning), at, out)

    # -- cards lost on the wire ------------------------------------------------------
    # A card frame the decoder must refuse, or a frame missing from the SEQ cycle, is a card
    # the shoe dealt that the engine would otherwise never hear of: it gets a ReadFailed
    # (rescan). Copies of one frame share its SEQ, so a bad copy of a frame already taken,
    # or a further bad copy of one already reported, is only counted; a good copy after a
    # bad one is the valid read that satisfies the rescan.

    def _settle(self, frame: DecodedFrame, at: float, out: list[DecodedFrame]) -> None:
        """Add a rejected or new frame to ``out``, with the rescans it reveals."""
        raw = frame.raw
        if frame.rejected is not None:
            if len(raw) >= 3 and raw[0] == ENQ and raw[2] == CARD_CODE:
                seq = raw[1]
                if seq != self._last_seq and seq not in self._failed_seqs:
                    self._failed_seqs.add(seq)
                    reason = f"card frame refused: {frame.rejected}"
                    frame = frame._replace(rescan=self._lost(at, reason, raw))
            out.append(frame)
            return
        seq = raw[1]
        skipped = [] if raw[2] == START_CODE else self._skipped_marks(seq)  # 'S' restarts the marks
        if skipped:
            reason = f"sequence mark(s) {''.join(skipped)!r} skipped: frame(s) lost on the line"
            out.append(DecodedFrame(raw=b"", rejected=reason, rescan=self._lost(at, reason, b"")))
        self._last_seq = seq
        self._failed_seqs.clear()
        out.append(frame)

    def _skipped_marks(self, seq: int) -> list[str]:
        """The marks between the last new frame's and ``seq`` not already reported as lost."""
        marks, positions, last = self.settings.sequence_marks, self._mark_positions, self._last_seq
        if last is None:
            return []
        start, position = positions.get(last), positions.get(seq)
        if start is None or position is None:
            return []
        distance = (position - start) % len(marks)
        if distance <= 1 or distance - 1 > self.settings.max_sequence_gap:
            return []
        missing = [marks[(start + k) % len(marks)] for k in range(1, distance)]
        return [mark for mark in missing if ord(mark) not in self._failed_seqs]

    def _lost(self, at: float, reason: str, raw: bytes) -> ReadFailed:
        return ReadFailed(at=at, reason=reason, raw=hex_raw(raw) if raw else None, device=self.device)
