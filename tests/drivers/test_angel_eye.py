"""Angel Eye II-EX decoder: every event code, BCC, repeats, resync, host commands."""

from __future__ import annotations

from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
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
from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, plan_shoe
from drivers.fixtures import FixtureStep
from drivers.protocols.angel_eye import AngelEyeDecoder, AngelEyeSettings, encode_command
from drivers.protocols.angel_eye_codec import (
    ACK,
    ENQ,
    ETX,
    NAK,
    bcc,
    decode_card,
    encode_card,
    encode_frame,
    encode_target,
)
from drivers.protocols.frames import DecodedFrame, ReaderInput
from drivers.simulate import encode_plan
from tests.drivers.angel_eye_reference import Meaning, reference_read
from tests.drivers.splitting import assert_same_when_cut, assert_split_invariant, cut_at, cut_points

SEQ = ord("1")


def decode(data: bytes, settings: AngelEyeSettings | None = None) -> list[DecodedFrame]:
    decoder = AngelEyeDecoder(settings)
    return decoder.feed(data, 5.0) + decoder.reset("end")


def only_input(data: bytes):
    frames = decode(data)
    assert [f.status for f in frames] == ["input"], [f.to_dict() for f in frames]
    return frames[0].input


def test_spec_example_player_card_eight_of_spades() -> None:
    frame = encode_frame(SEQ, "D", bytes([0x81, 0xB8]))
    body = bytes([SEQ, ord("D"), 0x81, 0xB8, ETX])
    assert frame == bytes([ENQ]) + body + bcc(body)
    read = only_input(frame)
    assert isinstance(read, CardRead)
    assert read.card == Card.parse("8s")
    assert read.target is DeviceTarget.P1
    assert read.transmission_id == "1"
    assert read.at == 5.0
    assert read.raw == frame.hex(" ")


def test_spec_example_player_wins_with_player_pair() -> None:
    verdict = only_input(encode_frame(ord("2"), "G", bytes([0x91])))
    assert verdict == ShoeVerdict(
        outcome=VerdictOutcome.PLAYER, player_pair=True, banker_pair=False, at=5.0,
        raw=verdict.raw, device="reader",
    )  # fmt: skip


def test_every_card_byte_round_trips() -> None:
    for card in ALL_CARDS:
        assert decode_card(encode_card(card)) == card
        read = only_input(encode_frame(SEQ, "D", bytes([encode_target(DeviceTarget.B2), encode_card(card)])))
        assert isinstance(read, CardRead)
        assert read.card == card
        assert read.target is DeviceTarget.B2


def test_every_card_byte_value_is_a_card_or_refused() -> None:
    valid = 0
    for byte in range(256):
        frames = decode(encode_frame(SEQ, "D", bytes([0x81, byte])))
        if byte in (ETX, ENQ):  # framing bytes: real shoes set bit 7 so these never occur
            assert not any(isinstance(f.input, CardRead) for f in frames)
            continue
        assert len(frames) == 1
        suit, rank = (byte >> 4) & 7, byte & 15
        if suit in (1, 2, 3, 4) and 1 <= rank <= 13:
            valid += 1
            assert frames[0].status == "input"
        else:
            assert frames[0].status == "rejected"
            assert "card byte" in (frames[0].rejected or "")
    assert valid == 2 * 52  # bit 7 ignored


def test_every_target_index_byte() -> None:
    expected = {
        (0, 1): DeviceTarget.P1, (0, 2): DeviceTarget.P2, (0, 3): DeviceTarget.P3,
        (1, 1): DeviceTarget.B1, (1, 2): DeviceTarget.B2, (1, 3): DeviceTarget.B3,
    }  # fmt: skip
    for byte in range(128):
        target, index = byte >> 4, byte & 15
        frames = decode(encode_frame(SEQ, "D", bytes([0x80 | byte, 0xB8])))
        if target in (0, 1):
            want = expected.get((target, index))
        else:
            want = {2: DeviceTarget.BURN, 4: DeviceTarget.FIRST_CARD, 5: DeviceTarget.BURN_COUNT}.get(target)
        if want is None:
            assert frames[0].status == "rejected", byte
            assert "target/index" in (frames[0].rejected or "")
        else:
            assert isinstance(frames[0].input, CardRead)
            assert frames[0].input.target is want


