"""The supervisor command ``dealer_changed``: the dealer on the table, recorded as an event the fold
keeps (state and snapshot), validated argument by argument, restored from the journal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.engine.checkpoint import capture
from daemon.engine.events import EventKind
from daemon.engine.table import Engine
from tests.engine.support import assert_restores, cmd, engine, feed, kinds, read, roundtrip, start_shoe


def test_a_dealer_change_is_accepted_recorded_and_kept_in_the_snapshot() -> None:
    eng = engine()
    out = feed(eng, [cmd("dealer_changed", 10.0, "d1", dealer_id="D-017", name="Anne-Marie O'Neil")])
    assert kinds(out) == [EventKind.COMMAND_ACCEPTED, EventKind.DEALER_CHANGED]
    changed = out[1]
    assert changed.source == "supervisor"
    assert changed.hand is None
    assert changed.data == {"dealer_id": "D-017", "name": "Anne-Marie O'Neil", "actor": "floor-1"}
    assert eng.state.dealer == {"dealer_id": "D-017", "name": "Anne-Marie O'Neil", "since": 10.0}
    assert eng.snapshot()["dealer"] == {"dealer_id": "D-017", "name": "Anne-Marie O'Neil", "since": 10.0}


def test_the_snapshot_has_no_dealer_until_one_is_told() -> None:
    assert engine().snapshot()["dealer"] is None


def test_the_dealer_stays_across_rounds_and_shoes_and_a_change_mid_round_changes_no_round() -> None:
    eng = engine()
    events = feed(eng, [cmd("dealer_changed", 1.0, "d1", dealer_id="D1")])
    events += start_shoe(eng, at=2.0)
    events += feed(eng, [read("2s", 10.0), read("3h", 11.0)])  # round 1 under way
    events += feed(eng, [cmd("dealer_changed", 12.0, "d2", dealer_id="D2", name="Bo")])
    round_events = [e for e in events if e.hand is not None]
    assert round_events
    assert all("dealer_id" not in e.data for e in round_events)
    assert eng.state.dealer == {"dealer_id": "D2", "name": "Bo", "since": 12.0}
    assert eng.state.round is not None
    assert eng.state.round.hand == 1
    events += feed(eng, [cmd("new_shoe", 13.0, "n2", shoe_id="S2")])  # refused: round in progress
    assert eng.state.dealer is not None
    assert eng.state.dealer["dealer_id"] == "D2"
    assert_restores(eng, events)


def test_the_same_dealer_again_is_refused_another_name_is_a_change() -> None:
    eng = engine()
    feed(eng, [cmd("dealer_changed", 1.0, "d1", dealer_id="D1", name="Bo")])
    out = feed(eng, [cmd("dealer_changed", 2.0, "d2", dealer_id="D1", name="Bo")])
    assert kinds(out) == [EventKind.COMMAND_REFUSED]
    assert out[0].data["reason"] == "dealer 'D1' is already on the table"
    out = feed(eng, [cmd("dealer_changed", 3.0, "d3", dealer_id="D1")])
    assert kinds(out) == [EventKind.COMMAND_ACCEPTED, EventKind.DEALER_CHANGED]
    assert eng.state.dealer == {"dealer_id": "D1", "name": None, "since": 3.0}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({}, "argument 'dealer_id' is required"),
        ({"dealer_id": ""}, "argument 'dealer_id' is required"),
        ({"dealer_id": "-D1"}, "argument 'dealer_id' is required"),
        ({"dealer_id": "D1\n"}, "argument 'dealer_id' is required"),
        ({"dealer_id": "D" * 65}, "argument 'dealer_id' is required"),
        ({"dealer_id": "<script>"}, "argument 'dealer_id' is required"),
        ({"dealer_id": 17}, "argument 'dealer_id' is required"),
        ({"dealer_id": "D1", "name": ""}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": " Bo"}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": "B" * 65}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": "Bo\u202eevil"}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": "<b>Bo</b>"}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": "Bo\x00"}, "argument 'name' must be"),
        ({"dealer_id": "D1", "name": ["Bo"]}, "argument 'name' must be"),
        ({"dealer_id": "D1", "badge": "x"}, "unknown argument(s) 'badge'"),
    ],
)
def test_a_malformed_dealer_change_is_refused_naming_the_argument(
    args: dict[str, object], reason: str
) -> None:
    eng = engine()
    out = feed(eng, [cmd("dealer_changed", 1.0, "d1", **args)])
    assert kinds(out) == [EventKind.COMMAND_REFUSED]
    assert out[0].data["reason"].startswith(reason)
    assert len(out[0].data["reason"]) < 200  # a long hostile value is cut short in the reason
    assert eng.state.dealer is None


def test_names_of_other_scripts_are_accepted() -> None:
    eng = engine()
    out = feed(eng, [cmd("dealer_changed", 1.0, "d1", dealer_id="D9", name="李小龍 Zoë")])
    assert kinds(out) == [EventKind.COMMAND_ACCEPTED, EventKind.DEALER_CHANGED]


def test_the_dealer_survives_a_checkpoint() -> None:
    eng = engine()
    feed(eng, [cmd("dealer_changed", 1.0, "d1", dealer_id="D1", name="Bo")])
    checkpoint = capture(eng, 1.0)
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, [], start=checkpoint)
    assert restored.state.dealer == eng.state.dealer
    assert restored.snapshot() == eng.snapshot()


@given(st.text(max_size=80), st.one_of(st.none(), st.text(max_size=80)))
def test_any_text_is_refused_or_recorded_exactly_never_a_crash(dealer_id: str, name: str | None) -> None:
    eng = engine()
    out = feed(eng, [cmd("dealer_changed", 1.0, "d1", dealer_id=dealer_id, name=name)])
    if out[0].kind == EventKind.COMMAND_ACCEPTED:
        assert eng.state.dealer == {"dealer_id": dealer_id, "name": name, "since": 1.0}
        assert dealer_id.isascii()
        assert len(dealer_id) <= 64
        assert name is None or (len(name) <= 64 and name.isprintable() and name == name.lstrip())
        assert roundtrip(out) == out
    else:
        assert kinds(out) == [EventKind.COMMAND_REFUSED]
        assert eng.state.dealer is None
