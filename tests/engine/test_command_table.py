"""The supervisor command table: one handler per action, a refusal as a typed value."""

from __future__ import annotations

from common.inputs import SupervisorCommand
from daemon.alerts import AlertCode
from daemon.engine.commands import ACTIONS, Refused
from daemon.engine.events import EventKind
from tests.engine.support import alerts, cmd, engine, feed, kinds, start_shoe


def test_every_action_has_exactly_one_handler() -> None:
    eng = engine()
    assert set(eng.commands.handlers) == set(ACTIONS)


def test_an_unknown_action_is_refused_naming_the_accepted_ones() -> None:
    eng = engine()
    out = feed(eng, [cmd("dealer_left", 1.0)])
    assert kinds(out) == [EventKind.COMMAND_REFUSED]
    assert "unknown action 'dealer_left'" in out[0].data["reason"]
    assert all(action in out[0].data["reason"] for action in ACTIONS)


def test_a_refusal_is_a_value_with_its_reason_and_no_effect_ran() -> None:
    eng = engine()
    outcome = eng.commands.handlers["rescan_ack"](SupervisorCommand("rescan_ack", 1.0, "sup", "c1", {}))
    assert outcome == Refused("no rescan is pending")
    assert eng.state.comparable() == engine().state.comparable()  # validation changed nothing


def test_a_refusal_the_floor_must_see_raises_its_alert_after_the_reply() -> None:
    eng = engine(game_flow="betting_window")
    out = start_shoe(eng)
    out = feed(eng, [cmd("close_betting", 50.0, "x1", round_id="7")])  # nothing is open
    assert kinds(out) == [EventKind.COMMAND_REFUSED, EventKind.ALERT_RAISED]
    assert [a.data["code"] for a in alerts(out)] == [AlertCode.BETTING_OUT_OF_ORDER]
    handler = eng.commands.handlers["close_betting"]
    refused = handler(SupervisorCommand("close_betting", 51.0, "sup", "x2", {"round_id": "7"}))
    assert isinstance(refused, Refused)
    assert refused.alert is not None
    assert refused.reason == out[0].data["reason"]