def test_signals_start_standby_cut_lock_preset_redeal() -> None:
    start = only_input(encode_frame(SEQ, "S"))
    assert isinstance(start, ReaderSignal)
    assert start.kind is ReaderSignalKind.STARTED
    standby = only_input(encode_frame(SEQ, "P"))
    assert isinstance(standby, ReaderSignal)
    assert standby.kind is ReaderSignalKind.STANDBY
    assert isinstance(only_input(encode_frame(SEQ, "C")), CutCardDrawn)
    locked = only_input(encode_frame(SEQ, "L", bytes([0x81])))
    assert isinstance(locked, ReaderSignal)
    assert locked.kind is ReaderSignalKind.LOCKED
    unlocked = only_input(encode_frame(SEQ, "L", bytes([0x80])))
    assert isinstance(unlocked, ReaderSignal)
    assert unlocked.kind is ReaderSignalKind.UNLOCKED
    preset = only_input(encode_frame(SEQ, "M", b"0A0123"))
    assert isinstance(preset, ReaderSignal)
    assert preset.kind is ReaderSignalKind.PRESET_CHANGED
    assert preset.detail == "address=0A value=0123"
    for payload in (b"", bytes([0x81, 0x82])):
        redeal = only_input(encode_frame(SEQ, "R", payload))
        assert isinstance(redeal, ReaderSignal)
        assert redeal.kind is ReaderSignalKind.REDEAL
    assert decode(encode_frame(SEQ, "R", b"\x81"))[0].status == "rejected"
    only_s = AngelEyeSettings(redeal_payload_lengths=(0,))
    assert decode(encode_frame(SEQ, "R", bytes([0x81, 0x82])), only_s)[0].status == "rejected"


def test_every_verdict_byte() -> None:
    outcomes = {
        1: VerdictOutcome.PLAYER,
        2: VerdictOutcome.TIE,
        4: VerdictOutcome.BANKER,
        7: VerdictOutcome.FORCED_QUIT,
    }
    for byte in range(256):
        frames = decode(encode_frame(SEQ, "G", bytes([byte])))
        outcome = outcomes.get((byte >> 4) & 7)
        if outcome is None:
            assert frames[0].status == "rejected"
            continue
        verdict = frames[0].input
        assert isinstance(verdict, ShoeVerdict)
        assert verdict.outcome is outcome
        assert verdict.player_pair == bool(byte & 1)
        assert verdict.banker_pair == bool(byte & 2)


def test_errors_cannot_read_and_card_code_are_read_failures_others_signals() -> None:
    for code in range(64):
        raised = only_input(encode_frame(SEQ, "E", bytes([0xC0 | code])))
        if code in (1, 6):
            assert isinstance(raised, ReadFailed)
            assert raised.code == code
            assert raised.reason == {1: "cannot read", 6: "card-code error"}[code] + "; shoe in error mode"
        else:
            assert isinstance(raised, ReaderSignal)
            assert raised.kind is ReaderSignalKind.ERROR_RAISED
            assert raised.code == code
        cleared = only_input(encode_frame(SEQ, "e", bytes([0x80 | code])))
        assert isinstance(cleared, ReaderSignal)
        assert cleared.kind is ReaderSignalKind.ERROR_CLEARED
        assert cleared.code == code


def test_error_mode_bit_six_of_the_error_byte_is_reported() -> None:
    """``E``/``e`` byte: bit 6 says whether the shoe is in error mode, bits 0-5 the code."""
    for code, mode_bit in ((1, 0x40), (1, 0x00), (2, 0x40), (2, 0x00)):
        raised = only_input(encode_frame(SEQ, "E", bytes([0x80 | mode_bit | code])))
        cleared = only_input(encode_frame(SEQ, "e", bytes([0x80 | mode_bit | code])))
        text = raised.reason if isinstance(raised, ReadFailed) else raised.detail
        assert isinstance(cleared, ReaderSignal)
        assert raised.code == cleared.code == code
        mode = "shoe in error mode" if mode_bit else "shoe not in error mode"
        assert text == f"{ {1: 'cannot read', 2: 'overdraw'}[code] }; {mode}"
        assert cleared.detail == text


