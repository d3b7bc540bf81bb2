"""One test per numbered case of daemon/rules/RULES.md "Dealing mistakes and how they resolve"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.inputs import CardRead, DeviceTarget, ReadFailed, ShoeVerdict, Tick, VerdictOutcome
from daemon.engine.events import Event
from daemon.engine.table import Engine
from tests.engine.support import (
    ROUND_ORDER,
    alerts,
    assert_legal,
    assert_restores,
    cmd,
    engine,
    feed,
    kinds,
    of_kind,
    read,
    roundtrip,
    start_shoe,
)

# A Player natural: P 9+K = 9, B 2+3 = 5; decided after four cards.
NATURAL = ("9s", "2h", "Kc", "3d")
# Player 3+4 = 7 stands; Banker 2+2 = 4 draws; 5h makes it 9.
BANKER_DRAWS = ("3c", "2d", "4h", "2s", "5h")


def _deal(eng: Engine, cards: Sequence[str], at: float, step: float = 1.0, **kw: Any) -> list[Event]:
    return feed(eng, [read(c, at + k * step, **kw) for k, c in enumerate(cards)])


def test_case_1_one_unneeded_card_becomes_next_rounds_burn() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    (completed,) = of_kind(events, "round_completed")
    extra = _deal(eng, ["7c"], 103.5)  # drawn right after the deciding card
    events += extra
    dealt = of_kind(extra, "card_dealt")[0]
    assert dealt.data["slot"] == "burn"
    assert dealt.data["burn"] == "unneeded"
    (alert,) = alerts(extra, "unneeded_card")
    assert alert.data["details"]["became"] == "the next round's burn card"
    assert "round_completed" not in kinds(extra)
    assert "round_corrected" not in kinds(extra)
    # The next round starts with Player 1: the unneeded card was its burn.
    nxt = _deal(eng, ["8d"], 130)
    events += nxt
    assert kinds(nxt) == ["round_opened", "card_dealt"]
    assert nxt[1].data["slot"] == "P1"
    assert nxt[1].hand == 2
    assert completed.data["outcome"]["winner"] == "player"
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_1_one_unneeded_card_holds_the_next_round_until_acknowledged_then_it_settles_as_dealt() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    extra = _deal(eng, ["7c"], 103.5)
    (alert,) = alerts(extra, "unneeded_card")
    assert alert.data["holds"] == "next_round"
    events += extra
    nxt = _deal(eng, BANKER_DRAWS, 130)
    events += nxt
    (held,) = of_kind(nxt, "round_held")
    assert held.data["blocked_by"] == [f"alert {alert.data['alert_id']}"]
    assert "round_completed" not in kinds(nxt)
    assert of_kind(nxt, "bets_offered")[-1].data["hand"] == 3  # the game goes on meanwhile
    ack = eng.handle(cmd("acknowledge_alert", 140, "ack", alert_id=alert.data["alert_id"]))
    events += ack
    assert kinds(ack) == ["command_accepted", "alert_cleared", "round_completed"]
    assert ack[1].data["reason"] == "acknowledged"
    (settled,) = of_kind(ack, "round_completed")
    assert (settled.hand, list(settled.data["cards"].values())) == (2, list(BANKER_DRAWS))
    assert settled.data["outcome"]["winner"] == "banker"  # B 2+2+5 = 9 over P 3+4 = 7, as dealt
    assert settled.data["corrected"] is False
    # The round the card followed was never touched.
    assert [e.hand for e in of_kind(events, "round_completed")] == [1, 2]
    assert of_kind(events, "round_corrected") == []
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_1_acknowledged_before_the_next_round_is_decided_it_completes_at_once() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    events += _deal(eng, ["7c"], 103.5)
    events += _deal(eng, BANKER_DRAWS[:2], 130)
    events += eng.handle(cmd("acknowledge_alert", 131.5, "ack", alert_id="S1:a1"))
    rest = _deal(eng, BANKER_DRAWS[2:], 132)
    events += rest
    assert "round_held" not in kinds(rest)
    assert [e.hand for e in of_kind(rest, "round_completed")] == [2]
    assert_restores(eng, events)


def test_case_1_real_player_one_in_the_window_taken_as_burn_is_held_and_a_correction_settles_it_right() -> (
    None
):
    """A fast dealer's real Player 1 read 1 s after the deciding card is taken as an unneeded
    burn; every later card of that round sits one slot early. The round is held, never settled
    shifted; the supervisor's correction (one deck: the burned card is not counted twice) gives
    the round that was dealt."""
    real = {"P1": "8d", "B1": "2s", "P2": "Ks", "B2": "3h"}  # P 8 natural, B 5
    clean = engine(decks=1)
    start_shoe(clean)
    _deal(clean, NATURAL, 100)
    (want,) = of_kind(_deal(clean, list(real.values()), 130), "round_completed")

    eng = engine(decks=1)
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    events += _deal(eng, ["8d"], 104.0)  # the real P1, inside the window
    events += _deal(eng, ["2s", "Ks", "3h"], 106.0)  # B1 P2 B2, outside it
    assert [e.data["burn"] for e in of_kind(events, "card_dealt") if e.data.get("burn") == "unneeded"] == [
        "unneeded"
    ]
    assert eng.snapshot()["round"]["cards"] == {"P1": "2s", "B1": "Ks", "P2": "3h"}  # shifted
    assert eng.snapshot()["round"]["blocked_by"] == ["alert S1:a1"]
    fix = eng.handle(cmd("rearrange", 110, "fix", hand=2, cards=real))
    events += fix
    assert kinds(fix)[:2] == ["command_accepted", "round_corrected"]
    corrected = of_kind(fix, "round_corrected")[0].data
    assert (corrected["supplied"], corrected["from_unneeded_burn"]) == (["P1"], ["P1"])
    assert [(e.data["code"], e.data["reason"]) for e in of_kind(fix, "alert_cleared")] == [
        ("unneeded_card", "corrected")
    ]
    (settled,) = of_kind(fix, "round_completed")
    assert settled.data["cards"] == want.data["cards"] == real
    assert settled.data["outcome"] == want.data["outcome"]
    assert settled.data["bets"] == want.data["bets"]
    assert settled.data["corrected"] is True
    assert eng.snapshot()["shoe"]["cards_out"] == clean.snapshot()["shoe"]["cards_out"]
    assert eng.state.counts == clean.state.counts
    assert [e.hand for e in of_kind(events, "round_completed")] == [1, 2]
    assert_legal(events, 1)
    assert_restores(eng, events)


def test_case_1_voiding_the_round_before_keeps_the_hold_voiding_the_held_round_clears_it() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    events += _deal(eng, ["7c"], 103.5)
    before = eng.handle(cmd("void_round", 110, "v1", hand=1, reason="exposed card"))
    events += before
    assert kinds(before) == ["command_accepted", "round_voided"]  # the unneeded card is not about round 1
    assert eng.state.next_round_holds == ["S1:a1"]
    events += _deal(eng, BANKER_DRAWS, 130)
    assert sorted(eng.state.held) == [2]
    void = eng.handle(cmd("void_round", 141, "v2", hand=2, reason="dealer error"))
    events += void
    assert kinds(void) == ["command_accepted", "alert_cleared", "round_voided"]
    assert eng.state.alerts == {}
    assert eng.state.held == {}
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_2_two_unneeded_cards_burn_then_next_player_one() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    extra = _deal(eng, ["7c", "6d"], 103.4, step=0.3)
    events += extra
    first, second = of_kind(extra, "card_dealt")
    assert (first.data["slot"], first.data["burn"]) == ("burn", "unneeded")
    assert (second.data["slot"], second.hand, second.data["unneeded"]) == ("P1", 2, True)
    assert [a.data["details"]["became"] for a in alerts(extra, "unneeded_card")] == [
        "the next round's burn card",
        "the next round's Player 1",
    ]
    # Round 1's result is untouched; round 2 goes on from Banker 1.
    assert len(of_kind(events, "round_completed")) == 1
    rest = _deal(eng, ["Ah", "Kd", "Ks"], 130)  # B1 P2 B2: P 6+K = 6, B 1+0+0 = 1
    events += rest
    assert [e.data["slot"] for e in of_kind(rest, "card_dealt")] == ["B1", "P2", "B2"]
    assert eng.snapshot()["round"]["cards"] == {"P1": "6d", "B1": "Ah", "P2": "Kd", "B2": "Ks"}
    # Both alerts hold round 2 (under supervisor watch): decided, it is held until both are answered.
    first_alert, second_alert = (a.data["alert_id"] for a in alerts(extra, "unneeded_card"))
    last = _deal(eng, ["4c"], 133)  # B3
    events += last
    assert [e.hand for e in of_kind(last, "round_held")] == [2]
    one = eng.handle(cmd("acknowledge_alert", 140, "a1", alert_id=first_alert))
    assert kinds(one) == ["command_accepted", "alert_cleared"]
    two = eng.handle(cmd("acknowledge_alert", 141, "a2", alert_id=second_alert))
    assert kinds(two) == ["command_accepted", "alert_cleared", "round_completed"]
    events += one + two
    assert of_kind(two, "round_completed")[0].data["cards"] == {
        "P1": "6d", "B1": "Ah", "P2": "Kd", "B2": "Ks", "B3": "4c"
    }  # fmt: skip
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_3_cards_pulled_together_are_ordered_by_position_not_arrival() -> None:
    in_order = engine()
    start_shoe(in_order)
    expected = of_kind(_deal(in_order, BANKER_DRAWS, 100), "round_completed")[0]

    eng = engine()
    events = start_shoe(eng)
    # Three cards out together, reported bottom card first: positions 3, 1, 2.
    pull = [("4h", 3), ("3c", 1), ("2d", 2)]
    for k, (code, pos) in enumerate(pull):
        events += eng.handle(read(code, 100 + k * 0.01, position=pos))
    dealt = of_kind(events, "card_dealt")[-3:]
    assert [(e.data["slot"], e.data["card"]) for e in dealt] == [("P1", "3c"), ("B1", "2d"), ("P2", "4h")]
    assert "read_held" in kinds(events)
    # Two more together, in order: processed at once, no hold (only a pull costs latency).
    tail = feed(eng, [read("2s", 102, position=1), read("5h", 102.01, position=2)])
    assert "read_held" not in kinds(tail)
    events += tail
    (completed,) = of_kind(events, "round_completed")
    assert completed.data["outcome"] == expected.data["outcome"]
    assert completed.data["cards"] == expected.data["cards"]
    assert_restores(eng, events)


def test_case_3_and_5_a_pull_whose_top_card_never_arrives_is_missing_not_guessed() -> None:
    """Positions 3 and 2 arrive, 1 never does: when the window ends the held cards are not placed
    as P1/B1 (that would shift the round); the top card's slot waits (``rescan_needed``) and
    ``missing_card`` holds the round until a supervisor confirms it."""
    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    events += feed(eng, [read("2d", 100.0, position=3), read("3c", 100.01, position=2)])
    assert of_kind(events, "round_opened") == []
    assert eng.snapshot()["reads_waiting_in_pull"] == 2
    mid = eng.handle(Tick(100.2))
    assert mid == []
    events += mid
    late = eng.handle(Tick(100.31))
    events += late
    assert of_kind(late, "card_dealt") == []
    missing, rescan = alerts(late)
    assert missing.data["code"] == "missing_card"
    assert missing.data["holds"] == "next_round"
    assert missing.data["details"]["missing_position"] == 1
    assert rescan.data["code"] == "rescan_needed"
    assert eng.snapshot()["reads_waiting_in_pull"] == 2
    assert eng.handle(Tick(101.0)) == []  # nothing moves before the missing card
    # The dealer rescans the top card: it takes P1, the held cards follow in position order.
    found = eng.handle(read("4h", 102.0))
    events += found
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(found, "card_dealt")] == [
        ("P1", "4h"),
        ("B1", "3c"),
        ("P2", "2d"),
    ]
    events += _deal(eng, ["2s"], 103)  # B2: P 4+2 = 6 stands, B 3+2 = 5 draws
    events += _deal(eng, ["5h"], 104)  # B3
    assert of_kind(events, "round_completed") == []
    assert of_kind(events, "round_held")[0].data["cards"] == {
        "P1": "4h",
        "B1": "3c",
        "P2": "2d",
        "B2": "2s",
        "B3": "5h",
    }
    events += eng.handle(cmd("resolve_hold", 110, "ok"))
    assert len(of_kind(events, "round_completed")) == 1
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_3_and_5_the_card_that_ends_a_pulls_window_is_the_missing_card_and_the_pull_follows_it() -> None:
    """The read that makes the window run out (no tick in between) is taken as the missing top
    card, and the cards held below it follow at once, in position order."""
    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    events += feed(eng, [read("2d", 100.0, position=3), read("3c", 100.01, position=2)])
    out = eng.handle(read("4h", 101.0))
    events += out
    assert [a.data["code"] for a in alerts(out)] == ["missing_card", "rescan_needed"]
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(out, "card_dealt")] == [
        ("P1", "4h"),
        ("B1", "3c"),
        ("P2", "2d"),
    ]
    assert eng.snapshot()["reads_waiting_in_pull"] == 0
    assert_restores(eng, events)


def _targeted(cards: Sequence[tuple[str, str, float]]) -> list[CardRead]:
    """Reads from a shoe that names each card's slot (Angel Eye target/index), no position."""
    return [read(code, at, target=DeviceTarget(slot), transmission_id=f"t{at}") for code, slot, at in cards]


