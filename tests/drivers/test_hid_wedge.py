"""USB HID keyboard-wedge decoder: Shift, key-down transitions, release, Enter, mapping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.cards import ALL_CARDS, Card
from daemon.engine.inputs import CardRead, ReadFailed
from drivers.protocols.hid_wedge import HidWedgeDecoder, HidWedgeSettings, type_text
from tests.drivers.splitting import assert_split_invariant


def report(*keys: int, mods: int = 0) -> bytes:
    return bytes([mods, 0, *keys, *([0] * (6 - len(keys)))])


RELEASE = report()


def test_every_card_typed_with_shift_and_rollover() -> None:
    data = b"".join(
        b"".join(type_text(c.code.upper(), release_between=i % 2 == 0)) for i, c in enumerate(ALL_CARDS)
    )
    frames = assert_split_invariant(HidWedgeDecoder, data)
    assert [f["input"]["card"] for f in frames] == [c.code for c in ALL_CARDS]


def test_repeated_character_needs_the_release_report() -> None:
    # the code "22" (a code table entry) only arrives whole when the release separates the keys
    settings = HidWedgeSettings.model_validate(
        {"grammar": {"pattern": "(?P<rank>.)(?P<suit>.)", "rank_map": {"2": "2"}, "suit_map": {"x": "s"},
                     "codes": {"22": "2c"}}}
    )  # fmt: skip
    two, enter = 0x1F, 0x28
    with_release = report(two) + RELEASE + report(two) + RELEASE + report(enter) + RELEASE
    held = report(two) + report(two) + RELEASE + report(enter) + RELEASE
    frames = HidWedgeDecoder(settings).feed(with_release, 1.0)
    assert isinstance(frames[0].input, CardRead)
    assert frames[0].input.card == Card.parse("2c")
    frames = HidWedgeDecoder(settings).feed(held, 1.0)
    assert isinstance(frames[0].input, ReadFailed)  # "2" alone names no card: never guessed


def test_right_shift_and_lower_case_codes() -> None:
    q, h, enter = 0x14, 0x0B, 0x28
    data = report(q, mods=0x20) + report(h, mods=0x20) + RELEASE + report(enter) + RELEASE
    frames = HidWedgeDecoder().feed(data, 1.0)
    assert isinstance(frames[0].input, CardRead)
    assert frames[0].input.card == Card.parse("Qh")
    frames = HidWedgeDecoder().feed(b"".join(type_text("qh")), 1.0)
    assert isinstance(frames[0].input, CardRead)


def test_unmapped_code_unknown_key_rollover_and_empty_enter() -> None:
    decoder = HidWedgeDecoder()
    frames = decoder.feed(b"".join(type_text("ZZ")), 1.0)
    assert isinstance(frames[0].input, ReadFailed)
    frames = decoder.feed(report(0x3A) + RELEASE + b"".join(type_text("8S")), 1.0)  # F1 then a card
    assert isinstance(frames[0].input, ReadFailed)
    assert "0x3A" in frames[0].input.reason
    frames = decoder.feed(report(1, 1, 1, 1, 1, 1) + RELEASE + b"".join(type_text("8S")), 1.0)
    assert isinstance(frames[0].input, ReadFailed)
    assert "rollover" in frames[0].input.reason
    frames = decoder.feed(report(0x28) + RELEASE + b"".join(type_text("8S")), 1.0)
    assert [f.status for f in frames] == ["rejected", "input"]


def test_short_report_from_the_endpoint_is_rejected() -> None:
    frames = HidWedgeDecoder().feed_report(b"\x00\x00\x1f", 1.0)
    assert frames[0].rejected == "report of 3 bytes, expected 8"


def test_reset_discards_half_typed_code() -> None:
    decoder = HidWedgeDecoder()
    reports = type_text("8S")
    assert decoder.feed(b"".join(reports[:2]), 1.0) == []
    assert [f.status for f in decoder.reset()] == ["rejected"]
    frames = decoder.feed(b"".join(reports[2:]) + b"".join(type_text("9D")), 1.0)
    assert [f.status for f in frames] == ["input", "input"]
    assert isinstance(frames[0].input, ReadFailed)  # "S" alone: never glued to the old "8"
    assert isinstance(frames[1].input, CardRead)
    assert frames[1].input.card == Card.parse("9d")


@given(st.binary(max_size=400))
def test_fuzz_arbitrary_reports_never_raise_and_cards_map_from_typed_text(data: bytes) -> None:
    decoder = HidWedgeDecoder()
    for frame in decoder.feed(data, 0.0) + decoder.reset():
        if isinstance(frame.input, CardRead):
            assert frame.input.card in ALL_CARDS
            assert frame.raw  # the reports the card came from are kept for audit
