"""Game flow (issue #12): the betting window, the server's round ids, refusals that change
nothing, the cut_card command, shoe signals of slotless readers, a misread then dealt on, the
shoe lock that goes with the window, and a reader's frames across a restart."""

from __future__ import annotations

from typing import Any

import pytest

from common.inputs import (
    BettingClosed,
    BettingOpened,
    GameFlowSource,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeSignal,
    ShoeSignalKind,
)
from daemon.engine.events import Event
from daemon.engine.table import Engine
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    bet,
    cmd,
    deal,
    engine,
    feed,
    kinds,
    of_kind,
    read,
    roundtrip,
    start_shoe,
    window,
)

# A natural: P1 8, B1 2, P2 K, B2 3 -> Player 8 against Banker 5, no third card.
NATURAL = ("8c", "2d", "Kh", "3s")
NATURAL_2 = ("9c", "4d", "Qh", "2s")


def replies(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.data["action"], e.data["reason"]) for e in events if e.kind.startswith("command_")]


def game_state(eng: Engine) -> dict[str, Any]:
    """What a refused betting command must not change."""
    st = eng.state.comparable()
    return {k: v for k, v in st.items() if k not in ("alerts", "alert_counter")}


def test_each_rounds_events_carry_the_servers_round_id() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "T01-1041", 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    completed = of_kind(out, "round_completed")
    assert [e.data["round_id"] for e in completed] == ["T01-1041"]
    round_events = [e for e in out if e.hand == 1 and e.kind not in ("alert_raised", "bets_offered")]
    assert round_events
    assert all(e.data.get("round_id") == "T01-1041" for e in round_events)
    assert [e.data["phase"] for e in of_kind(out, "betting_opened") + of_kind(out, "betting_closed")] == [
        "betting",
        "dealing",
    ]
    snap = eng.snapshot()["game_flow"]
    assert snap == {
        "phase": "waiting",
        "round_id": None,
        "closes_at": None,
        "last_round_id": "T01-1041",
        "burn_signalled": False,
    }
    assert_legal(out, 8)
    assert_restores(eng, out)


@pytest.mark.parametrize("delay", [0.1, 1.0, 5.0, 30.0, 60.0])
def test_a_late_unneeded_card_is_never_the_next_rounds_player_1(delay: float) -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    decided = 31.5
    out += feed(eng, [read("5h", decided + delay)])  # unneeded: the round needed no more cards
    burned = of_kind(out, "card_dealt")[-1]
    assert burned.data["slot"] == "burn"
    assert burned.data["burn"] == "unneeded"
    (unneeded,) = alerts(out, "card_before_betting_closed")
    assert unneeded.data["holds"] is None  # RULES.md mistake 1: the next round's burn, nothing to decide
    out += bet(eng, "2", 100, close_after=10)
    out += deal(eng, NATURAL_2, 120)
    second = of_kind(out, "round_completed")[-1]
    assert second.data["cards"] == dict(zip(("P1", "B1", "P2", "B2"), NATURAL_2, strict=True))
    assert second.data["round_id"] == "2"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_second_unneeded_card_holds_the_next_round_until_a_supervisor_decides() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    out += feed(eng, [read("5h", 40), read("6h", 45)])
    first, second = alerts(out, "card_before_betting_closed")
    assert first.data["holds"] is None
    assert second.data["holds"] == "next_round"
    assert second.data["details"]["rule"] == "RULES.md dealing mistake 2"
    out += bet(eng, "2", 100, close_after=10)
    out += deal(eng, NATURAL_2, 120)
    assert of_kind(out, "round_held")[-1].data["hand"] == 2
    out += feed(eng, [cmd("acknowledge_alert", 130, "ack", alert_id=second.data["alert_id"])])
    assert of_kind(out, "round_completed")[-1].data["hand"] == 2
    assert_restores(eng, out)