def test_case_3_a_pull_from_a_shoe_naming_slots_is_ordered_by_its_targets_not_arrival() -> None:
    in_order = engine()
    start_shoe(in_order)
    expected = of_kind(_deal(in_order, BANKER_DRAWS, 100), "round_completed")[0]

    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    # P1 and B1 pulled together, the lower card (B1) reported first.
    events += feed(eng, _targeted([("2d", "B1", 100.0), ("3c", "P1", 100.05)]))
    # P2, B2 and B3 pulled together, reported bottom card first: B3, P2, B2.
    events += feed(eng, _targeted([("5h", "B3", 102.0), ("4h", "P2", 102.05), ("2s", "B2", 102.1)]))
    assert alerts(events) == []
    held = of_kind(events, "read_held")
    assert [(e.data["read"]["card"], e.data["expected_slot"]) for e in held] == [("2d", "P1"), ("5h", "P2")]
    assert {e.data["reason"] for e in of_kind(events, "pull_released")} == {"by_target"}
    dealt = [(e.data["slot"], e.data["card"]) for e in of_kind(events, "card_dealt")][-5:]
    assert dealt == [("P1", "3c"), ("B1", "2d"), ("P2", "4h"), ("B2", "2s"), ("B3", "5h")]
    (completed,) = of_kind(events, "round_completed")
    assert completed.data["cards"] == expected.data["cards"]
    assert completed.data["outcome"] == expected.data["outcome"]
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_3_a_slot_named_out_of_turn_waits_for_the_cards_above_it_and_survives_a_restart() -> None:
    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    events += feed(eng, _targeted([("3c", "P1", 100.0), ("2d", "B1", 101.0), ("2s", "B2", 102.0)]))
    assert eng.snapshot()["reads_waiting_in_pull"] == 1
    assert eng.snapshot()["round"]["cards"] == {"P1": "3c", "B1": "2d"}
    # The engine resumes from its events with the card still waiting for Player 2.
    resumed = Engine.restore(eng.settings, eng.variant, roundtrip(events))
    rest = resumed.handle(_targeted([("4h", "P2", 102.1)])[0])
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(rest, "card_dealt")] == [
        ("P2", "4h"),
        ("B2", "2s"),
    ]
    assert alerts(rest) == []
    assert_restores(resumed, events + rest)


