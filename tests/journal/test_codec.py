"""Every engine input type survives the journal's JSON codec; malformed rows name the problem."""

from __future__ import annotations

import json
import math
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.inputs import EngineInput
from daemon.journal.codec import CodecError, decode_input, dumps_input, encode_input, loads_input

finite = st.floats(allow_nan=False, allow_infinity=False)

json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | finite | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)


def builds_input(cls: type) -> st.SearchStrategy[EngineInput]:
    """st.builds with JSON-safe strategies for float and dict fields (NaN never equals itself)."""
    overrides: dict[str, st.SearchStrategy[object]] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if hint is float:
            overrides[name] = finite
        elif float in typing.get_args(hint):
            overrides[name] = st.none() | finite
        elif typing.get_origin(hint) is dict:
            overrides[name] = json_objects
    return st.builds(cls, **overrides)


any_input = st.one_of(*(builds_input(cls) for cls in typing.get_args(EngineInput)))


@given(any_input)
def test_every_input_round_trips_through_json_text(inp: EngineInput) -> None:
    text = dumps_input(inp)
    assert loads_input(text) == inp
    assert json.loads(text)["type"] == type(inp).__name__


@pytest.mark.parametrize("cls", typing.get_args(EngineInput), ids=lambda c: c.__name__)
def test_each_input_type_is_covered(cls: type) -> None:
    @given(builds_input(cls))
    def round_trip(sample: EngineInput) -> None:
        assert decode_input(encode_input(sample)) == sample

    round_trip()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"type": "Nope", "at": 1.0}, "unknown input type 'Nope'"),
        ({"type": "CardRead", "at": 1.0}, "CardRead.card: missing"),
        ({"type": "CardRead", "at": 1.0, "card": "1x"}, "CardRead.card"),
        ({"type": "CardRead", "at": "soon", "card": "8s"}, "CardRead.at: expected a number"),
        ({"type": "CardRead", "at": 1.0, "card": "8s", "source": "ghost"}, "CardRead.source"),
        ({"type": "Tick", "at": 1.0, "extra": 1}, "unknown field(s) ['extra']"),
        ({"type": "DeviceConnection", "at": 1.0, "connected": "yes"}, "DeviceConnection.connected"),
        (
            {
                "type": "SupervisorCommand",
                "at": 1.0,
                "action": "x",
                "actor": "a",
                "command_id": "c",
                "args": [],
            },
            "SupervisorCommand.args: expected an object",
        ),
        ([1, 2], "must be an object"),
    ],
)
def test_malformed_rows_are_refused_with_the_field_named(row: object, message: str) -> None:
    with pytest.raises(CodecError) as info:
        decode_input(row)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_not_json_is_refused() -> None:
    with pytest.raises(CodecError, match="not JSON"):
        loads_input("{nope")


def test_integer_time_is_read_as_float() -> None:
    inp = decode_input({"type": "Tick", "at": 3})
    assert isinstance(inp.at, float)
    assert not math.isnan(inp.at)
