"""ASCII line reader decoder: grammar, mapping settings, unreadable lines, splitting, fuzzing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, ReadFailed
from drivers.protocols import make_decoder
from drivers.protocols.ascii_lines import AsciiLineDecoder, AsciiLineSettings
from drivers.protocols.card_codes import CardCodeGrammar
from tests.drivers.splitting import assert_same_when_cut, assert_split_invariant, cut_points

TWO_GROUPS = "(?P<rank>.)(?P<suit>.)"
SUIT_LETTER = {"s": "S", "h": "H", "c": "C", "d": "D"}


def line_for(card: Card) -> bytes:
    return f"{SUIT_LETTER[card.suit.value]}{int(card.rank):02d}".encode()


def test_every_card_in_the_default_grammar_and_both_line_endings() -> None:
    data = b"".join(line_for(c) + (b"\r\n" if i % 2 else b"\n") for i, c in enumerate(ALL_CARDS))
    frames = assert_split_invariant(AsciiLineDecoder, data)
    assert [f["input"]["card"] for f in frames] == [c.code for c in ALL_CARDS]


def test_identical_consecutive_lines_are_two_cards() -> None:
    frames = AsciiLineDecoder().feed(b"S08\nS08\n", 1.0)
    assert [type(f.input) for f in frames] == [CardRead, CardRead]


def test_unreadable_lines_ask_for_a_rescan_by_default_and_blank_lines_are_ignored() -> None:
    frames = AsciiLineDecoder().feed(b"\n\r\nS14\nX08\nS8\n\xff\xfe\n", 1.0)
    assert all(isinstance(f.input, ReadFailed) for f in frames)
    assert len(frames) == 4
    assert "rank '14' is not in the rank map" in frames[0].input.reason  # type: ignore[union-attr]
    assert "does not match the card grammar" in frames[1].input.reason  # type: ignore[union-attr]
    assert "non-ASCII" in frames[3].input.reason  # type: ignore[union-attr]


def test_unreadable_lines_can_be_only_rejected_and_error_pattern_recognised() -> None:
    settings = AsciiLineSettings(unmatched="reject", error_pattern=r"ERR\d*")
    frames = AsciiLineDecoder(settings).feed(b"XX\nERR01\n", 1.0)
    assert frames[0].status == "rejected"
    assert isinstance(frames[1].input, ReadFailed)
    assert frames[1].input.reason == "reader reports 'ERR01'"


def test_overlong_line_rejected_then_next_line_read() -> None:
    data = b"A" * 500 + b"\nH13\n"
    frames = assert_split_invariant(AsciiLineDecoder, data)
    assert frames[0]["status"] == "rejected"
    assert frames[0]["reason"] == "line of 500 bytes exceeds 64"
    assert frames[1]["input"]["card"] == "Kh"


def test_custom_grammar_and_explicit_codes() -> None:
    grammar = CardCodeGrammar(
        pattern=r"(?P<rank>[A2-9TJQK])-(?P<suit>[♠♥♣♦])",
        rank_map={r: r for r in "A23456789TJQK"},
        suit_map={"♠": "s", "♥": "h", "♣": "c", "♦": "d"},
        codes={"JOKER-8": "8s"},
    )
    decoder = make_decoder("ascii_lines", {"grammar": grammar.model_dump(), "max_line_length": 16})
    frames = decoder.feed("Q-♥\nJOKER-8\n".encode(), 1.0)
    # the suit symbols are not ASCII: the reader is declared ASCII, so they are unreadable
    assert isinstance(frames[0].input, ReadFailed)
    assert isinstance(frames[1].input, CardRead)
    assert frames[1].input.card == Card.parse("8s")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"grammar": {"pattern": "(?P<rank>.)", "rank_map": {"1": "A"}, "suit_map": {"S": "s"}}}, "suit"),
        ({"grammar": {"pattern": "(", "rank_map": {"1": "A"}, "suit_map": {"S": "s"}}}, "regular expression"),
        (
            {
                "grammar": {
                    "pattern": "(?P<rank>.)(?P<suit>.)",
                    "rank_map": {"1": "Z"},
                    "suit_map": {"S": "s"},
                }
            },
            "rank_map",
        ),
        (
            {
                "grammar": {
                    "pattern": "(?P<rank>.)(?P<suit>.)",
                    "rank_map": {"1": "A"},
                    "suit_map": {"S": "x"},
                }
            },
            "suit_map",
        ),
        ({"max_line_lenght": 10}, "max_line_lenght"),
        ({"error_pattern": "[", "unmatched": "reject"}, "error_pattern"),
    ],
)
def test_bad_settings_name_the_field(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AsciiLineSettings.model_validate(settings)


@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes_never_raise_and_cards_only_from_valid_lines(data: bytes) -> None:
    decoder = AsciiLineDecoder()
    for frame in decoder.feed(data, 0.0) + decoder.reset():
        if isinstance(frame.input, CardRead):
            text = frame.raw.decode("ascii").strip()
            assert text == line_for(frame.input.card).decode()


_line_body = (
    st.sampled_from(ALL_CARDS).map(line_for)
    | st.sampled_from([b"S14", b"X08", b"S8", b"\xff\xfe", b"  H13 ", b"ERR", b"\x00S08", b"", b" "])
    | st.sampled_from([b"\x1cS08", b"S08\x1f", b"\x1dH13\x1e"])  # str.strip() once took these as blanks
    | st.sampled_from([b"\x00", b"\x00\x1b\x00", b" \x07\x7f", b"\x1f\x1c"])  # line noise
    | st.binary(max_size=8).map(lambda b: bytes(c for c in b if c != 0x0A))
    | st.integers(60, 300).map(lambda n: b"D" * n)  # around and past max_line_length
)
line_stream = st.lists(
    st.tuples(_line_body, st.sampled_from([b"\n", b"\r\n", b"\r\r\n", b""])).map(b"".join), max_size=20
).map(b"".join)
"""Card lines, unreadable, blank, binary and overlong lines; LF, CR LF, stray CR or no end."""


BLANKS = b" \t\r\x0b\x0c"
UNREADABLE = "unreadable"  # a read the engine must have rescanned
REFUSED = "refused"  # logged and counted, nothing for the engine


def oracle_lines(data: bytes) -> list[str]:
    """What each line of the stream reads as in the default grammar: a card code, ``UNREADABLE``
    or ``REFUSED``; blank lines read as nothing.

    A line ends at LF, a CR before it is not part of it; blanks around the code are allowed.
    Longer than 64 bytes: refused. Control bytes and blanks only: line noise, refused. A card is
    a suit letter (S H C D) and a two-digit rank 01-13; any other line is unreadable. What is
    left after the last LF is not a line: refused when the input ends.
    """
    *lines, partial = data.split(b"\n")
    reads = []
    for line in lines:
        body = line.removesuffix(b"\r")
        text = body.strip(BLANKS)
        if len(body) > 64:
            reads.append(REFUSED)
        elif not text:
            continue
        elif all(byte <= 0x20 or byte == 0x7F for byte in body):
            reads.append(REFUSED)
        elif len(text) == 3 and text[:1] in (b"S", b"H", b"C", b"D") and text[1:].isdigit():
            rank = int(text[1:])
            card = "A23456789TJQK"[rank - 1] + text[:1].decode().lower() if 1 <= rank <= 13 else None
            reads.append(card or UNREADABLE)
        else:
            reads.append(UNREADABLE)
    return reads + ([REFUSED] if partial else [])


def read_of(frame: dict[str, Any]) -> str:
    if frame["status"] == "rejected":
        return REFUSED
    return frame["input"]["card"] if frame["input"]["type"] == "CardRead" else UNREADABLE


@settings(max_examples=100)
@given(line_stream, cut_points)
def test_fuzz_line_streams_cut_anywhere_read_as_the_oracle_reads_them(data: bytes, cuts: list[int]) -> None:
    frames = assert_same_when_cut(AsciiLineDecoder, data, cuts)
    assert [read_of(frame) for frame in frames] == oracle_lines(data)


@pytest.mark.parametrize("line", [b"\x00\n", b"\x00\x00\x1b\r\n", b" \x07 \x7f\t\n", b"\x1f\x1c\n"])
def test_a_line_of_control_bytes_only_is_line_noise_not_a_misread(line: bytes) -> None:
    """Noise on the wire is refused (logged, counted); only a line that tried to name a card
    asks the engine for a rescan."""
    for unmatched in ("read_failed", "reject"):
        frames = AsciiLineDecoder(AsciiLineSettings(unmatched=unmatched)).feed(line + b"S08\n", 1.0)
        assert [(f.rejected, f.input is None) for f in frames[:1]] == [
            ("line noise: control bytes only", True)
        ]
        assert isinstance(frames[1].input, CardRead)


@pytest.mark.parametrize("line", [b"\x1fS08\n", b"S08\x1c\n", b"\x1dH13\x1e\r\n"])
def test_file_group_and_unit_separators_are_control_bytes_not_blanks(line: bytes) -> None:
    # str.strip() counts 0x1C-0x1F as whitespace: "\x1fS08" was once read as 8 of spades
    frames = AsciiLineDecoder().feed(line, 1.0)
    assert len(frames) == 1
    assert isinstance(frames[0].input, ReadFailed)
    assert "control characters" in frames[0].input.reason
