"""Angel Eye II-EX decoder: the shoe's byte stream → frames (drivers/protocols/PROTOCOLS.md §1).

The frame format itself (bytes, checksum, what one frame means) is in
:mod:`drivers.protocols.angel_eye_codec`. This module finds frames in the stream with an
incremental state machine (bytes in, :class:`DecodedFrame` out; the same frames whatever way
the bytes are cut into reads), recognises the shoe's repeat transmissions on (SEQ, payload),
and turns a card the shoe sent but the decoder must refuse, or a skipped sequence mark, into a
rescan. It also encodes host → shoe commands (``STX 'O' 'P' TYPE DATA ETX BCC``), which the
shoe answers with ACK, or NAK followed by a two-character code.

It never raises on input and never produces a card from a frame whose BCC, length,
target/index or card byte is wrong.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from common.inputs import ReadFailed, Source
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


_Step = Callable[[bytes, int, float, list[DecodedFrame]], int]
"""A state of the decoder: consumes bytes of ``data`` from ``pos`` read at ``at``, adds what
they complete to the output list, and returns where it stopped."""


class AngelEyeDecoder:
    """Incremental decoder of the shoe → host byte stream (frames, ACK and NAK replies).

    A state machine whose state is the step that reads the next bytes. Between frames every
    byte is looked at: ENQ starts a frame, ACK is a reply, NAK starts a reply with a
    two-character code, anything else is garbage (reported in runs). In a frame the decoder
    looks for the ETX that ends it within ``max_frame_length`` bytes of the ENQ, or an ENQ
    that cuts it short; then it takes the two BCC characters (or the NAK code).
    """

    def __init__(self, settings: AngelEyeSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or AngelEyeSettings()
        self.device = device
        self._state: _Step = self._between_frames
        self._frame = bytearray()  # the frame or NAK reply being received, from its first byte
        self._trailer_left = 0  # BCC or NAK-code characters still to come
        self._garbage = bytearray()
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=self.settings.dedup_window)
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
        data = bytes(data)  # a bytearray or memoryview read is read like bytes
        out: list[DecodedFrame] = []
        pos, end = 0, len(data)
        while pos < end:
            pos = self._state(data, pos, at, out)
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
        self._state = self._between_frames
        return out

    @property
    def has_partial_frame(self) -> bool:
        """Whether bytes of an unfinished frame or NAK reply are buffered."""
        return bool(self._frame)

    # -- the states ----------------------------------------------------------------------

    def _between_frames(self, data: bytes, pos: int, at: float, out: list[DecodedFrame]) -> int:
        byte = data[pos]
        if byte == ENQ:
            self._flush_garbage(out)
            self._frame.append(ENQ)
            self._state = self._in_frame
        elif byte == ACK:
            self._flush_garbage(out)
            out.append(DecodedFrame(raw=bytes([ACK]), reply=CommandReply(ok=True)))
        elif byte == NAK:
            self._flush_garbage(out)
            self._frame.append(NAK)
            self._trailer_left = 2
            self._state = self._trailer
        else:
            self._garbage.append(byte)
            if len(self._garbage) >= MAX_GARBAGE_RUN:
                self._flush_garbage(out)
        return pos + 1

    def _in_frame(self, data: bytes, pos: int, at: float, out: list[DecodedFrame]) -> int:
        limit = self.settings.max_frame_length
        # the ETX must arrive within ``limit`` bytes counted from the ENQ, ETX included
        chunk = data[pos : pos + limit - len(self._frame)]
        etx = chunk.find(ETX)
        enq = chunk.find(ENQ, 0, len(chunk) if etx == -1 else etx)
        if enq != -1:
            self._frame += chunk[:enq]
            self._cut(at, out)
            return pos + enq
        if etx != -1:
            self._frame += chunk[: etx + 1]
            self._trailer_left = 2
            self._state = self._trailer
            return pos + etx + 1
        self._frame += chunk
        if len(self._frame) >= limit:
            reason = f"no ETX within {limit} bytes of ENQ"
            self._settle(DecodedFrame(raw=bytes(self._frame), rejected=reason), at, out)
            self._frame.clear()
            self._state = self._between_frames
        return pos + len(chunk)

    def _trailer(self, data: bytes, pos: int, at: float, out: list[DecodedFrame]) -> int:
        """A frame's two BCC characters or a NAK's two-character code; an ENQ among them cuts
        the frame or reply short."""
        chunk = data[pos : pos + self._trailer_left]
        enq = chunk.find(ENQ)
        if enq != -1:
            self._frame += chunk[:enq]
            self._cut(at, out)
            return pos + enq
        self._frame += chunk
        self._trailer_left -= len(chunk)
        if self._trailer_left == 0:
            raw = bytes(self._frame)
            self._frame.clear()
            self._state = self._between_frames
            if raw[0] == NAK:
                out.append(self._finish_nak(raw))
            else:
                self._finish_frame(raw, at, out)
        return pos + len(chunk)

    def _cut(self, at: float, out: list[DecodedFrame]) -> None:
        """An ENQ arrived before the frame or reply being received was complete."""
        if self._frame[0] == NAK:
            reason = "NAK reply cut short by ENQ"
        elif self._state == self._trailer:
            reason = "frame cut short by ENQ before its BCC"
        else:
            reason = "frame cut short by ENQ before its ETX"
        self._settle(DecodedFrame(raw=bytes(self._frame), rejected=reason), at, out)
        self._frame.clear()
        self._state = self._between_frames

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

    # -- a whole frame: checked, repeat or new, its meaning --------------------------------

    def _finish_frame(self, raw: bytes, at: float, out: list[DecodedFrame]) -> None:
        problem = check_frame(raw)
        if problem is not None:
            self._settle(DecodedFrame(raw=raw, rejected=problem), at, out)
            return
        key = raw[1], raw[2:-3]  # (SEQ, payload): what a repeat transmission shares
        repeat = self._is_repeat(key)
        if repeat and not self._emit_duplicates:
            self._dropped_duplicates += 1
            return
        meaning = frame_meaning(
            raw, at, device=self.device, redeal_payload_lengths=self.settings.redeal_payload_lengths
        )
        # A frame's meaning depends only on its bytes: a repeat's was valid when it was taken.
        if isinstance(meaning, str):
            self._settle(DecodedFrame(raw=raw, rejected=meaning), at, out)
        elif repeat:
            out.append(DecodedFrame(raw=raw, input=meaning, duplicate=True))
        else:
            if key[1][:1] == b"S":
                self._recent.clear()
            self._recent.append(key)
            self._settle(DecodedFrame(raw=raw, input=meaning), at, out)

    def _is_repeat(self, key: tuple[int, bytes]) -> bool:
        """Whether ``key`` is a repeat transmission of a frame already taken.

        A start frame resets the repeat memory, so the memory holds nothing older than the
        last start: a start frame is a repeat only while it is still the newest frame taken
        (its copies follow it); the same start frame after other frames is the shoe
        starting again, and resets the memory again.
        """
        if key[1][:1] == b"S":
            return bool(self._recent) and self._recent[-1] == key
        return key in self._recent

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
            if len(raw) >= 3 and raw[0] == ENQ and raw[2] == ord("D"):
                seq = raw[1]
                if seq != self._last_seq and seq not in self._failed_seqs:
                    self._failed_seqs.add(seq)
                    reason = f"card frame refused: {frame.rejected}"
                    frame = replace(frame, rescan=self._lost(at, reason, raw))
            out.append(frame)
            return
        seq = raw[1]
        skipped = [] if raw[2] == ord("S") else self._skipped_marks(seq)  # 'S' restarts the marks
        if skipped:
            reason = f"sequence mark(s) {''.join(skipped)!r} skipped: frame(s) lost on the line"
            out.append(DecodedFrame(raw=b"", rejected=reason, rescan=self._lost(at, reason, b"")))
        self._last_seq = seq
        self._failed_seqs.clear()
        out.append(frame)

    def _skipped_marks(self, seq: int) -> list[str]:
        """The marks between the last new frame's and ``seq`` not already reported as lost."""
        marks, last = self.settings.sequence_marks, self._last_seq
        if last is None:
            return []
        start, position = marks.find(chr(last)), marks.find(chr(seq))
        if start == -1 or position == -1:
            return []
        distance = (position - start) % len(marks)
        if distance <= 1 or distance - 1 > self.settings.max_sequence_gap:
            return []
        missing = [marks[(start + k) % len(marks)] for k in range(1, distance)]
        return [mark for mark in missing if ord(mark) not in self._failed_seqs]

    def _lost(self, at: float, reason: str, raw: bytes) -> ReadFailed:
        return ReadFailed(
            at=at, source=Source.READER, reason=reason, raw=hex_raw(raw) if raw else None, device=self.device
        )
