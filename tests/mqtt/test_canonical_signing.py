"""RFC 8785 canonical JSON and the HMAC signatures built on it."""

from __future__ import annotations

import json
import math
import struct
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.mqtt.canonical import (
    _NEEDS_GENERAL,
    CanonicalJsonError,
    _encoder_ready,
    canonical_json,
    canonical_json_general,
    format_number,
)
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign, signing_bytes, verify

KEY = Secret(b"k" * 32, "test")

# RFC 8785 appendix B: IEEE-754 bit patterns and their ECMAScript text.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), RFC8785_NUMBERS)
def test_numbers_match_the_rfc_8785_table(bits: str, text: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert format_number(value) == text


def test_rfc_8785_structure_example() -> None:
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(value).decode("utf-8") == expected


def test_big_integers_print_as_their_double() -> None:
    assert canonical_json(2**60) == b"1152921504606847000"  # String(2**60) in ECMAScript
    assert canonical_json(2**60 + 1) == canonical_json(2**60)
    assert canonical_json(10**21) == b"1e+21"


def test_keys_sort_by_utf16_code_units() -> None:
    value = {"\u20ac": 0, "\r": 1, "\ufb33": 2, "1": 3, "\U0001f600": 4, "\u0080": 5, "\u00f6": 6}
    keys = list(json.loads(canonical_json(value)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, b"bytes", 10**400, object()])
def test_values_without_a_canonical_form_are_refused(bad: object) -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_json({"v": bad})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200)
@given(json_values)
def test_canonical_form_parses_back_to_the_same_value_and_is_stable(value: object) -> None:
    text = canonical_json(value)
    parsed = json.loads(text)
    assert parsed == value or _equal_modulo_int_float(parsed, value)
    assert canonical_json(parsed) == text


def _equal_modulo_int_float(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal_modulo_int_float(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal_modulo_int_float(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def event() -> dict[str, object]:
    return {
        "schema_version": 1,
        "event_id": "0b5c8f8e-8f43-5d1e-9d8e-3f1f1c7a2b10",
        "seq": 12,
        "table_id": "T1",
        "shoe_id": "S1",
        "hand": 3,
        "kind": "card_dealt",
        "ts": 1764423000.125,
        "published_at": 1764423000.5,
        "source": "reader",
        "data": {"card": "8s", "slot": "P1"},
    }


def test_signature_verifies_and_ignores_only_published_at() -> None:
    message = event()
    message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
    assert verify(message, KEY, UNSIGNED_EVENT_FIELDS)
    republished = {**message, "published_at": 1764429999.0}
    assert verify(republished, KEY, UNSIGNED_EVENT_FIELDS)
    assert not verify(message, Secret(b"other", "test"), UNSIGNED_EVENT_FIELDS)
    assert not verify({k: v for k, v in message.items() if k != "sig"}, KEY, UNSIGNED_EVENT_FIELDS)


@given(
    st.sampled_from(["seq", "table_id", "shoe_id", "hand", "kind", "ts", "source", "data", "event_id"]),
    st.one_of(st.integers(), st.text(max_size=5), st.none()),
)
def test_any_change_to_a_signed_field_breaks_the_signature(field: str, value: object) -> None:
    message = event()
    message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
    if message[field] == value:
        return
    tampered = {**message, field: value}
    assert not verify(tampered, KEY, UNSIGNED_EVENT_FIELDS)


def test_signing_bytes_are_independent_of_member_order() -> None:
    message = event()
    reordered = dict(reversed(list(message.items())))
    assert signing_bytes(message) == signing_bytes(reordered)


def test_secret_does_not_print_itself() -> None:
    secret = Secret(b"hunter2", "env X")
    assert "hunter2" not in repr(secret)
    assert "hunter2" not in str(secret)
    assert "hunter2" not in f"{secret}"


# Values that exercise both sides of every fast-path boundary: floats of every magnitude
# (integral ones, exponent-notation ones), integers around 2**53, keys beyond U+FFFF next to
# keys in U+E000..U+FFFF (where code point and UTF-16 order differ), tuples, control characters.
edge_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1.0, -5.0, 1e-4, 9.99e-5, 1e-7, 1e16, 9999999999999998.0, 1e15 + 0.5, 1e21, 1764423000.125]
)
edge_ints = st.integers(-(2**60), 2**60) | st.sampled_from([2**53, 2**53 + 1, -(2**53), -(2**53) - 1])
edge_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"])) | st.sampled_from(
    ["\U0001f600", "\ufb33", "\ue000", '\x00\x1f\u2028"\\', ""]
)
edge_values = st.recursive(
    st.none() | st.booleans() | edge_ints | edge_floats | edge_text,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(edge_text, inner, max_size=5)
    ),
    max_leaves=25,
)


@pytest.mark.slow
@settings(max_examples=300)
@given(edge_values)
def test_fast_path_gives_the_general_algorithms_bytes(value: object) -> None:
    assert canonical_json(value) == canonical_json_general(value)


class Colour(StrEnum):
    RED = "red"
    ODD = "\ue000\u2028"


def test_string_enum_members_take_the_fast_path_with_the_general_algorithms_bytes() -> None:
    # The engine's state snapshot holds StrEnum members (phase, alert code, card source).
    value = {Colour.RED: [Colour.ODD, "red"], "colour": Colour.RED, "n": 1.5, Colour.ODD: None}
    assert _encoder_ready(value) is value
    assert canonical_json(value) == canonical_json_general(value)
    assert canonical_json(value) == canonical_json({str(k): v for k, v in value.items()})
    assert b'"colour":"red"' in canonical_json(value)


def test_fast_path_gives_the_general_algorithms_bytes_for_a_published_event() -> None:
    tie = {"multiplier_float": 8.0}
    bets = {"Tie": tie, "Player": {"multiplier_float": -1.0}, "Banker": 0.95}
    data: dict[str, Any] = {"card": "8s", "read": {"raw": "05 31", "at": -0.0}, "bets": bets}
    message = {**event(), "data": data}
    assert canonical_json(message) == canonical_json_general(message)
    assert b'"at":0,' in canonical_json(message)
    assert b'{"multiplier_float":-1}' in canonical_json(message)
    ready = _encoder_ready(message)  # integral floats reach the encoder as ints, on a copy
    assert ready is not message
    assert ready["data"]["bets"]["Tie"]["multiplier_float"] == 8
    assert type(tie["multiplier_float"]) is float  # the caller's value is untouched
    plain = event()
    assert _encoder_ready(plain) is plain  # nothing to convert: no copy
    small = {**event(), "data": {"confidence": 1e-5}}  # Python prints 1e-05: general path
    assert _encoder_ready(small) is _NEEDS_GENERAL
    assert b'"confidence":0.00001' in canonical_json(small)


def test_fast_path_refuses_what_the_general_algorithm_refuses() -> None:
    for bad in ({"v": math.nan}, {"v": [1, math.inf]}, {1: "x"}, {"v": b"bytes"}, {"v": object()}):
        with pytest.raises(CanonicalJsonError):
            canonical_json(bad)
