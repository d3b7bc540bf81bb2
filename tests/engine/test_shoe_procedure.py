"""daemon/rules/RULES.md "Shoe procedure": a forgotten opening burn (seeds 001, 002).

"If the dealer forgets the opening burn, the shoe is invalid and must be replaced (seed 001);
if caught before the first round it is corrected on the spot (seed 002)."
Without a slot from the reader, the cards dealt as round 1 are taken as the burn the indicator
asks for, and the later ones open round 1. Before round 1 completes, ``void_round`` with
``opening_burn: true`` turns round 1's cards into burn cards (round 1 is dealt afresh, same hand
number); after it, the shoe is invalid: ``void_shoe`` then ``new_shoe``.
"""

from __future__ import annotations

from tests.engine.support import (
    assert_legal,
    assert_restores,
    cmd,
    engine,
    feed,
    of_kind,
    read,
)


def test_shoe_procedure_a_forgotten_opening_burn_caught_before_round_1_is_corrected_on_the_spot() -> None:
    eng = engine()
    events = feed(eng, [cmd("new_shoe", 0, "n", shoe_id="S1"), read("2c", 1)])  # the indicator: burn 2
    # The dealer forgets the burn and deals round 1: the first two cards are taken as the burn.
    events += feed(eng, [read(c, 10 + k) for k, c in enumerate(("9s", "2h", "Kc", "3d"))])
    assert eng.snapshot()["round"]["cards"] == {"P1": "Kc", "B1": "3d"}
    # The supervisor catches it: the cards dealt so far all become the opening burn.
    out = eng.handle(cmd("void_round", 20, "b", opening_burn=True, reason="opening burn forgotten"))
    events += out
    assert [e.kind for e in out] == ["command_accepted", "round_voided", "bets_offered"]
    assert out[1].data["cards"] == {"P1": "Kc", "B1": "3d"}
    assert out[1].data["opening_burn"] is True
    assert out[2].data["hand"] == 1
    snap = eng.snapshot()
    assert (snap["round"], snap["hand"], snap["shoe"]["phase"], snap["shoe"]["cards_out"]) == (
        None,
        0,
        "ready",
        5,
    )
    # Round 1 is dealt afresh, as hand 1 (side-bet hand limits unchanged).
    events += feed(eng, [read(c, 40 + k) for k, c in enumerate(("9h", "2s", "Kd", "3c"))])
    (done,) = of_kind(events, "round_completed")
    assert done.hand == 1
    assert done.data["cards"] == {"P1": "9h", "B1": "2s", "P2": "Kd", "B2": "3c"}
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_shoe_procedure_a_forgotten_opening_burn_caught_while_round_1_is_held_is_corrected_too() -> None:
    eng = engine(await_device_verdict=True)
    events = feed(eng, [cmd("new_shoe", 0, "n", shoe_id="S1"), read("Ac", 1)])  # burn 1
    events += feed(eng, [read(c, 10 + k) for k, c in enumerate(("5d", "9s", "2h", "Kc", "3d"))])
    assert of_kind(events, "round_held")
    events += eng.handle(cmd("void_round", 20, "b", opening_burn=True))
    assert of_kind(events, "round_voided")[0].data["cards"] == {
        "P1": "9s",
        "B1": "2h",
        "P2": "Kc",
        "B2": "3d",
    }
    assert eng.snapshot()["held_rounds"] == []
    assert eng.snapshot()["offered_bets"]["hand"] == 1
    assert_restores(eng, events)


def test_shoe_procedure_a_forgotten_opening_burn_found_after_round_1_invalidates_the_shoe() -> None:
    eng = engine()
    events = feed(eng, [cmd("new_shoe", 0, "n", shoe_id="S1"), read("2c", 1)])
    events += feed(eng, [read(c, 10 + k) for k, c in enumerate(("9s", "2h", "Kc", "3d", "9h", "2s"))])
    assert len(of_kind(events, "round_completed")) == 1
    refused = eng.handle(cmd("void_round", 20, "b", opening_burn=True))
    assert refused[0].kind == "command_refused"
    assert "void_shoe, then new_shoe" in refused[0].data["reason"]
    events += refused
    events += eng.handle(cmd("void_shoe", 21, "v", reason="opening burn forgotten"))
    assert of_kind(events, "shoe_ended")[-1].data["reason"] == "voided"
    events += eng.handle(cmd("new_shoe", 22, "n2", shoe_id="S2"))
    assert of_kind(events, "shoe_started")[-1].data["shoe_id"] == "S2"
    assert eng.snapshot()["shoe"]["phase"] == "indicator"
    assert_restores(eng, events)


def test_shoe_procedure_an_opening_burn_correction_is_refused_before_any_round_and_outside_a_shoe() -> None:
    eng = engine()
    assert eng.handle(cmd("void_round", 0, "b0", opening_burn=True))[0].kind == "command_refused"
    events = feed(eng, [cmd("new_shoe", 1, "n", shoe_id="S1"), read("9c", 2), read("4d", 3)])
    refused = eng.handle(cmd("void_round", 4, "b1", opening_burn=True))
    assert refused[0].kind == "command_refused"
    assert "burn cards already" in refused[0].data["reason"]
    assert_restores(eng, events + refused)