def test_a_card_drawn_while_betting_is_open_is_exposed_and_holds_the_next_round() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [cmd("open_betting", 10, "o1", round_id="7")])
    out += feed(eng, [read("4d", 12)])
    exposed = of_kind(out, "card_outside_game")[-1]
    assert exposed.data["mode"] == "betting"
    assert exposed.data["counted"] is True
    (alert,) = alerts(out, "card_exposed_during_betting")
    assert alert.data["holds"] == "next_round"
    assert alert.data["details"]["round_id"] == "7"
    assert not of_kind(out, "round_opened")
    out += feed(eng, [cmd("close_betting", 20, "c1", round_id="7")])
    out += deal(eng, NATURAL, 30)
    assert of_kind(out, "round_held")[-1].data["hand"] == 1
    assert eng.state.counts["4d"] == 1  # it left the shoe: counted, never dealt
    out += feed(eng, [cmd("void_round", 40, "v", hand=1, reason="card exposed during betting")])
    assert of_kind(out, "round_voided")[-1].data["round_id"] == "7"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_cards_before_the_first_close_of_a_shoe_are_not_round_cards() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [read("4d", 5)])
    assert of_kind(out, "card_dealt")[-1].data["burn"] == "unneeded"
    assert not of_kind(out, "round_opened")


