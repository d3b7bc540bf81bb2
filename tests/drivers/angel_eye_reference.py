"""An Angel Eye II-EX reading written from the protocol specification alone: a test oracle.

Written from drivers/protocols/PROTOCOLS.md §1, not from the product: it imports nothing from
``drivers.protocols`` and has its own tables for targets, ranks, suits, outcomes, modes and
error codes, its own checksum and its own meaning of each byte. It also has another shape:
it reads a whole stream at once, by offsets, where the product decoder is incremental. The
product decoder must find the same frames in any stream, cut into reads anywhere, and give
each the same meaning (:func:`reference_read`).

A meaning is a plain tuple, one shape per event code:

- ``("D", mark, target, card)``: a card dealt; target ``P1``..``B3``, ``burn``, ``first_card``
  or ``burn_count``; card as rank then suit letter (``8s``, ``Th``)
- ``("d", mark, mode, card)``: a card drawn outside the game; mode ``lock``/``error``/``setting``
- ``("S",)``, ``("P",)``, ``("C",)``: start, stand-by, cut card
- ``("R", data)``: re-deal with its data bytes in hex (None when it has none)
- ``("G", outcome, player_pair, banker_pair)``
- ``("E" | "e", error_code, in_error_mode, needs_rescan)``: error raised / cleared;
  ``needs_rescan`` for a raised "cannot read" (1) or "card-code error" (6)
- ``("L", locked)``, ``("M", address, value)``
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

ENQ_BYTE = 0x05  # starts a frame, wherever it appears
ETX_BYTE = 0x03  # ends a frame's data; two checksum characters follow

RANK_LETTERS = "A23456789TJQK"  # rank field 1..13
SUIT_LETTERS = {1: "d", 2: "c", 3: "s", 4: "h"}
SIDES = {0: "P", 1: "B"}  # Player and Banker cards carry an index 1..3
OTHER_TARGETS = {2: "burn", 4: "first_card", 5: "burn_count"}
OUTCOME_NAMES = {1: "player", 2: "tie", 4: "banker", 7: "forced_quit"}
MODE_NAMES = {0: "lock", 1: "error", 2: "setting"}
CANNOT_READ, CARD_CODE_ERROR = 1, 6
HEX_CHARACTERS = b"0123456789ABCDEFabcdef"

Meaning = tuple[object, ...]


@dataclass(frozen=True)
class ReferenceFrame:
    """A well-formed frame of the stream: its bytes, whether it repeats one already taken, its meaning."""

    raw: bytes
    repeat: bool
    meaning: Meaning


def reference_read(
    stream: bytes,
    *,
    max_frame_length: int = 32,
    dedup_window: int = 4,
    redeal_payload_lengths: tuple[int, ...] = (0, 2),
) -> list[ReferenceFrame]:
    """Every frame of ``stream`` that has a meaning, in order, with its repeat flag.

    Repeats (spec: "deduplicate on (SEQ, payload); reset the memory on a start frame"): the
    memory holds the last ``dedup_window`` distinct (SEQ, payload) pairs taken since the last
    start frame. A start frame empties it; so a start frame repeats only a start frame that is
    still the newest entry (its own copies); after any other frame it is a new start.
    """
    memory: list[tuple[int, bytes]] = []
    found: list[ReferenceFrame] = []
    for raw in complete_frames(stream, max_frame_length):
        meaning = frame_meaning(raw, redeal_payload_lengths)
        if meaning is None:
            continue
        key = (raw[1], raw[2:-3])
        starts = raw[2:3] == b"S"
        repeat = memory[-1:] == [key] if starts else key in memory
        if not repeat:
            memory = [*([] if starts else memory), key][-dedup_window:]
        found.append(ReferenceFrame(raw, repeat, meaning))
    return found


def complete_frames(stream: bytes, max_frame_length: int) -> Iterator[bytes]:
    """Each ``ENQ ... ETX c c`` in the stream: an ENQ anywhere starts a frame (and cuts the one
    in progress); the ETX must come within ``max_frame_length`` bytes counted from the ENQ
    (both included), else those bytes are dropped; ``c c`` are the two checksum characters."""
    start = stream.find(ENQ_BYTE)
    while start != -1:
        resume = start + max_frame_length  # no ETX in time: everything up to here is dropped
        for offset in range(start + 1, start + max_frame_length):
            if offset >= len(stream):
                return  # the stream ends inside the frame
            if stream[offset] == ENQ_BYTE:
                resume = offset
                break
            if stream[offset] == ETX_BYTE:
                checksum = stream[offset + 1 : offset + 3]
                if ENQ_BYTE in checksum:
                    resume = offset + 1 + checksum.index(ENQ_BYTE)
                    break
                if len(checksum) < 2:
                    return
                yield stream[start : offset + 3]
                resume = offset + 3
                break
        start = stream.find(ENQ_BYTE, resume)


def frame_meaning(raw: bytes, redeal_payload_lengths: tuple[int, ...]) -> Meaning | None:
    """What a complete frame says, or None when it says nothing valid."""
    checked = raw[1:-2]  # SEQ through ETX
    sent = raw[-2:]
    if any(character not in HEX_CHARACTERS for character in sent):
        return None
    xor = 0
    for byte in checked:
        xor ^= byte
    if int(sent.decode("ascii"), 16) != xor:
        return None
    if len(raw) < 6:  # ENQ SEQ CODE ETX c c at the least
        return None
    mark = raw[1]
    if not 0x21 <= mark <= 0x7E:  # a printable ASCII mark ('1', '2', ... 'A' ...)
        return None
    code = raw[2]
    data = raw[3:-3]
    if code in b"SPC":
        return (chr(code),) if not data else None
    if code in b"Dd":
        if len(data) != 2:
            return None
        card = card_name(data[1])
        where = target_name(data[0]) if code == ord("D") else MODE_NAMES.get(field(data[0], 6, 4))
        if card is None or where is None:
            return None
        return (chr(code), chr(mark), where, card)
    if code == ord("R"):
        return ("R", data.hex(" ") or None) if len(data) in redeal_payload_lengths else None
    if code == ord("G"):
        if len(data) != 1 or field(data[0], 6, 4) not in OUTCOME_NAMES:
            return None
        return ("G", OUTCOME_NAMES[field(data[0], 6, 4)], bool(data[0] & 1), bool(data[0] & 2))
    if code in b"Ee":
        if len(data) != 1:
            return None
        error = field(data[0], 5, 0)
        needs_rescan = code == ord("E") and error in (CANNOT_READ, CARD_CODE_ERROR)
        return (chr(code), error, bool(field(data[0], 6, 6)), needs_rescan)
    if code == ord("L"):
        return ("L", bool(data[0] & 1)) if len(data) == 1 else None
    if code == ord("M"):
        if len(data) != 6 or not all(0x20 <= byte <= 0x7E for byte in data):
            return None
        return ("M", data[:2].decode("ascii"), data[2:].decode("ascii"))
    return None


def field(byte: int, high: int, low: int) -> int:
    """Bits ``high`` down to ``low`` of ``byte``."""
    return (byte >> low) & ((1 << (high - low + 1)) - 1)


def target_name(byte: int) -> str | None:
    """Bits 6-4 target (0 Player, 1 Banker, 2 Burn, 4 FirstCard, 5 BurnCount), bits 3-0 index
    (1..3 for Player/Banker)."""
    target, index = field(byte, 6, 4), field(byte, 3, 0)
    if target in SIDES:
        return f"{SIDES[target]}{index}" if 1 <= index <= 3 else None
    return OTHER_TARGETS.get(target)


def card_name(byte: int) -> str | None:
    """Bits 6-4 suit (1 ♦, 2 ♣, 3 ♠, 4 ♥), bits 3-0 rank (1 = A ... 13 = K)."""
    suit, rank = field(byte, 6, 4), field(byte, 3, 0)
    if suit not in SUIT_LETTERS or not 1 <= rank <= 13:
        return None
    return RANK_LETTERS[rank - 1] + SUIT_LETTERS[suit]
