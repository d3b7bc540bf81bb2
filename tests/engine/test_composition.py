"""A reader's card over the shoe's composition (the (N+1)-th exact card of an N-deck shoe).

It is physically on the layout, in the slot the draw order gives it: the engine refuses it
(daemon/rules/RULES.md: never accepted silently), keeps that slot waiting for a valid rescan like a misread
(no later card takes it), and holds the round for a supervisor, so a round never settles with
its cards shifted by one slot (readers that name no slot: ASCII, HID).
"""

from __future__ import annotations

from daemon.engine.events import Event
from daemon.engine.table import Engine
from tests.engine.support import alerts, assert_restores, cmd, engine, feed, of_kind, read, start_shoe


def _one_deck_round_with_a_foreign_b1() -> tuple[Engine, list[Event]]:
    """1 deck; the opening burn took Kd and Kh; P1 is 9s; then a second Kd comes out as B1."""
    eng = engine(decks=1)
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("Kd", 101)])
    return eng, events


def test_a_card_over_the_composition_keeps_its_slot_pending_and_holds_the_round() -> None:
    eng, events = _one_deck_round_with_a_foreign_b1()
    (over,) = alerts(events, "over_composition")
    assert over.data["details"] == {"card": "Kd", "already_seen": 1, "decks": 1}
    assert over.data["holds"] == 1
    (rescan,) = alerts(events, "rescan_needed")
    assert rescan.data["details"]["reason"] == "over_composition"
    snap = eng.snapshot()
    assert snap["round"]["cards"] == {"P1": "9s"}
    assert snap["round"]["next_slot"] == "B1"
    assert snap["rescan_needed"] is True
    # The dealer rescans the card in B1 (it was misread): it takes B1, the rescan ends.
    events += feed(eng, [read("2h", 102), read("Kc", 103), read("3d", 104)])
    dealt = of_kind(events, "card_dealt")[-3:]
    assert [(e.data["slot"], e.data["card"]) for e in dealt] == [("B1", "2h"), ("P2", "Kc"), ("B2", "3d")]
    assert [e.data["reason"] for e in of_kind(events, "alert_cleared")] == ["rescanned"]
    # The round is decided but held until a supervisor confirms: it never settles by itself.
    assert not of_kind(events, "round_completed")
    (held,) = of_kind(events, "round_held")
    assert held.data["blocked_by"] == [f"alert {over.data['alert_id']}"]
    events += eng.handle(cmd("resolve_hold", 110, "ok"))
    (done,) = of_kind(events, "round_completed")
    assert done.data["cards"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert_restores(eng, events)


def test_a_card_over_the_composition_accepts_no_card_until_supervisor_assigns_the_slot() -> None:
    eng, events = _one_deck_round_with_a_foreign_b1()
    refused = eng.handle(cmd("assign_card", 102, "a1", card="2h", slot="P2"))
    assert refused[0].kind == "command_refused"
    assert "B1" in refused[0].data["reason"]
    events += refused
    events += eng.handle(cmd("assign_card", 103, "a2", card="2h", slot="B1"))
    (dealt,) = [e for e in of_kind(events, "card_dealt") if e.data["card"] == "2h"]
    assert dealt.data["slot"] == "B1"
    assert dealt.data["source"] == "supervisor"
    assert eng.snapshot()["rescan_needed"] is False
    assert_restores(eng, events)


def test_a_supervisor_correction_supplying_the_pending_slot_ends_the_rescan() -> None:
    eng, events = _one_deck_round_with_a_foreign_b1()
    events += eng.handle(cmd("rearrange", 102, "r", cards={"P1": "9s", "B1": "2h"}))
    assert eng.snapshot()["rescan_needed"] is False
    (cleared,) = [e for e in of_kind(events, "alert_cleared") if e.data["code"] == "rescan_needed"]
    assert cleared.data["reason"] == "corrected"
    assert eng.snapshot()["round"]["next_slot"] == "P2"
    assert_restores(eng, events)


def test_voiding_the_round_ends_the_pending_slot_and_its_hold() -> None:
    eng, events = _one_deck_round_with_a_foreign_b1()
    events += eng.handle(cmd("void_round", 102, "v", reason="foreign card"))
    codes = sorted(e.data["code"] for e in of_kind(events, "alert_cleared"))
    assert codes == ["over_composition", "rescan_needed"]
    assert not eng.state.alerts
    events += eng.handle(read("2h", 120))
    (opened,) = of_kind(events, "round_opened")[-1:]
    assert opened.data["hand"] == 2
    assert of_kind(events, "card_dealt")[-1].data["slot"] == "P1"
    assert_restores(eng, events)


def test_cards_pulled_below_a_card_over_the_composition_wait_for_its_rescan() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)
    # One pull of three, bottom card first: 9s (P1), Kd (over: burned already), 5h (under it).
    events += feed(
        eng,
        [read("5h", 100.00, position=3), read("Kd", 100.01, position=2), read("9s", 100.02, position=1)],
    )
    assert eng.snapshot()["round"]["cards"] == {"P1": "9s"}
    assert eng.snapshot()["reads_waiting_in_pull"] == 1
    events += eng.handle(read("2h", 101))  # the rescan of the card in B1
    assert eng.snapshot()["round"]["cards"] == {"P1": "9s", "B1": "2h", "P2": "5h"}
    assert eng.snapshot()["reads_waiting_in_pull"] == 0
    assert_restores(eng, events)


def test_a_card_over_the_composition_between_rounds_holds_the_next_round() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)
    events += feed(eng, [read("Kh", 100)])  # would be P1 of round 1, but Kh was burned (1 deck)
    (over,) = alerts(events, "over_composition")
    assert over.data["holds"] == "next_round"
    assert not of_kind(events, "round_opened")
    events += feed(eng, [read(c, 101 + k) for k, c in enumerate(("9s", "2h", "Kc", "3d"))])
    assert not of_kind(events, "round_completed")
    assert of_kind(events, "round_held")[0].data["cards"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert_restores(eng, events)