def test_card_outside_game_flow_is_an_outside_game_card_never_a_card_read() -> None:
    for mode in (OutsideGameMode.LOCK, OutsideGameMode.ERROR, OutsideGameMode.SETTING):
        mode_bits = {OutsideGameMode.LOCK: 0, OutsideGameMode.ERROR: 1, OutsideGameMode.SETTING: 2}[mode]
        frame = encode_frame(SEQ, "d", bytes([0x80 | mode_bits << 4, 0xB8]))
        inp = only_input(frame)
        assert isinstance(inp, OutsideGameCard)
        assert (inp.card, inp.mode) == (Card.parse("8s"), mode)
        assert (inp.transmission_id, inp.device) == (chr(SEQ), "reader")
        assert inp.raw == frame.hex(" ")
        # A repeat of the frame is a duplicate, as for any frame.
        again = decode(frame + frame)
        assert [f.status for f in again] == ["input", "duplicate"]
    assert decode(encode_frame(SEQ, "d", bytes([0xB0, 0xB8])))[0].status == "rejected"  # mode 3
    assert decode(encode_frame(SEQ, "d", bytes([0x80, 0xBE])))[0].status == "rejected"  # rank 14


def test_wrong_lengths_and_unknown_codes_are_rejected() -> None:
    for code, payload in (("D", b"\x81"), ("D", b"\x81\xb8\xb8"), ("S", b"\x81"), ("G", b""), ("E", b""),
                          ("M", b"0A01"), ("L", b""), ("X", b""), ("C", b"\x81")):  # fmt: skip
        frames = decode(encode_frame(SEQ, code, payload))
        assert [f.status for f in frames] == ["rejected"], (code, payload)
    assert decode(encode_frame(SEQ, "M", b"0A\x0112"))[0].status == "rejected"


def test_bad_bcc_is_rejected_with_both_values() -> None:
    frame = bytearray(encode_frame(SEQ, "D", bytes([0x81, 0xB8])))
    frame[-1] = ord("0") if frame[-1] != ord("0") else ord("1")
    frames = decode(bytes(frame))
    assert [f.status for f in frames] == ["rejected"]
    assert "bad BCC" in (frames[0].rejected or "")
    frame[-1] = ord("G")
    assert "not two hex" in (decode(bytes(frame))[0].rejected or "")


def test_lower_case_bcc_is_the_same_value() -> None:
    frame = encode_frame(SEQ, "D", bytes([0x81, 0xBA]))
    assert frame[-2:].upper() == frame[-2:]
    assert decode(frame[:-2] + frame[-2:].lower())[0].status == "input"


def test_a_copy_with_its_bcc_in_the_other_case_is_a_repeat() -> None:
    """Found by the reference fuzz test: a repeat is the same SEQ and payload, whatever the case
    of its BCC's hex letters; a copy with a wrong BCC is still refused."""
    frame = encode_frame(ord("1"), "D", bytes([0x01, 0xA1]))
    assert frame[-2:] == b"D6"
    lower = frame[:-2] + frame[-2:].lower()
    assert [f.status for f in decode(frame + lower)] == ["input", "duplicate"]
    assert [f.status for f in decode(lower + frame + lower)] == ["input", "duplicate", "duplicate"]
    wrong = frame[:-2] + b"d7"
    assert [f.status for f in decode(frame + wrong)] == ["input", "rejected"]
    dropping = AngelEyeDecoder()
    dropping.drop_duplicates()
    assert [f.status for f in dropping.feed(lower, 0.0) + dropping.feed(frame, 0.1)] == ["input"]
    assert dropping.take_dropped_duplicates() == 1


def test_repeats_suppressed_on_seq_and_payload_reset_by_start() -> None:
    p1 = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
    b1_same_card = encode_frame(ord("2"), "D", bytes([0x91, 0xB8]))
    data = p1 * 3 + b1_same_card * 3
    statuses = [f.status for f in decode(data)]
    assert statuses == ["input", "duplicate", "duplicate", "input", "duplicate", "duplicate"]
    start = encode_frame(ord("1"), "S")
    statuses = [f.status for f in decode(p1 + start * 3 + p1)]
    assert statuses == ["input", "input", "duplicate", "duplicate", "input"]


