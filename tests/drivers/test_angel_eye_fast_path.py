"""The Angel Eye fast path (whole frames sliced out, parses cached per frame bytes) gives
exactly the frames of the per-byte decoder it replaced (``angel_eye_reference``), for any
bytes cut anywhere, any settings, read times that differ per read, and a parse cache that
overflows."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.inputs import CardRead
from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, plan_shoe
from drivers.protocols import angel_eye
from drivers.protocols.angel_eye import ACK, ENQ, ETX, NAK, AngelEyeDecoder, AngelEyeSettings, encode_frame
from drivers.protocols.frames import DecodedFrame
from drivers.simulate import encode_plan
from tests.drivers.angel_eye_reference import ReferenceAngelEyeDecoder


def both(
    chunks: list[tuple[float, bytes]], config: AngelEyeSettings | None = None
) -> tuple[list[DecodedFrame], list[DecodedFrame]]:
    """(fast, reference) frames for the same reads, then a reset."""
    fast, reference = AngelEyeDecoder(config), ReferenceAngelEyeDecoder(config)
    got: list[DecodedFrame] = []
    want: list[DecodedFrame] = []
    for at, data in chunks:
        got += fast.feed(data, at)
        want += reference.feed(data, at)
    return got + fast.reset("end"), want + reference.reset("end")


def dropping(
    chunks: list[tuple[float, bytes]], config: AngelEyeSettings | None = None
) -> tuple[list[DecodedFrame], int]:
    """The frames and the repeat count of a decoder set as the reader driver sets it."""
    decoder = AngelEyeDecoder(config)
    decoder.drop_duplicates()
    got: list[DecodedFrame] = []
    for at, data in chunks:
        got += decoder.feed(data, at)
    got += decoder.reset("end")
    return got, decoder.take_dropped_duplicates()


def assert_same(chunks: list[tuple[float, bytes]], config: AngelEyeSettings | None = None) -> None:
    """Same frames as the reference; and with ``drop_duplicates`` the same minus the repeats,
    which are counted instead."""
    got, want = both(chunks, config)
    assert len(got) == len(want)
    for index, (have, expected) in enumerate(zip(got, want, strict=True)):
        assert have == expected, f"frame {index}: {have.to_dict()} != {expected.to_dict()}"
    kept, dropped = dropping(chunks, config)
    assert kept == [frame for frame in want if not frame.duplicate]
    assert dropped == sum(frame.duplicate for frame in want)


def shoe_transmissions(faults: tuple[FaultSpec, ...] = ()) -> list[tuple[float, bytes]]:
    steps = encode_plan(plan_shoe(DealSettings(decks=1, seed=3), faults), "angel_eye", seed=3)
    return [(step.t, step.data) for step in steps if step.data is not None]


def test_a_whole_shoe_read_by_read_is_what_the_reference_gives() -> None:
    reads = shoe_transmissions()
    got, _ = both(reads)
    assert sum(isinstance(f.input, CardRead) and not f.duplicate for f in got) > 30
    assert sum(f.duplicate for f in got) > 60  # the repeats went through the cache
    assert_same(reads)


def test_a_shoe_with_every_angel_eye_fault_in_one_read_and_in_runs_of_reads() -> None:
    kinds = [Fault.REPEATS, Fault.BAD_CHECKSUM, Fault.GARBAGE, Fault.CORRUPT_CARD_FRAME]
    kinds.append(Fault.OUTSIDE_GAME_CARD)
    faults = tuple(FaultSpec(fault, hand=hand) for hand, fault in enumerate(kinds, start=2))
    reads = shoe_transmissions(faults)
    assert_same(reads)
    assert_same([(1.0, b"".join(data for _, data in reads))])
    runs = [(reads[i][0], b"".join(d for _, d in reads[i : i + 7])) for i in range(0, len(reads), 7)]
    assert_same(runs)


def test_a_parse_cache_that_overflows_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(angel_eye, "PARSED_FRAME_CACHE", 3)
    # Verdict frames: a card frame read alone takes the single-card-frame path, no cache.
    results = [0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x40, 0x43]
    frames = [encode_frame(ord(mark), "G", bytes([r])) for mark, r in zip("12345678", results, strict=True)]
    reads = [(float(n), frame) for n, frame in enumerate(frames * 3 + frames[::-1] * 2)]
    assert_same(reads)
    decoder = AngelEyeDecoder()
    for at, data in reads:
        decoder.feed(data, at)
    assert len(decoder._parsed) == 3


def test_renaming_the_device_renames_inputs_of_frames_already_parsed() -> None:
    frame = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
    decoder = AngelEyeDecoder(device="shoe-a")
    first = decoder.feed(frame, 1.0)[0]
    decoder.device = "shoe-b"
    again = decoder.feed(frame, 2.0)[0]
    assert (first.input.device, again.input.device) == ("shoe-a", "shoe-b")  # type: ignore[union-attr]
    assert again.duplicate
    assert again.input.at == 2.0  # type: ignore[union-attr]


def test_a_driver_set_decoder_drops_a_shoes_repeats_and_counts_them() -> None:
    reads = shoe_transmissions()
    _, want = both(reads)
    kept, dropped = dropping(reads)
    assert dropped == sum(f.duplicate for f in want) > 60
    assert kept == [f for f in want if not f.duplicate]
    assert not any(f.duplicate for f in kept)


def test_a_repeat_after_a_renamed_device_is_still_dropped_and_a_new_frame_renamed() -> None:
    frame = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
    decoder = AngelEyeDecoder(device="shoe-a")
    decoder.drop_duplicates()
    assert decoder.feed(frame, 1.0)[0].input.device == "shoe-a"  # type: ignore[union-attr]
    decoder.device = "shoe-b"
    assert decoder.feed(frame, 2.0) == []
    assert decoder.take_dropped_duplicates() == 1
    assert decoder.take_dropped_duplicates() == 0
    new = decoder.feed(encode_frame(ord("2"), "D", bytes([0x91, 0xB8])), 3.0)[0]
    assert new.input.device == "shoe-b"  # type: ignore[union-attr]


def test_bytearray_and_memoryview_reads_are_read_like_bytes() -> None:
    data = encode_frame(ord("1"), "D", bytes([0x81, 0xB8])) * 2 + b"\x06junk"
    want = AngelEyeDecoder().feed(data, 1.0)
    assert AngelEyeDecoder().feed(bytearray(data), 1.0) == want  # type: ignore[arg-type]
    assert AngelEyeDecoder().feed(memoryview(data), 1.0) == want  # type: ignore[arg-type]


payloads = st.one_of(
    st.just(b""),
    st.tuples(st.sampled_from([0x81, 0x92, 0xA1, 0xB1]), st.sampled_from([0xB8, 0x9D, 0x8E])).map(bytes),
    st.binary(max_size=7),
)
frame_specs = st.tuples(st.sampled_from(b"12345AZ\x7f"), st.sampled_from(list("SDDDdRGEeLMPCX")), payloads)
"""A frame's SEQ (the last one is not a printable mark), event code and data."""
sends = st.tuples(
    st.integers(0, 6),  # which frame of the pool: streams come back to frames already sent
    st.integers(1, 3),  # transmissions
    st.sampled_from(["clean", "clean", "clean", "lower_bcc", "bad_bcc", "flip", "truncate"]),
    st.sampled_from([b"", b"", b"", b"\x06", b"\x1502", b"\x15", b"\x05", b"zz"]),  # before the frame
)