def test_the_per_round_burn_may_come_before_betting_closes() -> None:
    eng = window(burn_before_each_round=True)
    out = start_shoe(eng)
    out += feed(eng, [read("4d", 5)])  # the round's burn, drawn right away
    assert of_kind(out, "card_dealt")[-1].data["burn"] == "round"
    assert not alerts(out, "card_before_betting_closed")
    out += bet(eng, "1", 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    assert of_kind(out, "round_completed")[-1].data["cards"]["P1"] == "8c"


# ---------------------------------------------------------------- refusals that change nothing


def _opened(eng: Engine, round_id: str = "T01-5") -> list[Event]:
    out = start_shoe(eng)
    out += bet(eng, round_id, 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    return out


@pytest.mark.parametrize(
    ("action", "args", "reason", "alert_code"),
    [
        ("open_betting", {"round_id": "T01-5"}, "repeated", "round_id_out_of_sequence"),
        ("open_betting", {"round_id": "T01-3"}, "backwards", "round_id_out_of_sequence"),
        ("close_betting", {"round_id": "T01-6"}, "no betting is open", "betting_out_of_order"),
        ("open_betting", {"round_id": "not an id"}, "argument 'round_id'", None),
        ("open_betting", {"round_id": "T01-6", "extra": 1}, "unknown argument", None),
        ("open_betting", {"round_id": "T01-6", "closes_at": "soon"}, "argument 'closes_at'", None),
    ],
)
def test_a_bad_betting_command_is_refused_and_changes_nothing(
    action: str, args: dict[str, Any], reason: str, alert_code: str | None
) -> None:
    eng = window()
    out = _opened(eng)
    before = game_state(eng)
    snapshot_before = {k: v for k, v in eng.snapshot().items() if k != "alerts"}
    events = feed(eng, [cmd(action, 50, "bad", **args)])
    ((refused_action, why),) = replies(events)
    assert refused_action == action
    assert why is not None
    assert reason in why
    assert events[0].kind == "command_refused"
    assert game_state(eng) == before
    assert {k: v for k, v in eng.snapshot().items() if k != "alerts"} == snapshot_before
    raised = [e.data["code"] for e in alerts(events)]
    assert raised == ([alert_code] if alert_code else [])
    for e in alerts(events):
        assert e.data["holds"] is None
    assert_restores(eng, out + events)


@pytest.mark.parametrize("closes_at", [float("inf"), float("-inf"), float("nan")])
def test_an_opening_with_a_close_time_that_is_no_number_is_an_invalid_input(closes_at: float) -> None:
    """Found by the game-flow property test: a button or shoe opening carrying an infinite
    close time became a betting_opened event no journal could store (JSON has no infinity)."""
    eng = window(betting={"source": "button"})
    start_shoe(eng, at=100.0)
    opened = BettingOpened(at=110.0, source=GameFlowSource.BUTTON, closes_at=closes_at, device="button")
    events = feed(eng, [opened])
    assert kinds(events) == ["alert_raised"]
    (alert,) = alerts(events, "invalid_input")
    assert alert.data["details"] == {
        "input": "BettingOpened",
        "reason": f"closes_at {closes_at!r} is not a finite number",
    }
    assert eng.state.flow_phase != "betting"
    roundtrip(events)  # journaled as JSON
    assert_restores(eng, start_shoe(window(betting={"source": "button"}), at=100.0) + events)


def test_a_close_for_another_round_is_refused_and_alerted() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [cmd("open_betting", 10, "o", round_id="41")])
    before = game_state(eng)
    events = feed(eng, [cmd("close_betting", 12, "c", round_id="42")])
    assert replies(events) == [("close_betting", "betting is open for round 41, not 42")]
    assert [e.data["code"] for e in alerts(events)] == ["betting_out_of_order"]
    assert game_state(eng) == before


def test_an_open_while_betting_is_open_for_another_round_is_refused() -> None:
    eng = window()
    start_shoe(eng)
    feed(eng, [cmd("open_betting", 10, "o", round_id="41")])
    before = game_state(eng)
    events = feed(eng, [cmd("open_betting", 12, "o2", round_id="42")])
    assert replies(events) == [("open_betting", "betting is open for round 41: close it first")]
    assert game_state(eng) == before


def test_a_resent_open_or_close_is_refused_without_an_alert() -> None:
    eng = window()
    start_shoe(eng)
    feed(eng, [cmd("open_betting", 10, "o", round_id="41")])
    again = feed(eng, [cmd("open_betting", 11, "o-again", round_id="41")])
    assert replies(again) == [("open_betting", "betting is already open for round 41")]
    feed(eng, [cmd("close_betting", 12, "c", round_id="41")])
    before = game_state(eng)
    again = feed(eng, [cmd("close_betting", 13, "c-again", round_id="41")])
    assert replies(again) == [("close_betting", "betting is already closed for round 41")]
    assert not alerts(again)
    assert game_state(eng) == before


def test_an_open_during_a_round_cuts_that_round_short() -> None:
    eng = window()
    start_shoe(eng)
    bet(eng, "1", 10, close_after=10)
    feed(eng, [read("8c", 30), read("2d", 31)])
    events = feed(eng, [cmd("open_betting", 32, "o", round_id="2")])
    assert replies(events) == [("open_betting", None)]
    assert [a.data["code"] for a in alerts(events)] == ["round_cut_short"]
    assert of_kind(events, "round_held")[0].data["hand"] == 1
    assert eng.state.flow_phase == "betting"
    resent = feed(eng, [cmd("close_betting", 33, "c-again", round_id="1")])
    assert replies(resent)[0][1] == "betting is open for round 2, not 1"


def test_a_cards_only_table_refuses_the_betting_window() -> None:
    eng = engine()
    start_shoe(eng)
    before = game_state(eng)
    events = feed(eng, [cmd("open_betting", 10, "o", round_id="1")])
    (reply,) = replies(events)
    assert reply[1] is not None
    assert "cards_only" in reply[1]
    assert game_state(eng) == before


def test_a_skipped_round_id_is_taken_and_holds_its_round() -> None:
    eng = window()
    out = _opened(eng, "T01-5")
    events = bet(eng, "T01-8", 100, close_after=10)
    assert [e.kind for e in events if e.kind.startswith("command_")] == ["command_accepted"] * 2
    (skip,) = alerts(events, "round_id_out_of_sequence")
    assert skip.data["holds"] == "next_round"
    assert skip.data["details"] == {
        "round_id": "T01-8",
        "last_round_id": "T01-5",
        "reason": "skipped",
        "accepted": True,
    }
    events += deal(eng, NATURAL_2, 120)
    held = of_kind(events, "round_held")[-1]
    assert held.data["hand"] == 2
    assert held.data["round_id"] == "T01-8"
    events += feed(eng, [cmd("resolve_hold", 130, "r", hand=2)])
    assert of_kind(events, "round_completed")[-1].data["hand"] == 2
    assert_restores(eng, out + events)


def test_a_new_round_id_prefix_is_taken_and_held() -> None:
    eng = window()
    _opened(eng, "S1-40")
    events = bet(eng, "S2-1", 100, close_after=10)
    (alert,) = alerts(events, "round_id_out_of_sequence")
    assert alert.data["details"]["reason"] == "prefix_changed"


def test_the_round_id_sequence_survives_a_restart() -> None:
    eng = window()
    out = _opened(eng, "90")
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out))
    events = feed(restored, [cmd("open_betting", 200, "o", round_id="93")])  # server ahead of the edge
    (alert,) = alerts(events, "round_id_out_of_sequence")
    assert alert.data["details"]["reason"] == "skipped"
    assert alert.data["holds"] == "next_round"


# ---------------------------------------------------------------- button and shoe-lock inputs