def test_a_second_start_frame_with_the_same_mark_is_a_restart_and_resets_the_repeat_memory() -> None:
    """The shoe starts (S '1'), deals P1 8♠ as mark '2', restarts and deals the same card with
    the same mark: both starts and both cards are new (8 decks hold 8 of each card)."""
    start = encode_frame(ord("1"), "S")
    card = encode_frame(ord("2"), "D", bytes([0x81, 0xB8]))
    stream = start * 3 + card * 3 + start * 3 + card * 3
    frames = assert_split_invariant(AngelEyeDecoder, stream)
    assert [f["status"] for f in frames] == ["input", "duplicate", "duplicate"] * 4
    assert [f["input"]["type"] for f in frames if f["status"] == "input"] == [
        "ReaderSignal", "CardRead", "ReaderSignal", "CardRead",
    ]  # fmt: skip


def test_identical_consecutive_cards_with_new_sequence_marks_are_both_kept() -> None:
    same_card_twice = encode_frame(ord("3"), "D", bytes([0x81, 0xB8])) + encode_frame(
        ord("4"), "D", bytes([0x81, 0xB8])
    )
    assert [f.status for f in decode(same_card_twice)] == ["input", "input"]


def test_resync_after_garbage_and_cut_frames() -> None:
    good = encode_frame(SEQ, "D", bytes([0x81, 0xB8]))
    data = b"\x00\xffjunk" + good[:4] + good + b"\x06" + b"\x1502" + b"zz" + good[:-1]
    frames = assert_split_invariant(AngelEyeDecoder, data)
    assert [f["status"] for f in frames] == [
        "rejected",
        "rejected",
        "input",
        "reply",
        "reply",
        "rejected",
        "rejected",
    ]
    assert frames[0]["reason"] == "bytes outside any frame"
    assert frames[1]["reason"] == "frame cut short by ENQ before its ETX"
    assert frames[3]["reply"] == {"ok": True, "code": None, "meaning": None}
    assert frames[4]["reply"] == {"ok": False, "code": "02", "meaning": "BCC error"}
    assert frames[6]["reason"] == "end of input"


def test_overlong_frame_is_dropped_and_next_frame_read() -> None:
    good = encode_frame(ord("7"), "C")
    data = bytes([ENQ]) + b"\x81" * 40 + good
    frames = assert_split_invariant(AngelEyeDecoder, data)
    assert [f["status"] for f in frames] == ["rejected", "rejected", "input"]
    assert "no ETX within 32" in frames[0]["reason"]


def test_max_frame_length_counts_enq_through_etx_and_accepts_no_byte_more() -> None:
    """``max_frame_length`` bytes from ENQ to ETX (both included) is the longest frame taken."""
    for limit in (8, 9, 32):
        for length, taken in ((limit - 4, True), (limit - 3, False)):
            config = AngelEyeSettings(max_frame_length=limit, redeal_payload_lengths=(length,))
            frame = encode_frame(SEQ, "R", b"\x81" * length)  # ENQ SEQ 'R' data ETX: length + 4 bytes
            assert frame.index(ETX) + 1 == length + 4
            frames = assert_split_invariant(partial(AngelEyeDecoder, config), frame)
            if taken:
                assert [f["status"] for f in frames] == ["input"]
            else:
                assert frames[0]["reason"] == f"no ETX within {limit} bytes of ENQ"
                assert "input" not in [f["status"] for f in frames]


def test_reset_discards_partial_frame_not_glued_to_next() -> None:
    decoder = AngelEyeDecoder()
    good = encode_frame(SEQ, "D", bytes([0x81, 0xB8]))
    assert decoder.feed(good[:5], 1.0) == []
    assert decoder.has_partial_frame
    dropped = decoder.reset()
    assert [f.status for f in dropped] == ["rejected"]
    assert dropped[0].raw == good[:5]
    assert not decoder.has_partial_frame
    # the tail of the cut frame followed by a fresh whole frame: only the fresh one is a card
    frames = decoder.feed(good[5:] + good, 2.0)
    assert [f.status for f in frames] == ["rejected", "input"]


def test_repeat_memory_survives_reset_so_a_resent_frame_after_replug_is_a_repeat() -> None:
    decoder = AngelEyeDecoder()
    good = encode_frame(SEQ, "D", bytes([0x81, 0xB8]))
    assert [f.status for f in decoder.feed(good, 1.0)] == ["input"]
    decoder.reset()
    assert [f.status for f in decoder.feed(good, 2.0)] == ["duplicate"]