def _wire(spec: tuple[int, str, bytes], copies: int, damage: str, noise: bytes) -> bytes:
    seq, code, payload = spec
    frame = bytearray(encode_frame(seq, code, payload))
    if damage == "lower_bcc":
        frame[-2:] = frame[-2:].lower()
    elif damage == "bad_bcc":
        frame[-1] = ord("0") if frame[-1] != ord("0") else ord("1")
    elif damage == "flip":
        frame[2 + len(payload) % (len(frame) - 2)] ^= 0x10
    elif damage == "truncate":
        frame = frame[: 1 + len(payload) % (len(frame) - 1)]
    return noise + bytes(frame) * copies


@settings(max_examples=200, deadline=None)
@given(
    pool=st.lists(frame_specs, min_size=1, max_size=6),
    items=st.lists(sends, max_size=16),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    tail=st.sampled_from([b"", bytes([ENQ]), bytes([NAK]), bytes([ACK]), b"\x05\x31\x44\x81"]),
    config=st.sampled_from(
        [
            None,
            AngelEyeSettings(dedup_window=1),
            AngelEyeSettings(max_frame_length=8),
            AngelEyeSettings(sequence_marks="", redeal_payload_lengths=(0,)),
            AngelEyeSettings(sequence_marks="135AZ", max_sequence_gap=1),
        ]
    ),
)
def test_fuzz_any_stream_any_cuts_any_settings_same_frames_as_the_reference(
    pool: list[tuple[int, str, bytes]],
    items: list[tuple[int, int, str, bytes]],
    cuts: list[int],
    tail: bytes,
    config: AngelEyeSettings | None,
) -> None:
    pool = [(ord("1"), "S", b""), *pool]  # a start frame clears the repeat memory: often in play
    wire = [_wire(pool[which % len(pool)], copies, damage, noise) for which, copies, damage, noise in items]
    stream = b"".join(wire) + tail
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [(float(n), stream[a:b]) for n, (a, b) in enumerate(pairwise(bounds))]
    assert_same(chunks, config)
    # Read by read as a shoe sends (each transmission alone): the whole-frame read path.
    reads = [part for part in re.split(rb"(?=\x05)", stream) if part]
    assert_same([(float(n), part) for n, part in enumerate(reads)], config)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200), st.integers(1, 9))