def test_case_3_a_target_that_is_not_an_expected_slot_stays_a_disagreement_and_holds_the_round() -> None:
    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    events += feed(eng, _targeted([("3c", "P1", 100.0), ("2d", "B1", 101.0)]))
    # B2 comes first; the card after it names B1 again, not the Player 2 the pull needs.
    pull = feed(eng, _targeted([("2s", "B2", 102.0), ("4h", "B1", 102.05)]))
    events += pull
    assert [e.data["reason"] for e in of_kind(pull, "pull_released")] == ["interleaved"]
    # Arrival order, each card checked against the draw order: both disagree, the round waits.
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(pull, "card_dealt")] == [
        ("P2", "2s"),
        ("B2", "4h"),
    ]
    found = [(a.data["details"]["engine_slot"], a.data["details"]["device_target"]) for a in alerts(pull)]
    assert found == [("P2", "B2"), ("B2", "B1")]
    assert all(a.data["code"] == "device_disagreement" and a.data["holds"] == 1 for a in alerts(pull))
    events += _deal(eng, ["5h"], 103)  # P 3+2 = 5 draws; B 2+4 = 6 stands on a 5
    assert of_kind(events, "round_held")
    assert of_kind(events, "round_completed") == []
    assert_restores(eng, events)


def test_case_3_and_6_a_card_naming_a_later_slot_waits_for_the_rescan_of_an_unread_card_above_it() -> None:
    for order in ("card_first", "misread_first"):
        eng = engine(pull_hold_window_s=0.3)
        events = start_shoe(eng)
        events += feed(eng, _targeted([("3c", "P1", 100.0), ("2d", "B1", 101.0)]))
        # P2 and B2 pulled together; P2 cannot be read; B2 comes before or after the misread.
        below = _targeted([("2s", "B2", 102.05)])[0]
        unread = ReadFailed(102.0, code=1)
        pull: list[CardRead | ReadFailed] = [below, unread] if order == "card_first" else [unread, below]
        events += feed(eng, pull)
        assert eng.snapshot()["reads_waiting_in_pull"] == 1, order
        assert eng.snapshot()["rescan_needed"] is True
        events += feed(eng, [Tick(103.0)])  # the window does not run out a rescan
        assert eng.snapshot()["reads_waiting_in_pull"] == 1
        rescan = eng.handle(_targeted([("4h", "P2", 104.0)])[0])
        events += rescan
        assert [(e.data["slot"], e.data["card"]) for e in of_kind(rescan, "card_dealt")] == [
            ("P2", "4h"),
            ("B2", "2s"),
        ], order
        assert [e.data["reason"] for e in of_kind(events, "alert_cleared")] == ["rescanned"]
        assert [a.data["code"] for a in alerts(events)] == ["rescan_needed"]
        assert_restores(eng, events)