def test_host_commands_lock_example_and_bcc_variant() -> None:
    lock = encode_command("LK", 2)
    assert lock == bytes.fromhex("02 4F 50 4C 4B 30 32 03") + b"1B"
    assert encode_command("LK", 2, bcc_includes_stx=False)[-2:] == b"19"
    assert encode_command("LK", 1)[5:7] == b"01"
    assert encode_command("EC", 6)[3:7] == b"EC06"
    assert encode_command("GP", 0)[3:7] == b"GP00"


def test_nak_codes() -> None:
    for code, meaning in (("11", "format or length error"), ("21", "busy"), ("FF", "other error")):
        frames = decode(bytes([NAK]) + code.encode())
        assert frames[0].reply is not None
        assert frames[0].reply.to_dict() == {"ok": False, "code": code, "meaning": meaning}
    assert decode(bytes([NAK]) + b"99")[0].status == "rejected"
    assert decode(bytes([ACK]))[0].status == "reply"


def test_a_full_stream_is_split_invariant() -> None:
    stream = b"".join(
        encode_frame(0x31 + i % 9, code, payload) * 3
        for i, (code, payload) in enumerate(
            [("S", b""), ("D", b"\xc1\xb8"), ("D", b"\xa1\x95"), ("D", b"\x81\x9d"), ("D", b"\x91\xc2"),
             ("D", b"\x82\xa3"), ("D", b"\x92\xb1"), ("G", b"\xc0"), ("E", b"\xc1"), ("e", b"\x81"),
             ("C", b""), ("L", b"\x81")]
        )
    )  # fmt: skip
    frames = assert_split_invariant(AngelEyeDecoder, stream)
    assert sum(f["status"] == "input" for f in frames) == 12
    assert sum(f["status"] == "duplicate" for f in frames) == 24


frame_parts = st.tuples(
    st.sampled_from(b"123456789AB"), st.sampled_from(list("SPCDdRGEeLMX")), st.binary(max_size=7)
)


# -- differential: the decoder against a reading written from the specification alone ----------
# tests/drivers/angel_eye_reference.py shares no table, checksum or byte meaning with the
# product. Every frame the decoder takes (new or repeat) must be one the reference finds, at the
# same place in the stream, with the same meaning: cards, targets, modes, verdicts, errors.


def meaning_of(inp: ReaderInput) -> Meaning:
    """The decoder's input in the reference's terms (see ``angel_eye_reference``)."""
    if isinstance(inp, CardRead):
        assert inp.target is not None
        return ("D", inp.transmission_id, inp.target.value, inp.card.code)
    if isinstance(inp, OutsideGameCard):
        return ("d", inp.transmission_id, inp.mode.value, inp.card.code)
    if isinstance(inp, CutCardDrawn):
        return ("C",)
    if isinstance(inp, ShoeVerdict):
        return ("G", inp.outcome.value, inp.player_pair, inp.banker_pair)
    if isinstance(inp, ReadFailed):
        return ("E", inp.code, error_mode(inp.reason), True)
    assert isinstance(inp, ReaderSignal), inp  # the betting window only with lock_is_betting_window
    kind = inp.kind
    if kind in (ReaderSignalKind.ERROR_RAISED, ReaderSignalKind.ERROR_CLEARED):
        letter = "E" if kind is ReaderSignalKind.ERROR_RAISED else "e"
        return (letter, inp.code, error_mode(inp.detail or ""), False)
    if kind in (ReaderSignalKind.LOCKED, ReaderSignalKind.UNLOCKED):
        return ("L", kind is ReaderSignalKind.LOCKED)
    if kind is ReaderSignalKind.PRESET_CHANGED:
        address, value = (inp.detail or "").removeprefix("address=").split(" value=")
        return ("M", address, value)
    if kind is ReaderSignalKind.REDEAL:
        return ("R", inp.detail)
    return {ReaderSignalKind.STARTED: ("S",), ReaderSignalKind.STANDBY: ("P",)}[kind]


def error_mode(text: str) -> bool:
    """Bit 6 of an ``E``/``e`` byte as the decoder words it."""
    if text.endswith("; shoe in error mode"):
        return True
    assert text.endswith("; shoe not in error mode"), text
    return False


DecodedMeaning = tuple[bytes, bool, Meaning]


def decoded_meanings(chunks: list[bytes], config: AngelEyeSettings | None = None) -> list[DecodedMeaning]:
    """(raw, repeat, meaning) of every frame the decoder took, reads fed one by one."""
    decoder = AngelEyeDecoder(config)
    frames = [frame for chunk in chunks for frame in decoder.feed(chunk, 0.0)] + decoder.reset()
    return [(f.raw, f.duplicate, meaning_of(f.input)) for f in frames if f.input is not None]


