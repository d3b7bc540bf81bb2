"""Shoe and dealer-button signals of slotless readers (issue #12): settings, decoding, fuzzing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from common.cards import ALL_CARDS, Card
from common.inputs import (
    BettingClosed,
    BettingOpened,
    CardRead,
    CutCardDrawn,
    GameFlowSource,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    RevealSignal,
    ShoeSignal,
    ShoeSignalKind,
)
from drivers.protocols.angel_eye import AngelEyeDecoder, AngelEyeSettings
from drivers.protocols.angel_eye_codec import encode_frame
from drivers.protocols.ascii_lines import AsciiLineDecoder, AsciiLineSettings
from drivers.protocols.hid_wedge import HidWedgeDecoder, HidWedgeSettings, type_text
from drivers.protocols.signals import SignalName, SignalTexts
from tests.drivers.splitting import assert_same_when_cut, cut_at, cut_points

SUIT_LETTER = {"s": "S", "h": "H", "c": "C", "d": "D"}
LINE_SIGNALS = {
    "cut_card": ["CUT"],
    "shoe_started": ["SHOE START", "NEW SHOE"],
    "shoe_ended": ["SHOE END"],
    "burn_started": ["BURN"],
    "burn_ended": ["BURN END"],
    "betting_closed": ["NO MORE BETS"],
    "betting_opened": ["PLACE BETS"],
    "reveal_button": ["SQUEEZE"],
    "reveal_signal": ["TURNED"],
}
EXPECTED: dict[str, tuple[type, object]] = {
    "cut_card": (CutCardDrawn, None),
    "shoe_started": (ShoeSignal, ShoeSignalKind.SHOE_STARTED),
    "shoe_ended": (ShoeSignal, ShoeSignalKind.SHOE_ENDED),
    "burn_started": (ShoeSignal, ShoeSignalKind.BURN_STARTED),
    "burn_ended": (ShoeSignal, ShoeSignalKind.BURN_ENDED),
    "betting_closed": (BettingClosed, GameFlowSource.BUTTON),
    "betting_opened": (BettingOpened, GameFlowSource.BUTTON),
    "reveal_button": (RevealSignal, "button"),
    "reveal_signal": (RevealSignal, "reader_signal"),
}


def line_for(card: Card) -> str:
    return f"{SUIT_LETTER[card.suit.value]}{int(card.rank):02d}"


def line_settings(**extra: Any) -> AsciiLineSettings:
    return AsciiLineSettings.model_validate({"signals": LINE_SIGNALS, **extra})


def assert_is(signal: str, inp: object, device: str = "reader") -> None:
    kind, detail = EXPECTED[signal]
    assert type(inp) is kind, (signal, inp)
    assert getattr(inp, "device") == device  # noqa: B009
    if kind is ShoeSignal:
        assert getattr(inp, "kind") is detail  # noqa: B009
    if kind in (BettingOpened, BettingClosed):
        assert getattr(inp, "source") is detail  # noqa: B009
        assert getattr(inp, "round_id") is None  # noqa: B009  (a button carries no round id)
    if kind is RevealSignal:
        assert getattr(inp, "source") == detail  # noqa: B009


# --- line readers ---------------------------------------------------------------------------


def test_every_configured_line_becomes_its_signal_among_cards() -> None:
    decoder = AsciiLineDecoder(line_settings(), device="shoe")
    data = b"".join(f"{text}\r\nS08\n".encode() for texts in LINE_SIGNALS.values() for text in texts)
    frames = decoder.feed(data, 5.0)
    names = [name for name, texts in LINE_SIGNALS.items() for _ in texts]
    assert len(frames) == 2 * len(names)
    for name, signal_frame, card_frame in zip(names, frames[::2], frames[1::2], strict=True):
        assert_is(name, signal_frame.input, "shoe")
        assert isinstance(card_frame.input, CardRead)
        assert card_frame.input.card.code == "8s"


def test_signal_lines_are_trimmed_and_case_sensitive_unless_set() -> None:
    frames = AsciiLineDecoder(line_settings()).feed(b"  CUT \t\ncut\n", 1.0)
    assert isinstance(frames[0].input, CutCardDrawn)
    assert frames[0].input.raw == "20 20 43 55 54 20 09 0a"
    assert isinstance(frames[1].input, ReadFailed)  # not a signal, not a card: a rescan as before
    folded = AsciiLineSettings.model_validate({"signals": {"cut_card": ["CUT"], "ignore_case": True}})
    assert isinstance(AsciiLineDecoder(folded).feed(b"cut\n", 1.0)[0].input, CutCardDrawn)


def test_no_signals_by_default_so_existing_readers_are_unchanged() -> None:
    frames = AsciiLineDecoder().feed(b"CUT\nNO MORE BETS\n", 1.0)
    assert [type(f.input) for f in frames] == [ReadFailed, ReadFailed]


@pytest.mark.parametrize(
    ("signals", "extra", "message"),
    [
        ({"cut_card": ["S08"]}, {}, "'S08' is the card code of 8s"),
        ({"cut_card": ["s08"], "ignore_case": True}, {}, "'s08' is the card code of 8s"),
        ({"burn_started": ["X"]}, {"grammar": {"pattern": "(?P<rank>.)(?P<suit>.)", "rank_map": {"A": "A"},
          "suit_map": {"x": "s"}, "codes": {"X": "8s"}}}, "card code of 8s"),
        ({"cut_card": ["ERR7"]}, {"error_pattern": r"ERR\d"}, "matches the reader's error_pattern"),
        ({"cut_card": ["CUT"], "burn_started": ["CUT"]}, {}, "given for both cut_card and burn_started"),
        ({"cut_card": ["CUT", "CUT"]}, {}, "given twice"),
        ({"cut_card": ["CUT"], "burn_started": ["cut"], "ignore_case": True}, {}, "for both"),
        ({"cut_card": [" CUT"]}, {}, "no blanks around it"),
        ({"cut_card": [""]}, {}, "non-empty"),
        ({"cut_card": ["CUT\x07"]}, {}, "printable ASCII"),
        ({"cut_card": ["C" * 70]}, {}, "longer than 64"),
        ({"cut_card": ["C" * 20]}, {"max_line_length": 10}, "longer than max_line_length 10"),
        ({"cut": ["CUT"]}, {}, "Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_line_signal_settings_that_could_be_mistaken_are_refused(
    signals: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AsciiLineSettings.model_validate({"signals": signals, **extra})


def test_no_card_of_the_default_grammar_can_be_a_signal() -> None:
    for card in ALL_CARDS:
        with pytest.raises(ValidationError, match="is the card code of"):
            AsciiLineSettings.model_validate({"signals": {"cut_card": [line_for(card)]}})


signal_or_card_lines = st.lists(
    st.one_of(
        st.sampled_from([text for texts in LINE_SIGNALS.values() for text in texts]),
        st.sampled_from(ALL_CARDS).map(line_for),
        st.text(alphabet="SHCDBURNT0123 ", min_size=1, max_size=8),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(signal_or_card_lines, cut_points)
def test_fuzz_each_line_is_its_signal_or_its_card_however_the_bytes_are_cut(
    lines: list[str], cuts: list[int]
) -> None:
    data = b"".join(line.encode() + b"\n" for line in lines)
    assert_same_when_cut(lambda: AsciiLineDecoder(line_settings()), data, cuts)
    frames = AsciiLineDecoder(line_settings()).feed(data, 1.0)
    by_text = {text: name for name, texts in LINE_SIGNALS.items() for text in texts}
    expected = [line.strip() for line in lines if line.strip()]
    assert len(frames) == len(expected)
    for text, frame in zip(expected, frames, strict=True):
        if text in by_text:
            assert_is(by_text[text], frame.input)
        elif isinstance(frame.input, CardRead):
            assert line_for(frame.input.card) == text
        else:
            assert isinstance(frame.input, ReadFailed)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes_give_a_signal_only_for_an_exact_signal_line(data: bytes) -> None:
    frames = AsciiLineDecoder(line_settings()).feed(data, 1.0)
    texts = {text.encode() for texts in LINE_SIGNALS.values() for text in texts}
    lines = [line.removesuffix(b"\r").strip(b" \t\r\x0b\x0c") for line in data.split(b"\n")[:-1]]
    signal_lines = [line for line in lines if line in texts]
    signals = [f for f in frames if not isinstance(f.input, CardRead | ReadFailed | type(None))]
    assert len(signals) == len(signal_lines)


# --- HID keyboard wedges --------------------------------------------------------------------

F1, F2, F3 = 0x3A, 0x3B, 0x3C


def hid_settings(**extra: Any) -> HidWedgeSettings:
    return HidWedgeSettings.model_validate(
        {
            "signals": {"cut_card": ["CUT"], "burn_started": ["BURN"], "shoe_ended": ["END"]},
            "signal_keys": {"betting_closed": F1, "betting_opened": "0x3B", "shoe_started": F3},
            **extra,
        }
    )


def key_report(*usages: int) -> bytes:
    return bytes([0, 0, *usages, *([0] * (6 - len(usages)))])


def test_hid_typed_signal_codes_and_signal_keys() -> None:
    decoder = HidWedgeDecoder(hid_settings(), device="wedge")
    reports = [*type_text("CUT"), key_report(F1), key_report(), *type_text("8S"), *type_text("BURN")]
    reports += [key_report(F2), key_report(F2), key_report(), key_report(F3), key_report()]
    frames = [frame for report in reports for frame in decoder.feed_report(report, 2.0)]
    assert_is("cut_card", frames[0].input, "wedge")
    assert_is("betting_closed", frames[1].input, "wedge")
    assert isinstance(frames[2].input, CardRead)
    assert frames[2].input.card.code == "8s"
    assert_is("burn_started", frames[3].input, "wedge")
    assert_is("betting_opened", frames[4].input, "wedge")  # held over two reports: one press
    assert_is("shoe_started", frames[5].input, "wedge")
    assert len(frames) == 6


def test_a_signal_key_pressed_while_a_code_is_typed_leaves_the_code_intact() -> None:
    decoder = HidWedgeDecoder(hid_settings())
    eight, s_key, enter = 0x25, 0x16, 0x28
    reports = [key_report(eight), key_report(eight, F1), key_report(F1), key_report(F1, s_key)]
    reports += [key_report(), key_report(enter), key_report()]
    frames = [frame for report in reports for frame in decoder.feed_report(report, 2.0)]
    assert_is("betting_closed", frames[0].input)
    assert isinstance(frames[1].input, CardRead)
    assert frames[1].input.card.code == "8s"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"signals": {"cut_card": ["8S"]}}, "'8S' is the card code of 8s"),
        ({"signals": {"cut_card": ["qs"]}}, "'qs' is the card code of Qs"),
        ({"signals": {"cut_card": ["CUT~"]}}, "cannot be typed"),
        ({"signals": {"cut_card": ["C" * 40]}}, "longer than max_code_length 32"),
        ({"signal_keys": {"cut_card": 0x04}}, "key 0x04 types 'a'"),
        ({"signal_keys": {"cut_card": 0x28}}, "key 0x28 ends a code"),
        ({"signal_keys": {"cut_card": 0x01}}, "not a key usage code"),
        ({"signal_keys": {"cut_card": F1, "burn_ended": F1}}, "key 0x3A is given for both"),
        ({"signal_keys": {"cut_card": "zz"}}, "not a hexadecimal key usage code"),
        ({"signal_keys": {"cut": F1}}, "cut"),
    ],
)
def test_hid_signal_settings_that_could_be_mistaken_are_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        HidWedgeSettings.model_validate(extra)


hid_steps = st.lists(
    st.one_of(
        st.sampled_from(["CUT", "BURN", "END"]).map(lambda t: ("code", t)),
        st.sampled_from(ALL_CARDS).map(lambda c: ("code", c.code.upper())),
        st.sampled_from([F1, F2, F3]).map(lambda k: ("key", k)),
    ),
    max_size=20,
)
KEY_SIGNAL = {F1: "betting_closed", F2: "betting_opened", F3: "shoe_started"}
CODE_SIGNAL = {"CUT": "cut_card", "BURN": "burn_started", "END": "shoe_ended"}


@settings(max_examples=150, deadline=None)
@given(hid_steps, cut_points)
def test_fuzz_hid_codes_and_keys_each_give_their_signal_or_card_however_cut(
    steps: list[tuple[str, Any]], cuts: list[int]
) -> None:
    reports: list[bytes] = []
    for kind, value in steps:
        reports += type_text(value) if kind == "code" else [key_report(value), key_report()]
    data = b"".join(reports)
    assert_same_when_cut(lambda: HidWedgeDecoder(hid_settings()), data, cuts)
    decoder = HidWedgeDecoder(hid_settings())
    frames = [frame for chunk in cut_at(data, cuts) for frame in decoder.feed(chunk, 1.0)]
    assert len(frames) == len(steps)
    for (kind, value), frame in zip(steps, frames, strict=True):
        if kind == "key":
            assert_is(KEY_SIGNAL[value], frame.input)
        elif value in CODE_SIGNAL:
            assert_is(CODE_SIGNAL[value], frame.input)
        else:
            assert isinstance(frame.input, CardRead)
            assert frame.input.card.code.upper() == value


# --- Angel Eye lock state as the betting window ---------------------------------------------


def status_frame(seq: str, locked: bool) -> bytes:
    return encode_frame(ord(seq), "L", bytes([0x31 if locked else 0x30]))


def test_angel_eye_lock_state_opens_and_closes_betting_when_configured() -> None:
    data = status_frame("1", True) + status_frame("2", False)
    plain = [f.input for f in AngelEyeDecoder(AngelEyeSettings()).feed(data, 3.0)]
    assert [type(i) for i in plain] == [ReaderSignal, ReaderSignal]
    decoder = AngelEyeDecoder(AngelEyeSettings(lock_is_betting_window=True), device="shoe")
    inputs = [f.input for f in decoder.feed(data, 3.0)]
    assert [type(i) for i in inputs] == [ReaderSignal, BettingOpened, ReaderSignal, BettingClosed]
    assert isinstance(inputs[0], ReaderSignal)
    assert inputs[0].kind is ReaderSignalKind.LOCKED
    assert isinstance(inputs[1], BettingOpened)
    assert inputs[1].source is GameFlowSource.SHOE_LOCK
    assert isinstance(inputs[3], BettingClosed)
    assert inputs[3].device == "shoe"
    assert inputs[3].at == 3.0
    # A repeat of the same frame (same sequence mark) opens nothing a second time.
    again = [f for f in decoder.feed(status_frame("2", False), 4.0) if not f.duplicate]
    assert again == []


def test_signal_names_match_the_settings_fields() -> None:
    assert set(SignalTexts.model_fields) - {"ignore_case"} == {name.value for name in SignalName}