def test_a_dealer_button_opens_and_closes_betting() -> None:
    eng = window(betting={"source": "button"})
    out = start_shoe(eng)
    out += feed(eng, [BettingOpened(10, GameFlowSource.BUTTON, device="reader")])
    out += feed(eng, [BettingOpened(10.2, GameFlowSource.BUTTON, device="reader")])  # bounce: nothing
    assert len(of_kind(out, "betting_opened")) == 1
    out += feed(eng, [BettingClosed(20, GameFlowSource.BUTTON, device="reader")])
    out += deal(eng, NATURAL, 30)
    completed = of_kind(out, "round_completed")[-1]
    assert "round_id" not in completed.data
    assert_restores(eng, out)


def test_a_close_with_no_open_round_is_an_alert() -> None:
    eng = window(betting={"source": "button"})
    start_shoe(eng)
    events = feed(eng, [BettingClosed(20, GameFlowSource.BUTTON, device="reader")])
    (alert,) = alerts(events)
    assert alert.data["code"] == "betting_out_of_order"
    assert alert.data["details"]["reason"] == "no betting is open: nothing to close"
    assert not of_kind(events, "betting_closed")


def test_betting_from_another_source_than_configured_is_alerted_not_used() -> None:
    eng = window()  # source: server
    start_shoe(eng)
    events = feed(eng, [BettingOpened(10, GameFlowSource.SHOE_LOCK, device="reader")])
    (alert,) = alerts(events)
    assert alert.data["details"]["betting_source"] == "shoe_lock"
    assert eng.state.flow_phase == "waiting"


def test_lock_shoe_needs_another_source_than_the_shoe_lock() -> None:
    with pytest.raises(ValueError, match="lock_shoe"):
        window(betting={"source": "shoe_lock", "lock_shoe": True})


# ---------------------------------------------------------------- the shoe lock


def test_the_shoe_is_locked_with_the_window_and_its_answer_checked() -> None:
    eng = window(betting={"lock_shoe": True})
    out = start_shoe(eng)
    out += feed(eng, [cmd("open_betting", 10, "o", round_id="1")])
    (lock,) = of_kind(out, "reader_command_requested")
    assert lock.data == {"action": "lock", "command_id": "betting-1-lock", "actor": "game_flow"}
    out += feed(eng, [ReaderSignal(ReaderSignalKind.LOCKED, 10.5, command_id="betting-1-lock")])
    out += feed(eng, [cmd("close_betting", 20, "c", round_id="1")])
    assert not alerts(out, "shoe_not_locked")
    unlock = of_kind(out, "reader_command_requested")[-1]
    assert unlock.data["action"] == "unlock"
    out += feed(eng, [ReaderSignal(ReaderSignalKind.UNLOCKED, 20.5, command_id=unlock.data["command_id"])])
    assert eng.state.lock_request is None
    assert_restores(eng, out)


def test_a_shoe_that_refuses_the_lock_raises_shoe_not_locked() -> None:
    eng = window(betting={"lock_shoe": True})
    out = start_shoe(eng)
    out += feed(eng, [cmd("open_betting", 10, "o", round_id="1")])
    refused = ReaderSignal(
        ReaderSignalKind.COMMAND_REFUSED, 11, code=4, detail="lock: NAK 4", command_id="betting-1-lock"
    )
    out += feed(eng, [refused])
    (alert,) = alerts(out, "shoe_not_locked")
    assert alert.data["details"]["reader_code"] == 4
    assert not alerts(out, "reader_command_refused")


def test_a_shoe_that_never_answers_the_lock_is_alerted_when_betting_closes() -> None:
    eng = window(betting={"lock_shoe": True})
    start_shoe(eng)
    feed(eng, [cmd("open_betting", 10, "o", round_id="1")])
    events = feed(eng, [cmd("close_betting", 20, "c", round_id="1")])
    (alert,) = alerts(events, "shoe_not_locked")
    assert alert.data["details"]["reason"] == "the shoe did not confirm the lock before betting closed"


# ---------------------------------------------------------------- cut card, shoe signals