def reference_meanings(data: bytes, config: AngelEyeSettings | None = None) -> list[DecodedMeaning]:
    config = config or AngelEyeSettings()
    found = reference_read(
        data,
        max_frame_length=config.max_frame_length,
        dedup_window=config.dedup_window,
        redeal_payload_lengths=config.redeal_payload_lengths,
    )
    return [(frame.raw, frame.repeat, frame.meaning) for frame in found]


def assert_same_meanings(data: bytes, chunks: list[bytes], config: AngelEyeSettings | None = None) -> None:
    """The decoder's frames and meanings are the reference's; counted repeats are its repeats."""
    want = reference_meanings(data, config)
    assert decoded_meanings(chunks, config) == want
    counting = AngelEyeDecoder(config)
    counting.drop_duplicates()
    kept = [frame for chunk in chunks for frame in counting.feed(chunk, 0.0)] + counting.reset()
    assert [(f.raw, False, meaning_of(f.input)) for f in kept if f.input is not None] == [
        frame for frame in want if not frame[1]
    ]
    assert counting.take_dropped_duplicates() == sum(repeat for _, repeat, _ in want)


_marks = st.sampled_from(b"123456789AB") | st.integers(0x21, 0x7E) | st.sampled_from([0x00, 0x20, 0x7F, 0xB1])
_target_bytes = (
    st.sampled_from([0x81, 0x82, 0x83, 0x91, 0x92, 0x93, 0xA1, 0xC3, 0xD2, 0x01, 0x52])  # valid
    | st.sampled_from([0x80, 0x84, 0x90, 0x94, 0xB1, 0xE1, 0xF1])  # index 0 or 4; targets 3, 6, 7
    | st.integers(0, 255)
)
_card_bytes = st.sampled_from([encode_card(c) for c in ALL_CARDS]) | st.integers(0, 255)
_card_frame = st.builds(
    lambda seq, target, card, lower: (lambda f: f[:-2] + f[-2:].lower() if lower else f)(
        encode_frame(seq, "D", bytes([target, card]))
    ),
    _marks,
    _target_bytes,
    _card_bytes,
    st.booleans(),
)
_mangled_card_frame = st.builds(
    lambda frame, position, value: frame[:position] + bytes([value]) + frame[position + 1 :],
    _card_frame,
    st.integers(0, 7),
    st.integers(0, 255),
)
_meaningful_payload = st.one_of(
    st.tuples(st.just("S"), st.just(b"")),
    st.tuples(st.sampled_from(list("PC")), st.just(b"")),
    st.tuples(
        st.just("d"), st.tuples(st.sampled_from([0x80, 0x90, 0xA0, 0xB0, 0x81]), _card_bytes).map(bytes)
    ),
    st.tuples(st.just("R"), st.sampled_from([b"", b"\x81", b"\x81\x82"])),
    st.tuples(st.just("G"), st.integers(0x80, 0xFF).map(lambda b: bytes([b]))),
    st.tuples(st.sampled_from(list("Ee")), st.integers(0x80, 0xFF).map(lambda b: bytes([b]))),
    st.tuples(st.just("L"), st.sampled_from([b"\x80", b"\x81"])),
    st.tuples(st.just("M"), st.sampled_from([b"0A0123", b"0A\x0112", b"0A01"])),
)
_other_frame = st.builds(
    lambda seq, code_payload: encode_frame(seq, *code_payload),
    st.sampled_from(b"123456789AB"),
    _meaningful_payload
    | st.tuples(
        st.sampled_from(list("SPCDdRGEeLMX")),
        st.binary(max_size=6).map(lambda b: b.replace(bytes([ENQ]), b"").replace(bytes([ETX]), b"")),
    ),
)
angel_eye_stream = st.lists(
    _card_frame
    | _card_frame.map(lambda f: f * 3)
    | _mangled_card_frame
    | _card_frame.map(lambda f: f[:5])
    | _other_frame
    | _other_frame.map(lambda f: f * 3)
    | st.just(encode_frame(ord("1"), "S") * 3)  # the same start again later: the shoe restarted
    | st.sampled_from([bytes([ACK]), bytes([NAK]) + b"02", bytes([NAK]), bytes([ENQ]), bytes([ETX])])
    | st.binary(max_size=6)
    | st.binary(min_size=25, max_size=40).map(lambda b: bytes([ENQ]) + b.replace(bytes([ENQ]), b"")),
    max_size=14,
).map(b"".join)
"""Valid, repeated, lower-case-BCC, mangled and cut card frames, other frames with and without a
meaning, restarts, replies, noise and frames around ``max_frame_length``."""

