"""USB HID keyboard-wedge decoder: Shift, key-down transitions, release, Enter, mapping."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, ReadFailed
from drivers.protocols.frames import DecodedFrame
from drivers.protocols.hid_wedge import RAW_KEEP, HidWedgeDecoder, HidWedgeSettings, type_text
from tests.drivers.splitting import assert_same_when_cut, assert_split_invariant, cut_points


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


# -- an independent oracle: the typed text rebuilt from the reports -----------------------------
# Written from the HID usage tables and PROTOCOLS.md §3, not from the decoder's tables: it only
# needs to know which keys can be part of a card code (letters, digits, keypad digits); every
# other key makes the code name no card, whatever character it types.

_LETTERS = {0x04 + i: chr(ord("A") + i) for i in range(26)}  # case never matters for a card code
_DIGITS = {0x1E + i: "1234567890"[i] for i in range(10)}  # top row: Shift types a symbol instead
_KEYPAD = {0x59 + i: "1234567890"[i] for i in range(10)}  # keypad digits type digits with Shift too
_ENTER = {0x28, 0x58}
_ROLLOVER = 0x01
_NOT_IN_A_CODE = "\x00"  # stands for any other character: no card code contains it
_RANKS = {**{rank: rank for rank in "A23456789TJQK"}, "10": "T"}


def oracle_card(text: str) -> Card | None:
    """The card a complete code names in the default grammar (rank then suit, any case)."""
    rank, suit = _RANKS.get(text[:-1]), text[-1:]
    if rank is None or suit not in ("C", "D", "H", "S"):
        return None
    return Card.parse(rank + suit.lower())


Read = Card | str
"""What one Enter ends: the card the code names, ``UNREADABLE`` (a rescan) or ``EMPTY``."""
UNREADABLE = "unreadable"
EMPTY = "empty"


def oracle_codes(reports: list[bytes]) -> list[list[Read]]:
    """For each report: one entry per code an Enter ends in it.

    A key is typed when it is in a report and was not in the previous one (a held key types
    once; the all-zero report releases). An ErrorRollOver report spoils the code being typed
    and says nothing about which keys are down. A report lists the keys down, not the order
    they went down in: two or more keys new in one report spoil the code; if one of them is
    Enter it ends that code, and the others, which may have come after it, spoil the next.
    """
    held: list[int] = []
    text: list[str] = []
    spoiled = False
    out: list[list[Read]] = []
    for rep in reports:
        keys = [k for k in rep[2:8] if k]
        finished: list[Read] = []
        out.append(finished)
        if _ROLLOVER in keys:
            spoiled = True
            continue
        new = [k for k in keys if k not in held]
        held = keys
        if len(new) > 1:
            if any(k in _ENTER for k in new):
                finished.append(UNREADABLE)
                text = []
                spoiled = any(k not in _ENTER for k in new)
            else:
                spoiled = True
            continue
        for key in new:
            if key in _ENTER:
                finished.append(code_read(text, spoiled))
                text, spoiled = [], False
            elif key in _LETTERS or key in _KEYPAD or (key in _DIGITS and not rep[0] & 0x22):
                text.append({**_LETTERS, **_DIGITS, **_KEYPAD}[key])
            else:
                text.append(_NOT_IN_A_CODE)
    return out


def code_read(text: list[str], spoiled: bool) -> Read:
    if spoiled:
        return UNREADABLE
    if not text:
        return EMPTY
    card = oracle_card("".join(text))
    return UNREADABLE if card is None else card


def read_of(frame: DecodedFrame) -> Read:
    if isinstance(frame.input, CardRead):
        return frame.input.card
    if isinstance(frame.input, ReadFailed):
        return UNREADABLE
    assert frame.rejected == "Enter with no code typed", frame
    return EMPTY


def decoded_per_report(reports: list[bytes]) -> list[list[Read]]:
    """The decoder fed report by report: per report, what each code it completed reads as."""
    decoder = HidWedgeDecoder()
    out: list[list[Read]] = []
    for rep in reports:
        frames = decoder.feed(rep, 0.0)
        out.append([read_of(f) for f in frames])
        for frame in frames:
            if isinstance(frame.input, CardRead):
                # the reports the card came from are kept for audit (up to RAW_KEEP bytes)
                assert frame.raw.endswith(rep) or len(frame.raw) == RAW_KEEP
    return out


def _as_reports(data: bytes) -> list[bytes]:
    return [data[i : i + 8] for i in range(0, len(data) - len(data) % 8, 8)]


_CODE_KEYS = [*_LETTERS, *_DIGITS, *_KEYPAD, *_ENTER, _ROLLOVER, 0x2C, 0x2D, 0x38, 0x3A, 0x2F, 0xE0]
_CARD_KEYS = [0x04, 0x1E, 0x27, 0x59, 0x62, 0x17, 0x0E, 0x14, 0x06, 0x07, 0x0B, 0x16, 0x1F, 0x25, 0x28, 0x58]
_one_report = st.builds(
    lambda mods, keys: bytes([mods, 0, *keys, *([0] * (6 - len(keys)))]),
    st.sampled_from([0, 0, 0x02, 0x20, 0x22, 0x01, 0x40]),
    st.lists(st.sampled_from(_CARD_KEYS) | st.sampled_from(_CODE_KEYS), max_size=6),
)
_typed_code = st.builds(
    lambda text, release: type_text(text, release_between=release),
    st.sampled_from([c.code.upper() for c in ALL_CARDS] + ["10H", "qs", "2c", "8S8", "1H", "?8", "!0S"])
    | st.text(alphabet="A23456789TJQK10CDHSacdhs?x!", min_size=1, max_size=4),
    st.booleans(),
)
_held = st.builds(lambda rep, times: [rep] * times, _one_report, st.integers(2, 3))
_interrupted_code = st.builds(
    lambda typed, extra, at: typed[: at % len(typed)] + extra + typed[at % len(typed) :],
    _typed_code,
    st.lists(_one_report | st.just(RELEASE), min_size=1, max_size=2) | _held,
    st.integers(0, 20),
)
wedge_reports = st.lists(
    _typed_code | _interrupted_code | _held | st.lists(_one_report | st.just(RELEASE), max_size=4),
    max_size=16,
).map(lambda parts: [rep for part in parts for rep in part])
"""Codes typed as a wedge types them (some cards, some not) mixed with random key reports."""


@given(st.binary(max_size=400))
def test_fuzz_arbitrary_reports_give_a_card_exactly_for_each_complete_clean_typed_code(data: bytes) -> None:
    reports = _as_reports(data)
    assert decoded_per_report(reports) == oracle_codes(reports)
    decoder = HidWedgeDecoder()
    decoder.feed(data, 0.0)
    assert not [f for f in decoder.reset() if f.input is not None]  # a partial code is never a card


@given(wedge_reports)
def test_fuzz_keyboard_like_reports_give_a_card_exactly_for_each_complete_clean_typed_code(
    reports: list[bytes],
) -> None:
    assert decoded_per_report(reports) == oracle_codes(reports)


@settings(max_examples=60)
@given(wedge_reports, st.binary(max_size=11), cut_points)
def test_fuzz_report_streams_cut_anywhere_give_the_same_frames(
    reports: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    data = b"".join(reports) + tail  # a tail that is not a whole report stays pending until reset
    frames = assert_same_when_cut(HidWedgeDecoder, data, cuts)
    assert [f["input"]["card"] for f in frames if f.get("input", {}).get("type") == "CardRead"] == [
        read.code
        for per_report in oracle_codes(_as_reports(data))
        for read in per_report
        if isinstance(read, Card)
    ]


def test_several_keys_new_in_one_report_make_the_code_unreadable_never_typed_in_array_order() -> None:
    """A boot report lists keys held, not the order they went down: "8" and "S" new together
    could be "8S" or "S8"; the code is unreadable (a rescan), whatever order the array has."""
    eight, s_key, enter = 0x25, 0x16, 0x28
    for together in (report(eight, s_key), report(s_key, eight)):
        frames = HidWedgeDecoder().feed(together + RELEASE + report(enter) + RELEASE, 1.0)
        assert len(frames) == 1
        assert isinstance(frames[0].input, ReadFailed)
        assert "pressed in one report: their order is unknown" in frames[0].input.reason
    # Enter with a letter: the code ends unreadable; the letter may start the next code, so
    # that one is unreadable too; the code after it reads again.
    decoder = HidWedgeDecoder()
    frames = decoder.feed(b"".join(type_text("8")[:2]) + report(s_key, enter) + RELEASE, 1.0)
    frames += decoder.feed(b"".join(type_text("S")) + b"".join(type_text("9D")), 2.0)
    assert [type(f.input) for f in frames] == [ReadFailed, ReadFailed, CardRead]
    assert frames[1].raw.startswith(report(s_key, enter))  # the spoiling report is kept for audit
    assert frames[2].input is not None
    assert frames[2].input.card == Card.parse("9d")  # type: ignore[union-attr]


def test_a_key_held_while_the_next_goes_down_is_one_new_key_per_report() -> None:
    """Rollover as fast scanners type: the held key is not new, so the order is known."""
    eight, s_key, enter = 0x25, 0x16, 0x28
    data = report(eight) + report(eight, s_key) + report(s_key) + report(s_key, enter) + RELEASE
    frames = HidWedgeDecoder().feed(data, 1.0)
    assert [f.input.card for f in frames if isinstance(f.input, CardRead)] == [Card.parse("8s")]