def test_case_3_a_slot_named_out_of_turn_alone_is_released_when_the_window_ends() -> None:
    eng = engine(pull_hold_window_s=0.3)
    events = start_shoe(eng)
    events += feed(eng, _targeted([("3c", "P1", 100.0), ("2d", "B1", 101.0), ("2s", "B2", 102.0)]))
    assert eng.handle(Tick(102.2)) == []
    late = eng.handle(Tick(102.31))
    events += late
    assert [e.data["reason"] for e in of_kind(late, "pull_released")] == ["window"]
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(late, "card_dealt")] == [("P2", "2s")]
    (alert,) = alerts(late)
    assert (alert.data["code"], alert.data["holds"]) == ("device_disagreement", 1)
    assert_restores(eng, events)


def test_case_3_a_slot_named_in_turn_is_never_held() -> None:
    eng = engine(pull_hold_window_s=5.0)
    events = start_shoe(eng)
    out = feed(
        eng, _targeted([(c, s, 100 + k) for k, (c, s) in enumerate(zip(NATURAL, ROUND_ORDER, strict=False))])
    )
    assert "read_held" not in kinds(out)
    assert of_kind(out, "round_completed")
    assert_restores(eng, events + out)


def test_case_4_cards_in_the_wrong_boxes_result_by_draw_order_after_supervisor() -> None:
    eng = engine()
    events = start_shoe(eng)
    # The shoe reports where the dealer put each card: Player's and Banker's boxes swapped.
    boxes = [DeviceTarget.B1, DeviceTarget.P1, DeviceTarget.B2, DeviceTarget.P2]
    for k, (code, box) in enumerate(zip(NATURAL, boxes, strict=True)):
        events += eng.handle(read(code, 100 + k, target=box))
    assert len(alerts(events, "device_disagreement")) == 4
    held = of_kind(events, "round_held")
    assert len(held) == 1
    assert of_kind(events, "round_completed") == []
    assert eng.snapshot()["held_rounds"][0]["hand"] == 1
    # The game goes on; the supervisor decides: the draw order stands.
    decision = eng.handle(cmd("resolve_hold", 120, "r1", hand=1))
    events += decision
    assert decision[0].kind == "command_accepted"
    (completed,) = of_kind(decision, "round_completed")
    assert completed.data["cards"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert completed.data["outcome"]["winner"] == "player"
    assert [e.data["reason"] for e in of_kind(decision, "alert_cleared")] == ["hold resolved"] * 4
    assert eng.snapshot()["held_rounds"] == []
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_4_a_supervisor_swap_of_the_boxes_is_validated_and_recorded() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(read("9s", 100, target=DeviceTarget.B1))
    events += _deal(eng, NATURAL[1:], 101)
    assert of_kind(events, "round_held")
    swap = eng.handle(cmd("swap", 110, "s1", hand=1, sides=True))
    events += swap
    assert swap[0].kind == "command_accepted"
    (corrected,) = of_kind(swap, "round_corrected")
    assert corrected.data["before"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert corrected.data["after"] == {"P1": "2h", "B1": "9s", "P2": "3d", "B2": "Kc"}
    assert (corrected.data["actor"], corrected.data["command_id"]) == ("floor-1", "s1")
    assert of_kind(swap, "round_completed") == []  # still held until the supervisor resolves it
    done = eng.handle(cmd("resolve_hold", 111, "r1", hand=1))
    events += done
    (completed,) = of_kind(done, "round_completed")
    assert completed.data["outcome"]["winner"] == "banker"
    assert completed.data["corrected"] is True
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_4_an_illegal_swap_is_refused_with_the_reason() -> None:
    eng = engine()
    start_shoe(eng)
    _deal(eng, ("9s", "2h", "Kc"), 100)
    refused = eng.handle(cmd("swap", 104, "s1", a="P1", b="B2"))
    assert kinds(refused) == ["command_refused"]
    assert "filled slots" in refused[0].data["reason"]


def test_case_5_a_card_not_scanned_is_supplied_by_the_supervisor_never_guessed() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, BANKER_DRAWS[:4], 100)  # P 7 stands, B 4 must draw: B3 never scanned
    verdict = eng.handle(ShoeVerdict(VerdictOutcome.BANKER, False, False, 106))
    events += verdict
    (missing,) = alerts(verdict, "missing_card")
    assert missing.data["details"]["needed_slot"] == "B3"
    assert missing.data["holds"] == 1
    supplied = eng.handle(cmd("assign_card", 110, "a1", card="5h", slot="B3"))
    events += supplied
    assert supplied[0].kind == "command_accepted"
    dealt = of_kind(supplied, "card_dealt")[0]
    assert (dealt.data["slot"], dealt.data["source"], dealt.data["actor"]) == ("B3", "supervisor", "floor-1")
    assert of_kind(supplied, "round_held")  # still held: the missing-card alert awaits the supervisor
    done = eng.handle(cmd("resolve_hold", 111, "r1"))
    events += done
    (completed,) = of_kind(done, "round_completed")
    assert completed.data["outcome"]["winner"] == "banker"
    assert completed.data["sources"]["B3"] == "supervisor"
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_5_cards_shifted_by_an_unscanned_card_are_rearranged_by_the_supervisor() -> None:
    eng = engine(await_device_verdict=True)
    events = start_shoe(eng)
    # B2 (2s) was not scanned: the engine puts the Banker's third card (5h) in B2.
    events += _deal(eng, ("3c", "2d", "4h", "5h"), 100)
    held = of_kind(events, "round_held")
    assert held
    assert held[0].data["awaiting_verdict"]
    verdict = eng.handle(ShoeVerdict(VerdictOutcome.BANKER, False, False, 106))
    events += verdict
    assert of_kind(verdict, "verdict_checked")[0].data["agrees"] is False
    assert alerts(verdict, "verdict_disagreement")
    fix = eng.handle(
        cmd(
            "rearrange",
            110,
            "fix",
            hand=1,
            cards={"P1": "3c", "B1": "2d", "P2": "4h", "B2": "2s", "B3": "5h"},
        )
    )
    events += fix
    (corrected,) = of_kind(fix, "round_corrected")
    assert corrected.data["supplied"] == ["B2"]
    assert corrected.data["removed"] == []
    done = eng.handle(cmd("resolve_hold", 111, "r1", hand=1))
    events += done
    (completed,) = of_kind(done, "round_completed")
    assert completed.data["cards"]["B3"] == "5h"
    assert completed.data["outcome"]["winner"] == "banker"
    assert completed.data["corrected"] is True
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_case_6_a_misread_accepts_no_card_until_a_valid_rescan() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, ("3c", "2d"), 100)
    failed = eng.handle(ReadFailed(102, reason="cannot read", code=1))
    events += failed
    (alert,) = alerts(failed, "rescan_needed")
    assert eng.snapshot()["rescan_needed"] is True
    assert of_kind(failed, "card_dealt") == []
    again = eng.handle(ReadFailed(103))  # the rescan fails too: still one alert, no card
    assert again == []
    rescan = eng.handle(read("4h", 104))
    events += again + rescan
    assert of_kind(rescan, "card_dealt")[0].data["slot"] == "P2"
    (cleared,) = of_kind(rescan, "alert_cleared")
    assert (cleared.data["alert_id"], cleared.data["reason"]) == (alert.data["alert_id"], "rescanned")
    assert eng.snapshot()["rescan_needed"] is False
    assert_restores(eng, events)