_configs = st.sampled_from(
    [
        None,
        AngelEyeSettings(dedup_window=1),
        AngelEyeSettings(max_frame_length=8),
        AngelEyeSettings(max_frame_length=30),
        AngelEyeSettings(redeal_payload_lengths=(0,), sequence_marks=""),
    ]
)


@given(st.binary(max_size=300), cut_points)
def test_fuzz_arbitrary_bytes_mean_what_the_reference_reads(data: bytes, cuts: list[int]) -> None:
    frames = AngelEyeDecoder().feed(data, 0.0)
    assert sum(len(f.raw) for f in frames) <= len(data)
    assert_same_meanings(data, cut_at(data, cuts))


@settings(max_examples=300)
@given(angel_eye_stream, cut_points, _configs)
def test_fuzz_noisy_streams_mean_what_the_reference_reads(
    data: bytes, cuts: list[int], config: AngelEyeSettings | None
) -> None:
    assert_same_meanings(data, cut_at(data, cuts), config)
    assert_same_meanings(data, [data], config)


@settings(max_examples=60)
@given(angel_eye_stream, cut_points)
def test_fuzz_noisy_streams_cut_anywhere_give_the_same_frames(data: bytes, cuts: list[int]) -> None:
    frames = assert_same_when_cut(AngelEyeDecoder, data, cuts)
    assert sum(len(bytes.fromhex(f["raw"])) for f in frames if "raw" in f) <= len(data)


def test_the_reference_is_not_vacuous_on_a_simulated_shoe() -> None:
    """The fuzz compares something: a shoe's cards, targets and verdicts all come out."""
    data = b"".join(step.data for step in shoe_steps() if step.data is not None)
    meanings = [meaning for _, repeat, meaning in reference_meanings(data) if not repeat]
    assert sum(m[0] == "D" for m in meanings) > 30
    assert {m[0] for m in meanings} >= {"S", "D", "G"}
    assert decoded_meanings([data]) == reference_meanings(data)


def shoe_steps() -> list[FixtureStep]:
    faults = (FaultSpec(Fault.REPEATS, hand=2), FaultSpec(Fault.MISREAD, hand=3))
    return encode_plan(plan_shoe(DealSettings(decks=1, seed=3), faults), "angel_eye", seed=3)


@given(st.lists(st.tuples(frame_parts, st.integers(0, 3), st.binary(max_size=3)), max_size=12))
def test_fuzz_no_card_from_a_corrupted_frame(items) -> None:
    """Frames with a flipped byte anywhere give no card unless the flip left a valid frame."""
    stream = bytearray()
    for (seq, code, payload), corruption, noise in items:
        frame = bytearray(encode_frame(seq, code, payload))
        if corruption:
            position = 1 + (corruption * 7919 + len(payload)) % (len(frame) - 1)
            frame[position] ^= 1 << (corruption % 7)
        stream += noise.replace(bytes([ENQ]), b"") + frame
    decoder = AngelEyeDecoder()
    for decoded in decoder.feed(bytes(stream), 0.0):
        if isinstance(decoded.input, CardRead):
            raw = decoded.raw
            assert raw[0] == ENQ
            assert raw[-3] == ETX
            assert bcc(raw[1:-2]) == raw[-2:].upper()
            assert raw[2:3] == b"D"
            assert len(raw) == 8
            assert decode_card(raw[4]) == decoded.input.card


# -- cards lost on the wire: a refused card frame or a skipped mark asks the engine for a rescan --


def _corrupt(frame: bytes) -> bytes:
    return frame[:-1] + (b"0" if frame[-1:] != b"0" else b"1")