def test_the_cut_card_command_marks_the_last_round_once() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [cmd("cut_card", 5, "cut")])
    assert of_kind(out, "last_round")[-1].data["hand"] == 1
    assert of_kind(out, "cut_card")[-1].data["device"] == "supervisor"
    again = feed(eng, [cmd("cut_card", 6, "cut2")])
    assert replies(again) == [("cut_card", "the cut card was already reported (last round: hand 1)")]
    out += again + bet(eng, "1", 10, close_after=10) + deal(eng, NATURAL, 30)
    assert of_kind(out, "shoe_ended")[-1].data["reason"] == "cut_card"
    assert_restores(eng, out)


def test_the_cut_card_command_needs_a_shoe() -> None:
    events = feed(engine(), [cmd("cut_card", 5, "cut")])
    assert replies(events) == [("cut_card", "no shoe is being dealt")]


def test_signalled_burn_cards_are_burns_in_any_game_flow() -> None:
    eng = engine()
    out = start_shoe(eng)
    out += feed(eng, [ShoeSignal(ShoeSignalKind.BURN_STARTED, 10), read("4d", 11), read("5d", 12)])
    out += feed(eng, [ShoeSignal(ShoeSignalKind.BURN_ENDED, 13)])
    assert [e.data["burn"] for e in of_kind(out, "card_dealt")[-2:]] == ["signalled", "signalled"]
    out += deal(eng, NATURAL, 30)
    assert of_kind(out, "round_completed")[-1].data["cards"]["P1"] == "8c"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_shoe_start_signal_starts_a_shoe_only_when_the_table_allows_it() -> None:
    eng = engine(device_starts_shoe=True)
    out = feed(eng, [ShoeSignal(ShoeSignalKind.SHOE_STARTED, 1)])
    assert of_kind(out, "shoe_started")[-1].data["started_by"] == "device"
    refused = feed(engine(), [ShoeSignal(ShoeSignalKind.SHOE_STARTED, 1)])
    assert [e.data["code"] for e in alerts(refused)] == ["shoe_signal_unexpected"]
    assert not of_kind(refused, "shoe_started")


def test_a_shoe_taken_out_mid_shoe_is_alerted_and_ends_nothing() -> None:
    eng = engine()
    start_shoe(eng)
    events = feed(eng, [ShoeSignal(ShoeSignalKind.SHOE_ENDED, 9)])
    assert [e.data["code"] for e in alerts(events)] == ["shoe_signal_unexpected"]
    assert "shoe_ended" not in kinds(events)


def test_a_burn_signal_mid_round_is_alerted_and_not_applied() -> None:
    eng = engine()
    start_shoe(eng)
    feed(eng, [read("8c", 10)])
    events = feed(eng, [ShoeSignal(ShoeSignalKind.BURN_STARTED, 11)])
    assert of_kind(events, "shoe_signal")[-1].data["applied"] is False
    assert [e.data["code"] for e in alerts(events)] == ["shoe_signal_unexpected"]
    assert eng.state.burn_signalled is False


# ---------------------------------------------------------------- misread, then deal on


def test_a_misread_then_a_card_from_a_slotless_reader_holds_the_round() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10, close_after=10)
    # Physically: P1 8c, B1 2d (misread, never rescanned: the dealer dealt on), P2 Ah, B2 Kd.
    out += feed(eng, [read("8c", 30), ReadFailed(31), read("Ah", 32)])
    (unconfirmed,) = alerts(out, "rescan_unconfirmed")
    assert unconfirmed.data["holds"] == 1
    assert unconfirmed.data["details"]["slot"] == "B1"
    out += feed(eng, [read("Kd", 33), read("9s", 34)])  # the engine's model: 8c Ah Kd 9s, decided
    assert of_kind(out, "round_held")[-1].data["hand"] == 1
    assert not of_kind(out, "round_completed")
    physical = {"P1": "8c", "B1": "2d", "P2": "Ah", "B2": "Kd"}
    out += feed(eng, [cmd("rearrange", 40, "fix", hand=1, cards=physical)])
    out += feed(eng, [cmd("resolve_hold", 41, "ok", hand=1)])
    assert of_kind(out, "round_completed")[-1].data["cards"] == physical
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_reader_naming_slots_confirms_its_own_rescan() -> None:
    eng = window()
    start_shoe(eng)
    bet(eng, "1", 10, close_after=10)
    events = feed(eng, [read("8c", 30, target="P1"), ReadFailed(31), read("2d", 32, target="B1")])
    assert not alerts(events, "rescan_unconfirmed")


