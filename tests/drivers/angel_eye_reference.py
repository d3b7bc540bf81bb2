"""The Angel Eye decoder as it was before the fast path: one state-machine step per byte.

Kept verbatim (class body of commit d126165) as a test oracle: the production decoder must
produce exactly the frames this one does, for any bytes cut anywhere. Settings, tables and
the card/BCC helpers are the production ones.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from enum import Enum

from common.inputs import (
    CardRead,
    CutCardDrawn,
    OutsideGameCard,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
)
from drivers.protocols.angel_eye import (
    _OUTCOMES,
    _SLOTS,
    _TARGETS,
    ACK,
    ENQ,
    ERROR_MEANINGS,
    ETX,
    MAX_GARBAGE_RUN,
    NAK,
    NAK_MEANINGS,
    OUTSIDE_GAME_MODES,
    READ_FAILURE_CODES,
    AngelEyeSettings,
    CardByteError,
    bcc,
    decode_card,
)
from drivers.protocols.frames import CommandReply, DecodedFrame, ReaderInput, hex_raw


class _State(Enum):
    OUTSIDE = 0
    IN_FRAME = 1
    BCC = 2
    NAK_CODE = 3


class ReferenceAngelEyeDecoder:
    """Incremental decoder of the shoe → host byte stream (frames, ACK and NAK replies)."""

    def __init__(self, settings: AngelEyeSettings | None = None, *, device: str = "reader") -> None:
        self.settings = settings or AngelEyeSettings()
        self.device = device
        self._state = _State.OUTSIDE
        self._frame = bytearray()
        self._garbage = bytearray()
        self._bcc_pending = 0
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=self.settings.dedup_window)
        self._last_seq: int | None = None  # SEQ of the last new frame taken
        self._failed_seqs: set[int] = set()  # SEQs already reported as a lost card since then

    def feed(self, data: bytes, at: float) -> list[DecodedFrame]:
        """Consume ``data`` observed at ``at``; return the frames it completed, in order."""
        out: list[DecodedFrame] = []
        for byte in data:
            self._step(byte, at, out)
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
        if frame.input is not None and not frame.duplicate:
            seq = raw[1]
            skipped = [] if raw[2:3] == b"S" else self._skipped_marks(seq)
            if skipped:
                marks = "".join(skipped)
                reason = f"sequence mark(s) {marks!r} skipped: frame(s) lost on the line"
                out.append(DecodedFrame(raw=b"", rejected=reason, rescan=self._lost(at, reason, b"")))
            self._last_seq = seq
            self._failed_seqs.clear()
        out.append(frame)

    def _skipped_marks(self, seq: int) -> list[str]:
        marks, last = self.settings.sequence_marks, self._last_seq
        if last is None or chr(last) not in marks or chr(seq) not in marks:
            return []
        start = marks.index(chr(last))
        distance = (marks.index(chr(seq)) - start) % len(marks)
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
        body = raw[1:-2]
        sent = raw[-2:]
        if not all(chr(c) in "0123456789abcdefABCDEF" for c in sent):
            return DecodedFrame(raw=raw, rejected=f"BCC {sent!r} is not two hex characters")
        sent_value = int(sent.decode("ascii"), 16)
        expected = int(bcc(body), 16)
        if sent_value != expected:
            return DecodedFrame(
                raw=raw, rejected=f"bad BCC: frame says {sent_value:02X}, bytes give {expected:02X}"
            )
        if len(body) < 3:
            return DecodedFrame(raw=raw, rejected="frame has no event code")
        seq = body[0]
        if not 0x20 < seq < 0x7F:
            return DecodedFrame(raw=raw, rejected=f"sequence byte 0x{seq:02X} is not a printable ASCII mark")
        payload = body[1:-1]
        interpreted = self._interpret(chr(payload[0]) if payload[0] < 0x80 else "", payload[1:], seq, raw, at)
        if isinstance(interpreted, str):
            return DecodedFrame(raw=raw, rejected=interpreted)
        key = (seq, bytes(payload))
        duplicate = key in self._recent
        if not duplicate:
            if payload[:1] == b"S":
                self._recent.clear()
            self._recent.append(key)
        return DecodedFrame(raw=raw, input=interpreted, duplicate=duplicate)

    def _interpret(self, code: str, data: bytes, seq: int, raw: bytes, at: float) -> ReaderInput | str:
        """The engine input a valid frame stands for, or the reason it is refused."""
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