def test_a_card_frame_with_a_bad_bcc_asks_for_a_rescan_once_per_frame() -> None:
    good = encode_frame(ord("4"), "D", bytes([0x91, 0xB8]))
    frames = decode(_corrupt(good) * 3)
    assert [f.status for f in frames] == ["rejected"] * 3
    rescans = [f.rescan for f in frames if f.rescan is not None]
    assert len(rescans) == 1  # every copy is corrupted: one lost card, one rescan
    assert isinstance(rescans[0], ReadFailed)
    assert rescans[0].reason.startswith("card frame refused: bad BCC")
    assert rescans[0].raw == _corrupt(good).hex(" ")
    assert frames[0].to_dict()["rescan"]["type"] == "ReadFailed"


def test_a_bad_copy_then_good_copies_reports_the_rescan_then_the_card() -> None:
    good = encode_frame(ord("4"), "D", bytes([0x91, 0xB8]))
    frames = decode(_corrupt(good) + good * 2)
    assert [(f.status, f.rescan is not None) for f in frames] == [
        ("rejected", True),
        ("input", False),
        ("duplicate", False),
    ]


def test_a_bad_copy_after_a_good_copy_is_only_counted() -> None:
    good = encode_frame(ord("4"), "D", bytes([0x91, 0xB8]))
    frames = decode(good + _corrupt(good) + good)
    assert [(f.status, f.rescan is not None) for f in frames] == [
        ("input", False),
        ("rejected", False),
        ("duplicate", False),
    ]


def test_invalid_card_and_target_bytes_in_a_d_frame_ask_for_a_rescan_but_other_frames_do_not() -> None:
    bad_card = encode_frame(ord("5"), "D", bytes([0x81, 0x8E]))  # suit 0
    bad_target = encode_frame(ord("6"), "D", bytes([0xB1, 0xB8]))  # target 3
    bad_verdict = encode_frame(ord("7"), "G", b"\xd0")
    bad_outside = encode_frame(ord("8"), "d", bytes([0x80, 0x8E]))
    frames = decode(bad_card + bad_target + bad_verdict + bad_outside)
    assert [(f.status, f.rescan is not None) for f in frames] == [
        ("rejected", True),
        ("rejected", True),
        ("rejected", False),
        ("rejected", False),
    ]


def test_a_skipped_sequence_mark_asks_for_a_rescan_repeats_are_no_gap() -> None:
    def card(seq: str) -> bytes:
        return encode_frame(ord(seq), "D", bytes([0x81, 0xB8]))

    frames = decode(card("1") * 3 + card("2") * 3 + card("4") * 3)
    gaps = [f for f in frames if f.rescan is not None]
    assert len(gaps) == 1
    assert gaps[0].raw == b""
    assert gaps[0].rejected == "sequence mark(s) '3' skipped: frame(s) lost on the line"
    assert frames.index(gaps[0]) == 6  # reported before the card that revealed it
    assert [f.status for f in frames].count("input") == 3


def test_sequence_wrap_start_frames_and_long_jumps_are_no_gap() -> None:
    def frame(seq: str, code: str = "D") -> bytes:
        return encode_frame(ord(seq), code, bytes([0x81, 0xB8]) if code == "D" else b"")

    wrap = frame("Y") + frame("Z") + frame("1")
    assert not [f for f in decode(wrap) if f.rescan is not None]
    restart = frame("7") + frame("3", "S") + frame("4")
    assert not [f for f in decode(restart) if f.rescan is not None]
    jump = frame("1") + frame("K")  # far beyond max_sequence_gap: taken as the shoe renumbering
    assert not [f for f in decode(jump) if f.rescan is not None]
    wrapped_gap = frame("Z") + frame("2")  # '1' lost across the wrap
    assert [f.rejected for f in decode(wrapped_gap) if f.rescan is not None] == [
        "sequence mark(s) '1' skipped: frame(s) lost on the line"
    ]
    off = AngelEyeSettings(sequence_marks="")
    assert not [f for f in decode(frame("1") + frame("3"), off) if f.rescan is not None]


def test_a_lost_card_frame_is_not_reported_again_as_a_gap() -> None:
    lost = encode_frame(ord("2"), "D", bytes([0x91, 0xB8]))
    data = encode_frame(ord("1"), "D", bytes([0x81, 0xB8])) + _corrupt(lost) * 3
    data += encode_frame(ord("3"), "D", bytes([0x82, 0xB1]))
    frames = decode(data)
    assert len([f for f in frames if f.rescan is not None]) == 1


def test_sequence_marks_setting_is_validated() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="distinct printable"):
        AngelEyeSettings(sequence_marks="1123")