# ---------------------------------------------------------------- restart


def test_reader_frames_missing_across_a_restart_hold_the_round() -> None:
    eng = engine()
    out = start_shoe(eng)
    out += feed(eng, [read("8c", 30, target="P1", transmission_id="5")])
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out))
    events = feed(restored, [read("2d", 300, target="B1", transmission_id="C")])  # 7 marks on
    (gap,) = alerts(events, "restart_gap")
    assert gap.data["holds"] == 1
    assert gap.data["details"] == {
        "reason": "6 sequence mark(s) skipped since the last frame journaled",
        "last_transmission_id": "5",
        "transmission_id": "C",
        "marks_skipped": 6,
    }
    # frames that follow on are no gap; the check is made once per device
    again = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out))
    calm = feed(again, [read("2d", 300, target="B1", transmission_id="6"), read("Kh", 301, target="P2")])
    assert not alerts(calm, "restart_gap")


# ---------------------------------------------------------------- cards_only: the known limit


def test_cards_only_still_takes_a_late_unneeded_card_as_the_next_player_1() -> None:
    """README "Weak spots": what remains in cards_only mode (betting_window covers it above)."""
    eng = engine()
    out = start_shoe(eng)
    out += deal(eng, NATURAL, 30)
    out += feed(eng, [read("5h", 31.5 + 60)])  # unneeded, long after the window
    out += deal(eng, NATURAL_2, 100)
    second = of_kind(out, "round_completed")[1]
    assert second.data["cards"]["P1"] == "5h"  # settled shifted: one card early
    assert not alerts(out[: out.index(second)], "unneeded_card")  # and no alert before it settled


def test_a_round_in_progress_across_a_restart_is_held_when_the_reader_names_no_frames() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10, close_after=10)
    out += deal(eng, ("8c", "2d"), 30)
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out))
    events = feed(restored, [read("Kh", 300), read("3s", 301)])
    (gap,) = alerts(events, "restart_gap")
    assert gap.data["holds"] == 1
    assert "cannot show that no card of it was dealt" in gap.data["details"]["reason"]
    assert of_kind(events, "round_held")[-1].data["hand"] == 1
    # a restart between rounds is not in doubt (the server's next round id is checked instead)
    out += feed(eng, [read("Kh", 32), read("3s", 33)])
    between = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out))
    assert not alerts(bet(between, "2", 100, close_after=10) + deal(between, NATURAL_2, 120), "restart_gap")


def test_a_button_input_with_a_round_id_out_of_form_is_alerted_not_used() -> None:
    eng = window(betting={"source": "button"})
    start_shoe(eng)
    events = feed(eng, [BettingOpened(10, GameFlowSource.BUTTON, round_id="no number", device="reader")])
    (alert,) = alerts(events)
    assert alert.data["code"] == "betting_out_of_order"
    assert "accepted form" in alert.data["details"]["reason"]
    assert eng.state.flow_phase == "waiting"


def test_a_second_card_before_the_close_used_as_player_1_is_corrected_without_counting_it_twice() -> None:
    """RULES.md mistake 2 under the window: the dealer made the second unneeded card the next round's
    Player 1. The engine burned it and holds that round; the supervisor rearranges the round."""
    eng = window(decks=2)
    out = start_shoe(eng)
    out += bet(eng, "1", 10, close_after=10)
    out += deal(eng, NATURAL, 30)
    out += feed(eng, [read("5h", 40), read("9d", 45)])  # 5h burned (mistake 1); 9d: the real P1
    out += bet(eng, "2", 100, close_after=10)
    out += deal(eng, ("4c", "Qd", "Kc"), 120)  # the engine's round 2: 4c Qd Kc ... (shifted)
    physical = {"P1": "9d", "B1": "4c", "P2": "Qd", "B2": "Kc"}  # 9 against 4: natural
    out += feed(eng, [cmd("rearrange", 130, "fix", hand=2, cards=physical)])
    completed = of_kind(out, "round_completed")[-1]
    assert completed.data["cards"] == physical
    assert completed.data["round_id"] == "2"
    corrected = of_kind(out, "round_corrected")[-1]
    assert corrected.data["from_unneeded_burn"] == ["P1"]
    assert eng.state.counts["9d"] == 1  # out of the shoe once: not counted again
    assert_legal(out, 2)
    assert_restores(eng, out)
