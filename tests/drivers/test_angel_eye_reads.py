"""The Angel Eye decoder as the serial driver uses it: a shoe's transmissions read one by one,
in runs or all at once give the same frames; in driver mode (``drop_duplicates()``) repeats
are counted, not returned; inputs carry the decoder's current device name."""

from __future__ import annotations

from common.inputs import CardRead
from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, plan_shoe
from drivers.protocols.angel_eye import AngelEyeDecoder
from drivers.protocols.angel_eye_codec import encode_frame
from drivers.protocols.frames import DecodedFrame
from drivers.simulate import encode_plan
from tests.drivers.angel_eye_reference import reference_read

ANGEL_EYE_FAULTS = (
    Fault.REPEATS,
    Fault.BAD_CHECKSUM,
    Fault.GARBAGE,
    Fault.CORRUPT_CARD_FRAME,
    Fault.OUTSIDE_GAME_CARD,
    Fault.MISREAD,
)


def shoe_transmissions() -> list[bytes]:
    """A 1-deck shoe with every Angel Eye fault, one transmission per entry."""
    faults = tuple(FaultSpec(fault, hand=hand) for hand, fault in enumerate(ANGEL_EYE_FAULTS, start=2))
    steps = encode_plan(plan_shoe(DealSettings(decks=1, seed=3), faults), "angel_eye", seed=3)
    return [step.data for step in steps if step.data is not None]


def decode(reads: list[bytes], *, counting: bool = False) -> tuple[list[DecodedFrame], int]:
    decoder = AngelEyeDecoder()
    if counting:
        decoder.drop_duplicates()
    frames = [frame for data in reads for frame in decoder.feed(data, 1.0)] + decoder.reset("end")
    return frames, decoder.take_dropped_duplicates()


def test_a_shoe_read_by_read_in_runs_and_in_one_read_gives_the_same_frames() -> None:
    reads = shoe_transmissions()
    by_read, _ = decode(reads)
    runs = [b"".join(reads[i : i + 7]) for i in range(0, len(reads), 7)]
    assert decode(runs)[0] == by_read
    assert decode([b"".join(reads)])[0] == by_read
    taken = [f for f in by_read if isinstance(f.input, CardRead) and not f.duplicate]
    reference = [f for f in reference_read(b"".join(reads)) if f.meaning[0] == "D" and not f.repeat]
    assert [f.raw for f in taken] == [f.raw for f in reference]
    assert len(taken) > 30
    assert any(f.rescan is not None for f in by_read)  # the corrupted card frame asks for a rescan


def test_a_driver_set_decoder_drops_a_shoes_repeats_and_counts_them() -> None:
    reads = shoe_transmissions()
    emitted, _ = decode(reads)
    kept, dropped = decode(reads, counting=True)
    assert kept == [f for f in emitted if not f.duplicate]
    assert dropped == sum(f.duplicate for f in emitted) > 60


def test_renaming_the_device_names_the_inputs_decoded_after() -> None:
    frame = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
    decoder = AngelEyeDecoder(device="shoe-a")
    first = decoder.feed(frame, 1.0)[0]
    decoder.device = "shoe-b"
    again = decoder.feed(frame, 2.0)[0]
    assert again.duplicate
    assert first.input is not None
    assert again.input is not None
    assert (first.input.device, again.input.device) == ("shoe-a", "shoe-b")
    assert again.input.at == 2.0


def test_bytearray_and_memoryview_reads_are_read_like_bytes() -> None:
    data = encode_frame(ord("1"), "D", bytes([0x81, 0xB8])) * 2 + b"\x06junk"
    want = AngelEyeDecoder().feed(data, 1.0)
    assert [f.status for f in want] == ["input", "duplicate", "reply"]
    assert AngelEyeDecoder().feed(bytearray(data), 1.0) == want  # type: ignore[arg-type]
    assert AngelEyeDecoder().feed(memoryview(data), 1.0) == want  # type: ignore[arg-type]
