"""The next round is evidence (issue 21): with ``game_flow: betting_window``, betting opening for
the next round ends a round still short of cards: it is held, naming its cards and the slots it
lacks, and never completed with later cards."""

from __future__ import annotations

import pytest

from common.inputs import (
    BettingClosed,
    BettingOpened,
    GameFlowSource,
    ReadFailed,
    Tick,
)
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    bet,
    cmd,
    deal,
    feed,
    of_kind,
    start_shoe,
    window,
)

# P1 8, B1 2, P2 K, B2 3: Player 8 against Banker 5, no third card.
NATURAL = ("8c", "2d", "Kh", "3s")
NEXT = ("9c", "4d", "Qh", "2s")  # Player 9, Banker 6


# ---------------------------------------------------------------- the next round is evidence
def test_a_card_never_scanned_holds_the_round_when_the_next_round_opens() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "T1-1", 10)
    out += deal(eng, NATURAL[:3], 20)  # B2 never scanned (RULES.md mistake 5)
    out += bet(eng, "T1-2", 30)
    (cut,) = alerts(out, "round_cut_short")
    assert cut.data["hand"] == 1
    assert cut.data["holds"] == 1
    assert cut.data["details"] == {
        "round_id": "T1-1",
        "next_round_id": "T1-2",
        "cards": {"P1": "8c", "B1": "2d", "P2": "Kh"},
        "missing": ["B2"],
        "betting_source": "server",
    }
    (held,) = of_kind(out, "round_held")
    assert held.data["round_id"] == "T1-1"
    assert held.data["cards"] == {"P1": "8c", "B1": "2d", "P2": "Kh"}
    # the next round's cards are its own, never round 1's missing card
    out += deal(eng, NEXT, 40)
    completed = of_kind(out, "round_completed")
    assert [(e.hand, e.data["round_id"], e.data["cards"]) for e in completed] == [
        (2, "T1-2", {"P1": "9c", "B1": "4d", "P2": "Qh", "B2": "2s"})
    ]
    assert sorted(eng.state.held) == [1]
    # the supervisor supplies the missing card, then settles the round
    out += feed(eng, [cmd("assign_card", 50, "a", card="3s", hand=1)])
    out += feed(eng, [cmd("resolve_hold", 51, "r", hand=1)])
    last = of_kind(out, "round_completed")[-1]
    assert (last.hand, last.data["cards"]) == (1, dict(zip(("P1", "B1", "P2", "B2"), NATURAL, strict=True)))
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_round_cut_short_in_its_third_cards_names_the_slot_it_needs() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10)
    out += deal(eng, ("2c", "3d", "Kh", "Ks"), 20)  # Player 2, Banker 3: Player draws
    out += bet(eng, "2", 30)
    (cut,) = alerts(out, "round_cut_short")
    assert cut.data["details"]["missing"] == ["P3"]
    assert eng.state.phase == "ready"


def test_resolve_hold_of_a_round_cut_short_waits_for_its_missing_cards() -> None:
    eng = window()
    start_shoe(eng)
    bet(eng, "1", 10)
    deal(eng, NATURAL[:2], 20)
    bet(eng, "2", 30)
    refused = feed(eng, [cmd("resolve_hold", 40, "r", hand=1)])
    assert (
        refused[-1].data["reason"] == "held round 1 still needs P2: supply it with assign_card or rearrange"
    )


def test_a_pending_misread_in_a_round_cut_short_is_closed_by_it() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10)
    out += deal(eng, NATURAL[:2], 20)
    out += feed(eng, [ReadFailed(22, code=1)])
    assert eng.state.rescan_alert is not None
    out += bet(eng, "2", 30)
    assert eng.state.rescan_alert is None
    out += deal(eng, NEXT, 40)
    assert of_kind(out, "round_completed")[-1].data["cards"]["P1"] == "9c"
    assert_restores(eng, out)


@pytest.mark.parametrize("source", [GameFlowSource.BUTTON, GameFlowSource.SHOE_LOCK])
def test_a_button_or_the_shoe_lock_opening_betting_cuts_the_round_short(source: GameFlowSource) -> None:
    eng = window(betting={"source": source.value})
    out = start_shoe(eng)
    out += feed(eng, [BettingOpened(10, source, device="reader"), BettingClosed(15, source, device="reader")])
    out += deal(eng, NATURAL[:3], 20)
    out += feed(eng, [BettingOpened(30, source, device="reader")])
    (cut,) = alerts(out, "round_cut_short")
    assert cut.data["details"]["betting_source"] == source.value
    assert cut.data["details"]["next_round_id"] is None
    out += feed(eng, [BettingClosed(35, source, device="reader")])
    out += deal(eng, NEXT, 40)
    assert [e.hand for e in of_kind(out, "round_completed")] == [2]
    assert_restores(eng, out)