def test_case_6_cards_below_a_misread_card_in_a_pull_wait_for_its_rescan() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(ReadFailed(100, position=1))
    events += eng.handle(read("2d", 100.01, position=2))
    events += eng.handle(Tick(105))  # the window ends, but nothing moves before the rescan
    assert of_kind(events, "card_dealt")[-1].data["slot"] == "burn"
    rescan = eng.handle(read("3c", 106))
    events += rescan
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(rescan, "card_dealt")] == [
        ("P1", "3c"),
        ("B1", "2d"),
    ]
    assert_restores(eng, events)


def test_case_6_a_supervisor_can_close_a_spurious_misread() -> None:
    eng = engine()
    start_shoe(eng)
    eng.handle(ReadFailed(100))
    out = eng.handle(cmd("rescan_ack", 101, "ack"))
    assert kinds(out) == ["command_accepted", "alert_cleared"]
    assert eng.handle(cmd("rescan_ack", 102, "ack2"))[0].kind == "command_refused"


def test_case_7_a_card_exposed_during_betting_voids_the_round() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, ("3c", "2d"), 100)
    void = eng.handle(cmd("void_round", 102, "v1", reason="card exposed during betting"))
    events += void
    assert kinds(void) == ["command_accepted", "round_voided", "bets_offered"]
    assert void[1].data["cards"] == {"P1": "3c", "B1": "2d"}
    assert void[1].data["reason"] == "card exposed during betting"
    assert void[2].data["hand"] == 2
    # The shoe continues with the next hand.
    nxt = _deal(eng, NATURAL, 130)
    events += nxt
    assert of_kind(nxt, "round_completed")[0].hand == 2
    assert_restores(eng, events)


