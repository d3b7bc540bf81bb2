"""The Angel Eye II-EX frame format (drivers/protocols/PROTOCOLS.md §1).

Shoe → host frame: ``ENQ SEQ CODE DATA... ETX BCC`` where BCC is two ASCII hex characters,
the XOR of every byte from SEQ through ETX. This module knows what one frame looks like:
the control bytes, the tables of each byte's fields, the checksum, how to build a frame
(the simulator and the tests) and what one complete frame means (:func:`check_frame`, then
:func:`frame_meaning`). Finding frames in a byte stream, repeats and lost frames are the
decoder's job (:mod:`drivers.protocols.angel_eye`).
"""

from __future__ import annotations

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
    VerdictOutcome,
)
from drivers.protocols.frames import ReaderInput, hex_raw

STX = 0x02
ETX = 0x03
ENQ = 0x05
ACK = 0x06
NAK = 0x15

SLOT_TARGETS: dict[tuple[int, int], DeviceTarget] = {
    (0, 1): DeviceTarget.P1,
    (0, 2): DeviceTarget.P2,
    (0, 3): DeviceTarget.P3,
    (1, 1): DeviceTarget.B1,
    (1, 2): DeviceTarget.B2,
    (1, 3): DeviceTarget.B3,
}
"""(target bits, index bits) of a Player or Banker card → its slot."""

OTHER_TARGETS: dict[int, DeviceTarget] = {
    2: DeviceTarget.BURN,
    4: DeviceTarget.FIRST_CARD,
    5: DeviceTarget.BURN_COUNT,
}
"""Target bits of a card that is not a Player or Banker card (the index bits are not checked)."""