def test_the_last_round_cut_short_ends_the_shoe_and_opens_no_betting() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10)
    out += deal(eng, NATURAL[:2], 20)
    out += feed(eng, [cmd("cut_card", 21, "cut")])
    out += feed(eng, [cmd("open_betting", 30, "o", round_id="2")])
    assert [e.data["reason"] for e in of_kind(out, "shoe_ended")] == ["cut_card"]
    assert not of_kind(out, "betting_opened")[1:]
    assert [a.data["code"] for a in alerts(out)][-2:] == ["round_cut_short", "betting_out_of_order"]
    assert_restores(eng, out)


def test_an_open_repeating_the_round_in_progress_is_refused_and_cuts_nothing() -> None:
    eng = window()
    start_shoe(eng)
    bet(eng, "1", 10)
    deal(eng, NATURAL[:2], 20)
    events = feed(eng, [cmd("open_betting", 30, "o", round_id="1")])
    assert [a.data["code"] for a in alerts(events)] == ["round_id_out_of_sequence"]
    assert eng.state.phase == "round"


# ---------------------------------------------------------------- an empty window
def test_a_window_closed_without_a_card_raises_an_alert_naming_the_round_id() -> None:
    eng = window(betting={"empty_window_s": 30})
    out = start_shoe(eng)
    out += bet(eng, "T1-7", 10)  # closes at 15
    out += feed(eng, [Tick(44.0)])
    assert not alerts(out, "empty_betting_window")
    out += feed(eng, [Tick(45.0), Tick(50.0)])
    (empty,) = alerts(out, "empty_betting_window")
    assert empty.data["holds"] is None
    assert empty.data["details"] == {"round_id": "T1-7", "window": 1, "closed_at": 15.0, "waited_s": 30.0}
    out += deal(eng, NATURAL[:1], 60)
    (cleared,) = [e for e in out if e.kind == "alert_cleared" and e.data["code"] == "empty_betting_window"]
    assert cleared.data["reason"] == "the round's first card came"
    out += deal(eng, NATURAL[1:], 61)
    assert of_kind(out, "round_completed")[0].data["round_id"] == "T1-7"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_an_empty_window_alert_is_off_at_zero_and_never_raised_for_a_dealt_round() -> None:
    off = window(betting={"empty_window_s": 0})
    out = start_shoe(off) + bet(off, "1", 10) + feed(off, [Tick(1000.0)])
    assert not alerts(out, "empty_betting_window")
    on = window()
    out = start_shoe(on) + bet(on, "1", 10) + deal(on, NATURAL, 16) + feed(on, [Tick(1000.0)])
    assert not alerts(out, "empty_betting_window")


# ---------------------------------------------------------------- a silent shoe
def test_a_running_shoe_with_no_card_for_silent_shoe_s_alerts_until_the_next_card() -> None:
    eng = window(silent_shoe_s=120)
    out = start_shoe(eng)  # its last card at 3
    out += feed(eng, [Tick(122.0)])
    assert not alerts(out, "shoe_silent")
    out += feed(eng, [Tick(123.0), Tick(200.0)])
    (silent,) = alerts(out, "shoe_silent")
    assert silent.data["holds"] is None
    assert silent.data["details"] == {"last_card_at": 3.0, "silent_s": 120.0, "phase": "ready"}
    out += bet(eng, "1", 300) + deal(eng, NATURAL[:1], 310)
    (cleared,) = [e for e in out if e.kind == "alert_cleared" and e.data["code"] == "shoe_silent"]
    assert cleared.data["reason"] == "a card came"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_no_silent_shoe_alert_when_off_or_with_no_shoe_running() -> None:
    off = window(silent_shoe_s=0)
    out = start_shoe(off) + feed(off, [Tick(10_000.0)])
    idle = window()
    out += feed(idle, [Tick(10_000.0)])
    assert not alerts(out, "shoe_silent")