def test_case_7_an_exposure_voiding_the_shoe_voids_the_round_in_progress_and_refuses_later_cards() -> None:
    """Seed 002: a card exposed during betting may void the shoe; the supervisor's void_shoe
    voids the round in progress, ends the shoe, later cards are refused until a new shoe.
    (A hand voided because a card left the camera's view is the void_round of the test above.)"""
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    events += _deal(eng, ("3c", "2d"), 130)
    void = eng.handle(cmd("void_shoe", 140, "vs", reason="card exposed (seed 002)"))
    events += void
    ended = ["shoe_voided", "shoe_ended", "shoe_certificate"]
    assert kinds(void) == ["command_accepted", "round_voided", *ended]
    assert void[-2].data["reason"] == "voided"
    refused = eng.handle(read("4h", 150))
    assert alerts(refused, "no_shoe")
    events += refused
    events += eng.handle(cmd("new_shoe", 160, "ns"))
    assert of_kind(events, "command_accepted")[-1].data["command_id"] == "ns"
    assert_restores(eng, events)


def test_case_8_network_failure_mid_round_the_engine_needs_no_network_and_resumes() -> None:
    """The engine does no I/O: a round goes on while the broker is away (delivery is issue 5).

    Here the daemon also restarts mid-round: folding the journaled events (through JSON)
    gives an engine that finishes the round exactly as an uninterrupted one.
    """
    straight = engine()
    expected = start_shoe(straight) + _deal(straight, BANKER_DRAWS, 100)

    eng = engine()
    before = start_shoe(eng) + _deal(eng, BANKER_DRAWS[:3], 100)
    resumed = type(eng).restore(eng.settings, eng.variant, roundtrip(before))
    after = _deal(resumed, BANKER_DRAWS[3:], 103)
    assert [e.to_dict() for e in before + after] == [e.to_dict() for e in expected]