def test_fuzz_arbitrary_bytes_in_even_chunks_same_frames_as_the_reference(data: bytes, size: int) -> None:
    assert_same([(float(i), data[i : i + size]) for i in range(0, len(data), size)])


card_frame_bytes = st.one_of(
    st.sampled_from([0x81, 0x82, 0x83, 0x91, 0x92, 0x93, 0x01, 0x13, 0xA1, 0xC2, 0xD3]),  # targets
    st.sampled_from([0xB8, 0x9D, 0x8E, 0xC1, 0x4C, 0x2A, 0x80, 0x8F]),  # cards, two of them bad
    st.sampled_from([ETX, ENQ, ACK, NAK, 0x00, 0xFF]),  # bytes that end or cut the frame (0x03 is P3)
    st.integers(0, 255),
)
card_frames = st.tuples(
    st.sampled_from(b"1234569AZ\x20\x7f\x03\x05"),  # SEQ: printable marks, then ones refused or cutting
    card_frame_bytes,
    card_frame_bytes,
    st.sampled_from(
        ["clean", "clean", "clean", "lower_bcc", "bad_bcc", "not_hex", "code_d", "no_etx", "no_enq"]
    ),
)
"""One 8-byte ``D`` frame as a shoe sends it in one read, well-formed or not."""


def _card_wire(seq: int, target: int, card: int, damage: str) -> bytes:
    frame = bytearray(encode_frame(seq, "D", bytes([target, card])))
    if damage == "lower_bcc":
        frame[-2:] = frame[-2:].lower()
    elif damage == "bad_bcc":
        frame[-1] = ord("0") if frame[-1] != ord("0") else ord("1")
    elif damage == "not_hex":
        frame[-2] = ord("G")
    elif damage in ("no_etx", "no_enq"):  # the BCC still matches the bytes as sent
        frame[5 if damage == "no_etx" else 0] = 0x7E
    elif damage == "code_d":  # another event code in the same place: never the card fast path
        frame[2] = ord("d")
        frame[-2:] = angel_eye.bcc(bytes(frame[1:-2]))
    return bytes(frame)


@settings(max_examples=300, deadline=None)
@given(
    pool=st.lists(card_frames, min_size=1, max_size=8),
    order=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3)), max_size=24),
    noise=st.lists(
        st.sampled_from([b"", b"", b"", b"zz", b"\x05\x31", b"\x06", b"\x15", b"\x1502"]), max_size=24
    ),
    config=st.sampled_from(
        [
            None,
            AngelEyeSettings(dedup_window=1),
            AngelEyeSettings(max_frame_length=8),
            AngelEyeSettings(sequence_marks=""),
            AngelEyeSettings(sequence_marks="135AZ", max_sequence_gap=1),
        ]
    ),
)
def test_fuzz_card_frames_one_per_read_same_frames_as_the_reference(
    pool: list[tuple[int, int, int, str]],
    order: list[tuple[int, int]],
    noise: list[bytes],
    config: AngelEyeSettings | None,
) -> None:
    """The single-card-frame read path (and the repeat-of-the-last-frame check) against the
    per-byte oracle: valid, refused and cut card frames, each read alone and repeated,
    revisited out of order, with noise reads between them that leave a partial frame or
    garbage pending, in both decoder modes; then the same stream cut anywhere."""
    wires = [_card_wire(*spec) for spec in pool]
    reads: list[bytes] = []
    for n, (which, copies) in enumerate(order):
        if n < len(noise) and noise[n]:
            reads.append(noise[n])
        reads += [wires[which % len(wires)]] * copies
    assert_same([(float(n), data) for n, data in enumerate(reads)], config)
    stream = b"".join(reads)
    assert_same([(float(n), stream[n : n + 5]) for n in range(0, len(stream), 5)], config)


def test_the_card_frame_read_path_takes_valid_card_frames_and_only_those() -> None:
    """The fuzz above is not vacuous: shoe card frames do take the single-frame path, and
    refused ones give the reference's reasons."""
    good = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
    decoder = AngelEyeDecoder()
    frame = decoder._card_frame(good, 1.0)
    assert frame is not None
    assert isinstance(frame[0].input, CardRead)
    assert frame[0].input.target is not None
    assert frame[0].input.target.value == "P1"
    assert decoder._card_frame(good, 2.0) is not None  # a repeat: in emit mode a duplicate frame
    p3_with_etx = encode_frame(ord("2"), "D", bytes([0x03, 0xB8]))  # 0x03 names P3 but ends the frame
    assert AngelEyeDecoder()._card_frame(p3_with_etx, 1.0) is None
    assert_same([(1.0, p3_with_etx), (2.0, good.lower()), (3.0, good[:-1] + b"0")])
