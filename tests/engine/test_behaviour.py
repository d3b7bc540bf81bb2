"""Engine behaviour beyond the numbered dealing mistakes: one rule per test."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from common.cards import ALL_CARDS
from common.inputs import (
    CutCardDrawn,
    DeviceConnection,
    DeviceTarget,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
    VerdictOutcome,
)
from daemon.engine.events import Event, EventKind
from daemon.engine.settings import TableSettings
from tests.engine.support import (
    alerts,
    assert_restores,
    cmd,
    engine,
    feed,
    kinds,
    of_kind,
    read,
    start_shoe,
)

NATURAL = ("9s", "2h", "Kc", "3d")


def _camera(code: str, at: float, slot: str | None, confidence: float = 0.97):
    return read(
        code,
        at,
        source=Source.CAMERA,
        device="camera",
        target=None if slot is None else DeviceTarget(slot),
        confidence=confidence,
    )


# ---------------------------------------------------------------- shoe procedure


@pytest.mark.parametrize(
    ("indicator", "counts", "ace", "expected"),
    [
        ("7c", False, 1, 7),
        ("7c", True, 1, 6),
        ("Kd", False, 1, 10),
        ("Th", True, 1, 9),
        ("As", False, 1, 1),
        ("As", False, 11, 11),
        ("As", True, 1, 0),
    ],
)
def test_the_indicator_decides_the_opening_burn(
    indicator: str, counts: bool, ace: int, expected: int
) -> None:
    eng = engine(burn={"indicator_counts": counts, "ace_burns": ace})
    out = feed(eng, [cmd("new_shoe", 0, "n"), read(indicator, 1)])
    assert of_kind(out, "card_dealt")[0].data["burn_count"] == expected
    burns = feed(eng, [read(c.code, 2 + k) for k, c in enumerate(ALL_CARDS[20 : 20 + expected])])
    assert [e.data["burn"] for e in of_kind(burns, "card_dealt")] == ["opening"] * expected
    offered = of_kind(out + burns, "bets_offered")
    assert [e.data["hand"] for e in offered] == [1]
    assert feed(eng, [read("3c", 50)])[0].kind == "round_opened"


def test_a_card_before_any_shoe_is_refused() -> None:
    eng = engine()
    out = eng.handle(read("9s", 1))
    assert [a.data["code"] for a in alerts(out)] == ["no_shoe"]
    assert eng.snapshot()["shoe"]["cards_out"] == 0


def test_the_device_may_start_a_shoe_when_the_setting_allows() -> None:
    eng = engine(device_starts_shoe=True)
    out = eng.handle(read("2c", 1, target=DeviceTarget.FIRST_CARD))
    assert kinds(out) == ["shoe_started", "card_dealt"]
    assert out[0].data["started_by"] == "device"
    assert engine().handle(read("2c", 1, target=DeviceTarget.FIRST_CARD))[0].data["code"] == "no_shoe"


def test_cut_card_during_a_round_makes_it_the_last_and_later_cards_are_refused() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(
        eng, [read("3c", 100), CutCardDrawn(100.5), read("2d", 101), read("4h", 102), read("2s", 103)]
    )
    assert of_kind(events, "last_round")[0].data["hand"] == 1
    tail = feed(eng, [read("5h", 104)])
    assert kinds(tail) == ["card_dealt", "round_completed", "shoe_ended", "shoe_certificate"]
    events += tail
    after = eng.handle(read("7d", 140))
    assert [a.data["code"] for a in alerts(after)] == ["card_after_last_round"]
    assert after[0].data["read"]["card"] == "7d"
    assert eng.snapshot()["shoe"]["cards_out"] == 5 + 3
    events += after
    assert_restores(eng, events)


@pytest.mark.parametrize(
    ("policy", "during_round", "last"),
    [
        ("finish_current_round", True, 1),
        ("finish_current_round", False, 2),
        ("one_more_round", True, 2),
        ("one_more_round", False, 2),
    ],
)
def test_cut_card_policy_decides_the_last_round(policy: str, during_round: bool, last: int) -> None:
    eng = engine(cut_card_policy=policy)
    start_shoe(eng)
    feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL[: 2 if during_round else 4])])
    out = eng.handle(CutCardDrawn(110))
    assert of_kind(out, "last_round")[0].data["hand"] == last
    assert eng.handle(CutCardDrawn(111))[0].data["code"] == "unexpected_cut_card"


def test_burn_before_each_round() -> None:
    eng = engine(burn_before_each_round=True, round_burn_cards=2)
    start_shoe(eng)
    out = feed(eng, [read("Qs", 50), read("Qd", 51), read("9s", 52)])
    assert [(e.data["slot"], e.data.get("burn")) for e in of_kind(out, "card_dealt")] == [
        ("burn", "round"),
        ("burn", "round"),
        ("P1", None),
    ]


# ---------------------------------------------------------------- reads


def test_a_duplicate_transmission_is_dropped_but_identical_cards_are_kept() -> None:
    eng = engine()
    start_shoe(eng)
    out = feed(
        eng,
        [
            read("9s", 100, transmission_id="1"),
            read("9s", 100.05, transmission_id="1"),  # the shoe resends its frame
            read("9s", 101, transmission_id="2"),  # a second 9s: legal in 8 decks
            read("9s", 102),  # a third, from a reader without ids
            read("9s", 103),
        ],
    )
    assert [e.data["slot"] for e in of_kind(out, "card_dealt")] == ["P1", "B1", "P2", "B2"]


def test_reads_without_position_are_never_held() -> None:
    eng = engine(pull_hold_window_s=5.0)
    start_shoe(eng)
    out = eng.handle(read("9s", 100))
    assert "read_held" not in kinds(out)
    assert of_kind(out, "card_dealt")


def test_reader_target_on_a_burn_card_holds_the_next_round() -> None:
    eng = engine()
    events = feed(eng, [cmd("new_shoe", 0, "n"), read("2c", 1), read("Kd", 2)])
    events += eng.handle(read("Kh", 3, target=DeviceTarget.P1))  # the shoe thinks the game started
    (alert,) = alerts(events, "device_disagreement")
    assert alert.data["holds"] == "next_round"
    events += feed(eng, [read(c, 10 + k) for k, c in enumerate(NATURAL)])
    assert of_kind(events, "round_held")
    assert eng.handle(cmd("acknowledge_alert", 20, "a", alert_id=alert.data["alert_id"]))[0].kind == (
        "command_refused"
    )
    events += eng.handle(cmd("resolve_hold", 21, "r"))
    assert of_kind(events, "round_completed")
    assert_restores(eng, events)


def test_reader_verdict_disagreeing_with_a_completed_round_is_an_alert() -> None:
    eng = engine()
    start_shoe(eng)
    feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    agree = eng.handle(ShoeVerdict(VerdictOutcome.PLAYER, False, False, 105))
    assert kinds(agree) == ["verdict_checked"]
    assert agree[0].data["agrees"] is True
    disagree = eng.handle(ShoeVerdict(VerdictOutcome.BANKER, False, False, 106))
    (alert,) = alerts(disagree, "verdict_disagreement")
    assert alert.data["details"]["round_already_completed"] is True


def test_await_device_verdict_holds_each_round_until_the_verdict_agrees() -> None:
    eng = engine(await_device_verdict=True)
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    assert of_kind(events, "round_completed") == []
    out = eng.handle(ShoeVerdict(VerdictOutcome.PLAYER, False, False, 105))
    assert kinds(out) == ["verdict_checked", "round_completed"]
    assert_restores(eng, events + out)


# ---------------------------------------------------------------- camera arbitration


def test_camera_agreeing_with_the_reader_changes_nothing() -> None:
    eng = engine()
    start_shoe(eng)
    eng.handle(read("9s", 100))
    assert eng.handle(_camera("9s", 100.4, "P1")) == []


def test_camera_disagreeing_with_the_reader_is_an_alert_and_holds_the_round() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(read("9s", 100))
    out = eng.handle(_camera("9h", 100.4, "P1"))
    (alert,) = alerts(out, "camera_disagreement")
    assert alert.data["details"]["reader_card"] == "9s"
    assert alert.data["details"]["camera_card"] == "9h"
    assert alert.data["holds"] == 1
    assert eng.handle(_camera("9h", 100.9, "P1")) == []  # reported again: still one alert
    events += out + feed(eng, [read(c, 101 + k) for k, c in enumerate(NATURAL[1:])])
    assert of_kind(events, "round_completed") == []
    assert eng.snapshot()["round"] is None
    assert eng.snapshot()["held_rounds"][0]["cards"]["P1"] == "9s"  # never a pick: the reader's card stays
    assert_restores(eng, events)


def test_camera_fills_in_only_after_a_reader_failure_and_only_when_confident() -> None:
    eng = engine()
    events = start_shoe(eng)
    assert eng.handle(_camera("9s", 100, "P1")) == []  # reader healthy: the camera only cross-checks
    events += eng.handle(ReadFailed(101))
    assert eng.handle(_camera("9s", 101.5, "P1", confidence=0.5)) == []  # unsure: abstains
    mismatch = eng.handle(_camera("9s", 101.6, "B1"))
    assert alerts(mismatch, "camera_slot_mismatch")
    events += mismatch
    out = eng.handle(_camera("9s", 101.7, "P1"))
    events += out
    dealt = of_kind(out, "card_dealt")[0]
    assert (dealt.data["slot"], dealt.data["source"], dealt.data["fills_rescan"]) == ("P1", "camera", True)
    assert of_kind(out, "alert_cleared")[0].data["reason"] == "camera_filled"
    # The dealer rescans anyway: the shoe names the same slot, so it is a confirmation, not a card.
    confirm = eng.handle(read("9s", 103, target=DeviceTarget.P1))
    assert kinds(confirm) == ["card_confirmed"]
    events += confirm
    nxt = eng.handle(read("2h", 104, target=DeviceTarget.B1))
    assert of_kind(nxt, "card_dealt")[0].data["slot"] == "B1"
    assert_restores(eng, events + nxt)


def test_a_rescan_of_a_camera_filled_card_without_a_slot_is_refused_as_ambiguous() -> None:
    eng = engine()
    start_shoe(eng)
    eng.handle(ReadFailed(100))
    eng.handle(_camera("9s", 100.5, "P1"))
    out = eng.handle(read("9s", 102))
    assert [a.data["code"] for a in alerts(out)] == ["ambiguous_rescan"]
    assert eng.snapshot()["round"]["cards"] == {"P1": "9s"}


def test_camera_fills_in_while_the_reader_is_disconnected_and_the_alert_clears_on_return() -> None:
    eng = engine()
    events = start_shoe(eng)
    down = eng.handle(DeviceConnection(False, 100, detail="unplugged"))
    (alert,) = alerts(down, "reader_disconnected")
    refused = eng.handle(cmd("acknowledge_alert", 100.5, "ack", alert_id=alert.data["alert_id"]))
    assert "still disconnected" in refused[0].data["reason"]
    out = eng.handle(_camera("9s", 101, "P1"))
    assert of_kind(out, "card_dealt")[0].data["source"] == "camera"
    up = eng.handle(DeviceConnection(True, 102))
    assert [e.kind for e in up] == ["device_connection", "alert_cleared"]
    assert eng.handle(DeviceConnection(True, 103)) == []
    assert_restores(eng, events + down + refused + out + up)


def test_a_camera_read_in_no_known_box_never_fills_the_planned_slot() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(ReadFailed(100))
    assert eng.handle(_camera("9s", 100.5, None)) == []  # no layout box: abstains, no guess
    assert eng.snapshot()["rescan_needed"] is True
    assert eng.snapshot()["round"] is None
    out = eng.handle(_camera("9s", 100.6, "P1"))  # the same card seen in the planned box fills it
    assert of_kind(out, "card_dealt")[0].data["slot"] == "P1"
    assert_restores(eng, events + out)


def test_one_reader_down_while_another_supplies_the_round_is_no_reader_failure() -> None:
    eng = engine()
    events = start_shoe(eng)  # the opening cards come from "reader"
    events += feed(eng, [read("9s", 100, device="backup"), DeviceConnection(False, 100.5, device="reader")])
    assert eng.snapshot()["round"]["cards"] == {"P1": "9s"}
    assert eng.handle(_camera("2h", 101, "B1")) == []  # "backup" still deals: the camera only checks
    out = eng.handle(DeviceConnection(False, 101.5, device="backup"))  # now every reader is down
    out += eng.handle(_camera("2h", 102, "B1"))
    (filled,) = of_kind(out, "card_dealt")
    assert (filled.data["slot"], filled.data["source"]) == ("B1", "camera")
    assert eng.state.reader_devices == ["backup", "reader"]
    assert_restores(eng, events + out)


def test_the_camera_never_fills_a_burn_card() -> None:
    eng = engine()
    feed(eng, [cmd("new_shoe", 0, "n"), read("2c", 1)])
    eng.handle(ReadFailed(2))
    assert eng.handle(_camera("Kd", 3, None)) == []
    assert eng.snapshot()["rescan_needed"] is True


# ---------------------------------------------------------------- reader signals


def test_reader_errors_raise_and_clear_alerts() -> None:
    eng = engine()
    raised = eng.handle(ReaderSignal(ReaderSignalKind.ERROR_RAISED, 1, code=3))
    assert kinds(raised) == ["reader_status", "alert_raised"]
    cleared = eng.handle(ReaderSignal(ReaderSignalKind.ERROR_CLEARED, 2, code=3))
    assert kinds(cleared) == ["reader_status", "alert_cleared"]
    assert eng.snapshot()["alerts"] == []


def test_a_reader_redeal_holds_the_round_in_progress() -> None:
    eng = engine()
    start_shoe(eng)
    eng.handle(read("9s", 100))
    out = eng.handle(ReaderSignal(ReaderSignalKind.REDEAL, 101))
    assert alerts(out, "reader_redeal")[0].data["holds"] == 1


# ---------------------------------------------------------------- commands


def test_commands_are_validated_and_always_answered() -> None:
    eng = engine()
    start_shoe(eng)
    cases: dict[str, dict[str, Any]] = {
        "bogus": {},
        "lock": {"device": "shoe-2"},
        "void_round": {"hand": "one"},
        "assign_card": {"card": "Zz"},
        "new_shoe": {"shoe_id": "bad id!"},
        "swap": {"a": "P1"},
        "rearrange": {"cards": {"Q9": "9s"}},
        "acknowledge_alert": {"alert_id": "S1:a999"},
        "super_round_die": {"value": 3},
    }
    for k, (action, args) in enumerate(cases.items()):
        (reply,) = eng.handle(cmd(action, 200 + k, f"c{k}", **args))
        assert reply.kind == "command_refused", action
        assert reply.data["command_id"] == f"c{k}"
        assert reply.data["reason"], action
    assert "unknown argument" in eng.handle(cmd("unlock", 300, "l", now=True))[0].data["reason"]
    assert "unknown argument" in eng.handle(cmd("rescan_ack", 301, "r", now=True))[0].data["reason"]


def test_lock_and_unlock_are_accepted_audited_and_handed_to_the_service() -> None:
    eng = engine()
    events = start_shoe(eng)
    out = eng.handle(cmd("lock", 300, "lk-1"))
    assert [(e.kind, e.data) for e in out] == [
        ("command_accepted", {"command_id": "lk-1", "action": "lock", "actor": "floor-1", "reason": None}),
        ("reader_command_requested", {"action": "lock", "command_id": "lk-1", "actor": "floor-1"}),
    ]
    answer = eng.handle(ReaderSignal(ReaderSignalKind.LOCKED, 300.2, command_id="lk-1"))
    assert [e.data["kind"] for e in answer] == ["locked"]
    assert answer[0].data["command_id"] == "lk-1"
    out += answer
    out += eng.handle(cmd("unlock", 301, "ul-1"))
    assert of_kind(out, "reader_command_requested")[-1].data["action"] == "unlock"
    refused = eng.handle(
        ReaderSignal(ReaderSignalKind.COMMAND_REFUSED, 301.1, detail="reader: NAK", command_id="ul-1")
    )
    out += refused
    assert kinds(refused) == ["reader_status", "alert_raised"]
    (alert,) = alerts(refused, "reader_command_refused")
    assert alert.data["details"] == {"reader_code": None, "detail": "reader: NAK", "command_id": "ul-1"}
    assert_restores(eng, events + out)


def test_new_shoe_is_refused_while_a_round_is_in_progress() -> None:
    eng = engine()
    start_shoe(eng)
    eng.handle(read("9s", 100))
    assert "in progress" in eng.handle(cmd("new_shoe", 101, "n2"))[0].data["reason"]


def test_assign_card_supplies_the_next_slot_and_checks_composition() -> None:
    eng = engine(decks=1)
    start_shoe(eng)
    eng.handle(read("9s", 100))
    wrong_slot = eng.handle(cmd("assign_card", 101, "a", card="2h", slot="P2"))
    assert "goes to B1" in wrong_slot[0].data["reason"]
    over = eng.handle(cmd("assign_card", 101, "b", card="9s"))
    assert "already appeared" in over[0].data["reason"]
    ok = eng.handle(cmd("assign_card", 102, "c", card="2h", slot="B1"))
    assert kinds(ok) == ["command_accepted", "card_dealt"]


def test_super_98_rounds_wait_for_the_die() -> None:
    eng = engine("super-98")
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    (held,) = of_kind(events, "round_held")
    assert "awaiting the super-round die" in held.data["blocked_by"]
    out = eng.handle(cmd("super_round_die", 110, "d", hand=1, value=9))
    assert kinds(out) == ["command_accepted", "super_round_die", "round_completed"]
    assert out[-1].data["super_round_die"] == 9
    late = eng.handle(cmd("super_round_die", 111, "d2", hand=1, value=8))
    assert "not in progress, held or next" in late[0].data["reason"]
    events += late
    assert_restores(eng, events + out)


def test_void_of_the_last_completed_round_is_recorded() -> None:
    eng = engine()
    start_shoe(eng)
    feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    out = eng.handle(cmd("void_round", 120, "v", hand=1, reason="verdict was right"))
    assert kinds(out) == ["command_accepted", "round_voided"]
    assert out[1].data["was_completed"] is True
    again = eng.handle(cmd("void_round", 121, "v2", hand=1))
    assert kinds(again) == ["command_refused"]


# ---------------------------------------------------------------- settings, events, snapshot


def test_settings_refuse_unknown_keys_and_bad_values_naming_the_field() -> None:
    with pytest.raises(ValidationError) as bad_key:
        TableSettings.model_validate({"decks": 8, "burn": {"indicator_count": True}})
    assert "burn.indicator_count" in str(bad_key.value)
    with pytest.raises(ValidationError) as bad_value:
        TableSettings.model_validate({"decks": 9})
    assert "decks" in str(bad_value.value)
    with pytest.raises(ValidationError):
        TableSettings.model_validate({"cut_card_policy": "whenever"})


def test_event_round_trip_and_validation() -> None:
    event = Event(EventKind.CARD_DEALT, 1.5, "S1", 3, "reader", {"card": "8s", "slot": "P1"})
    assert Event.from_dict(json.loads(json.dumps(event.to_dict()))) == event
    for broken, field in [
        ({"kind": "", "at": 1, "shoe_id": None, "hand": None, "source": "x", "data": {}}, "kind"),
        ({"kind": "no_such_kind", "at": 1, "shoe_id": None, "hand": None, "source": "x", "data": {}}, "kind"),
        ({"kind": "card_dealt", "at": "1", "shoe_id": None, "hand": None, "source": "x", "data": {}}, "at"),
        (
            {
                "kind": "card_dealt",
                "at": float("nan"),
                "shoe_id": None,
                "hand": None,
                "source": "x",
                "data": {},
            },
            "at",
        ),
        ({"kind": "card_dealt", "at": 1, "shoe_id": None, "hand": 0, "source": "x", "data": {}}, "hand"),
        ({"kind": "card_dealt", "at": 1, "shoe_id": None, "hand": None, "source": "x", "data": []}, "data"),
        ({"kind": "k"}, "missing"),
    ]:
        with pytest.raises(ValueError, match=field):
            Event.from_dict(broken)


def test_snapshot_is_json_ready_and_shows_the_round_in_progress() -> None:
    eng = engine()
    start_shoe(eng)
    feed(eng, [read("9s", 100), read("2h", 101)])
    eng.handle(ReadFailed(102))
    snap = json.loads(json.dumps(eng.snapshot()))
    assert snap["round"]["cards"] == {"P1": "9s", "B1": "2h"}
    assert snap["round"]["next_slot"] == "P2"
    assert snap["offered_bets"]["hand"] == 1
    assert snap["rescan_needed"] is True
    assert [a["code"] for a in snap["alerts"]] == ["rescan_needed"]


def test_camera_checks_the_decided_round_only_just_after_it_and_then_sees_the_next_round() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    late = eng.handle(_camera("3h", 104, "B2"))  # the deciding card, seen late, differently
    assert alerts(late, "camera_disagreement")[0].data["details"]["round_already_completed"] is True
    # Much later the camera sees the next round's first card in the P1 box: not round 1's business.
    assert eng.handle(_camera("5c", 130, "P1")) == []
    assert_restores(eng, events + late)


def test_an_input_without_a_finite_time_is_refused_with_an_alert() -> None:
    eng = engine()
    events = start_shoe(eng)
    for bad in (float("nan"), float("inf")):
        out = eng.handle(read("9s", bad))
        assert [a.data["code"] for a in alerts(out)] == ["invalid_input"]
        assert out[0].at == 3.0  # the last good input's time
        events += out
    assert eng.snapshot()["round"] is None
    camera_nan = eng.handle(_camera("9s", 10, "P1", confidence=float("nan")))
    assert camera_nan == []
    reader_nan = eng.handle(read("9s", 11, confidence=float("nan")))
    assert reader_nan[-1].data["read"]["confidence"] is None
    json.dumps([e.to_dict() for e in reader_nan], allow_nan=False)
    events += reader_nan
    assert_restores(eng, events)


def test_a_hold_carried_to_the_next_round_ends_with_that_round_when_voided() -> None:
    eng = engine()
    events = feed(eng, [cmd("new_shoe", 0, "n"), read("2c", 1), read("Kd", 2)])
    events += eng.handle(read("Kh", 3, target=DeviceTarget.P1))
    (alert,) = alerts(events, "device_disagreement")
    events += feed(eng, [read("9s", 10), read("2h", 11)])
    void = eng.handle(cmd("void_round", 12, "v", reason="burn mistake"))
    events += void
    assert [e.data["alert_id"] for e in of_kind(void, "alert_cleared")] == [alert.data["alert_id"]]
    assert eng.snapshot()["alerts"] == []
    assert_restores(eng, events)


def test_voiding_a_completed_round_settles_the_alerts_raised_about_it() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    events += eng.handle(ShoeVerdict(VerdictOutcome.BANKER, False, False, 105))
    void = eng.handle(cmd("void_round", 110, "v", hand=1, reason="the shoe was right"))
    assert kinds(void) == ["command_accepted", "alert_cleared", "round_voided"]
    assert_restores(eng, events + void)


def test_the_device_never_starts_a_shoe_over_held_rounds() -> None:
    eng = engine(device_starts_shoe=True, await_device_verdict=True)
    events = start_shoe(eng)
    events += feed(eng, [read("3c", 100), CutCardDrawn(100.5)])
    events += feed(eng, [read(c, 101 + k) for k, c in enumerate(("2d", "4h", "2s", "5h"))])
    assert eng.snapshot()["shoe"]["phase"] == "over"
    assert len(eng.snapshot()["held_rounds"]) == 1
    out = eng.handle(read("7c", 130, target=DeviceTarget.FIRST_CARD))
    assert [a.data["code"] for a in alerts(out)] == ["card_after_last_round"]
    assert len(eng.snapshot()["held_rounds"]) == 1
    assert_restores(eng, events + out)