RANKS: dict[int, Rank] = {int(rank): rank for rank in Rank}
"""Rank bits 1..13 (1 = ace ... 13 = king); 0, 14 and 15 name no rank."""
SUITS: dict[int, Suit] = {1: Suit.DIAMONDS, 2: Suit.CLUBS, 3: Suit.SPADES, 4: Suit.HEARTS}
OUTCOMES: dict[int, VerdictOutcome] = {
    1: VerdictOutcome.PLAYER,
    2: VerdictOutcome.TIE,
    4: VerdictOutcome.BANKER,
    7: VerdictOutcome.FORCED_QUIT,
}
OUTSIDE_GAME_MODES: dict[int, OutsideGameMode] = {
    0: OutsideGameMode.LOCK,
    1: OutsideGameMode.ERROR,
    2: OutsideGameMode.SETTING,
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

ERROR_MODE_BIT = 0x40
"""Bit 6 of an ``E``/``e`` byte: the shoe is in error mode (bits 0-5 are the error code)."""

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

_HEX_VALUES: dict[int, int] = {ord(digit): int(digit, 16) for digit in "0123456789abcdefABCDEF"}
"""An ASCII hex digit (either case) → its value."""

_CARDS: dict[int, Card] = {
    suit_bits << 4 | rank_bits: Card(rank, suit)
    for suit_bits, suit in SUITS.items()
    for rank_bits, rank in RANKS.items()
}
"""Card byte with bit 7 clear → its card: the 52 valid bytes of :data:`SUITS` x :data:`RANKS`."""


class CardByteError(ValueError):
    """A card byte that names no card."""


def decode_card(byte: int) -> Card:
    """Card byte (bit 7 ignored): bits 6-4 suit 1♦ 2♣ 3♠ 4♥, bits 3-0 rank 1..13."""
    card = _CARDS.get(byte & 0x7F)
    if card is not None:
        return card
    suit_bits, rank_bits = (byte >> 4) & 0x07, byte & 0x0F
    if suit_bits not in SUITS:
        raise CardByteError(f"card byte 0x{byte:02X}: invalid suit {suit_bits}")
    raise CardByteError(f"card byte 0x{byte:02X}: invalid rank {rank_bits}")


def decode_target(byte: int) -> DeviceTarget | None:
    """Target/index byte (bit 7 ignored): bits 6-4 target, bits 3-0 index; None if invalid."""
    target_bits, index = (byte >> 4) & 0x07, byte & 0x0F
    if target_bits in (0, 1):
        return SLOT_TARGETS.get((target_bits, index))
    return OTHER_TARGETS.get(target_bits)


def encode_card(card: Card) -> int:
    """Inverse of :func:`decode_card`, with bit 7 set as real shoes send it."""
    suit_bits = next(bits for bits, suit in SUITS.items() if suit is card.suit)
    return 0x80 | suit_bits << 4 | int(card.rank)


def encode_target(target: DeviceTarget, index: int = 1) -> int:
    """Target/index byte for a card (bit 7 set); ``index`` is used for the non-slot targets."""
    for (target_bits, slot_index), slot in SLOT_TARGETS.items():
        if slot is target:
            return 0x80 | target_bits << 4 | slot_index
    target_bits = next(bits for bits, other in OTHER_TARGETS.items() if other is target)
    return 0x80 | target_bits << 4 | (index & 0x0F)


def xor_of(data: bytes) -> int:
    """The XOR of every byte of ``data`` (0 for no bytes)."""
    value = 0
    for byte in data:
        value ^= byte
    return value


def bcc(data: bytes) -> bytes:
    """Two upper-case ASCII hex characters of the XOR of ``data``."""
    return f"{xor_of(data):02X}".encode("ascii")


def encode_frame(seq: int, code: str, data: bytes = b"") -> bytes:
    """A shoe → host frame, as the shoe sends it (used by the simulator and tests)."""
    body = bytes([seq]) + code.encode("ascii") + data + bytes([ETX])
    return bytes([ENQ]) + body + bcc(body)


def check_frame(raw: bytes) -> str | None:
    """Why a whole frame (ENQ through the two BCC characters) is refused before its meaning.

    None when its BCC matches, it has an event code and its SEQ is a printable ASCII mark.
    """
    body = raw[1:-2]
    high, low = _HEX_VALUES.get(raw[-2]), _HEX_VALUES.get(raw[-1])
    if high is None or low is None:
        return f"BCC {raw[-2:]!r} is not two hex characters"
    sent_value = high << 4 | low
    expected = xor_of(body)
    if sent_value != expected:
        return f"bad BCC: frame says {sent_value:02X}, bytes give {expected:02X}"
    if len(body) < 3:
        return "frame has no event code"
    if not 0x20 < body[0] < 0x7F:
        return f"sequence byte 0x{body[0]:02X} is not a printable ASCII mark"
    return None


def frame_meaning(
    raw: bytes, at: float, *, device: str, redeal_payload_lengths: tuple[int, ...]
) -> ReaderInput | str:
    """The engine input a whole frame that passed :func:`check_frame` stands for, or why it
    stands for none. ``at`` and ``device`` are stamped on the input."""
    return _FrameReader(raw, at, device).meaning(redeal_payload_lengths)


class _FrameReader:
    """One checked frame's fields and what each event code makes of them.

    The inputs built here keep their default ``source``, ``Source.READER``.
    """

    __slots__ = ("at", "audit", "code", "data", "device", "raw", "seq")

    def __init__(self, raw: bytes, at: float, device: str) -> None:
        self.raw = raw
        self.at = at
        self.device = device
        self.seq = raw[1]
        self.code = chr(raw[2]) if raw[2] < 0x80 else ""
        self.data = raw[3:-3]
        self.audit = hex_raw(raw)

    def meaning(self, redeal_payload_lengths: tuple[int, ...]) -> ReaderInput | str:
        code = self.code
        if code == "D":
            return self._card()
        if code in ("S", "P", "C"):
            return self._payload_less()
        if code == "d":
            return self._outside_game_card()
        if code == "R":
            return self._redeal(redeal_payload_lengths)
        if code == "G":
            return self._verdict()
        if code in ("E", "e"):
            return self._error()
        if code == "L":
            return self._lock()
        if code == "M":
            return self._preset()
        return f"unknown event code {self.raw[2:3]!r}"

    def _length_problem(self, length: int) -> str | None:
        if len(self.data) != length:
            return f"'{self.code}' frame needs {length} data byte(s), got {len(self.data)}"
        return None

    def _signal(
        self, kind: ReaderSignalKind, code: int | None = None, detail: str | None = None
    ) -> ReaderSignal:
        return ReaderSignal(
            kind=kind, at=self.at, code=code, detail=detail, raw=self.audit, device=self.device
        )

    def _card(self) -> CardRead | str:
        if (problem := self._length_problem(2)) is not None:
            return problem
        target_byte, card_byte = self.data
        target = decode_target(target_byte)
        if target is None:
            target_bits, index = (target_byte >> 4) & 0x07, target_byte & 0x0F
            return f"target/index byte 0x{target_byte:02X}: invalid target {target_bits} index {index}"
        try:
            card = decode_card(card_byte)
        except CardByteError as exc:
            return str(exc)
        return CardRead(
            card=card, at=self.at, target=target,
            transmission_id=chr(self.seq), raw=self.audit, device=self.device,
        )  # fmt: skip

    def _payload_less(self) -> ReaderInput | str:
        if (problem := self._length_problem(0)) is not None:
            return problem
        if self.code == "C":
            return CutCardDrawn(at=self.at, raw=self.audit, device=self.device)
        return self._signal(ReaderSignalKind.STARTED if self.code == "S" else ReaderSignalKind.STANDBY)

    def _outside_game_card(self) -> OutsideGameCard | str:
        if (problem := self._length_problem(2)) is not None:
            return problem
        mode_byte, card_byte = self.data
        mode_bits = (mode_byte >> 4) & 0x07
        mode = OUTSIDE_GAME_MODES.get(mode_bits)
        if mode is None:
            return f"'d' mode byte 0x{mode_byte:02X}: unknown mode {mode_bits}"
        try:
            card = decode_card(card_byte)
        except CardByteError as exc:
            return str(exc)
        return OutsideGameCard(
            card=card,
            mode=mode,
            at=self.at,
            transmission_id=chr(self.seq),
            raw=self.audit,
            device=self.device,
        )

    def _redeal(self, accepted_lengths: tuple[int, ...]) -> ReaderSignal | str:
        if len(self.data) not in accepted_lengths:
            return f"'R' frame with {len(self.data)} data byte(s); accepted: {list(accepted_lengths)}"
        return self._signal(ReaderSignalKind.REDEAL, detail=self.data.hex(" ") or None)

    def _verdict(self) -> ShoeVerdict | str:
        if (problem := self._length_problem(1)) is not None:
            return problem
        result = self.data[0]
        outcome_bits = (result >> 4) & 0x07
        outcome = OUTCOMES.get(outcome_bits)
        if outcome is None:
            return f"result byte 0x{result:02X}: unknown outcome {outcome_bits}"
        return ShoeVerdict(
            outcome=outcome, player_pair=bool(result & 0x01), banker_pair=bool(result & 0x02),
            at=self.at, raw=self.audit, device=self.device,
        )  # fmt: skip

    def _error(self) -> ReaderInput | str:
        if (problem := self._length_problem(1)) is not None:
            return problem
        error_byte = self.data[0]
        error = error_byte & 0x3F
        mode = "shoe in error mode" if error_byte & ERROR_MODE_BIT else "shoe not in error mode"
        meaning = f"{ERROR_MEANINGS.get(error, f'unknown error code {error}')}; {mode}"
        if self.code == "E" and error in READ_FAILURE_CODES:
            return ReadFailed(
                at=self.at,
                reason=meaning,
                code=error,
                raw=self.audit,
                device=self.device,
            )
        kind = ReaderSignalKind.ERROR_RAISED if self.code == "E" else ReaderSignalKind.ERROR_CLEARED
        return self._signal(kind, code=error, detail=meaning)

    def _lock(self) -> ReaderSignal | str:
        if (problem := self._length_problem(1)) is not None:
            return problem
        return self._signal(ReaderSignalKind.LOCKED if self.data[0] & 0x01 else ReaderSignalKind.UNLOCKED)

    def _preset(self) -> ReaderSignal | str:
        if (problem := self._length_problem(6)) is not None:
            return problem
        if not all(0x20 <= c < 0x7F for c in self.data):
            return "'M' frame: address/value are not printable ASCII"
        text = self.data.decode("ascii")
        return self._signal(ReaderSignalKind.PRESET_CHANGED, detail=f"address={text[:2]} value={text[2:]}")
