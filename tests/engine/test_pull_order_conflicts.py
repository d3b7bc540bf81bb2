"""Reads whose order a positioned pull cannot settle hold the round they land in.

Found by the fault-injection property test (tests/engine/test_properties.py): a read without a
position arriving inside a positioned pull, a pull card arriving after cards below it were
placed, and a card refused over the shoe's composition whose place on the layout is unknown.
Each used to let a round settle on a guessed order; each now holds it for a supervisor.
"""

from __future__ import annotations

from daemon.engine.events import Event
from tests.engine.support import alerts, assert_restores, cmd, engine, feed, of_kind, read, start_shoe


def _disagreements(events: list[Event]) -> list[str]:
    return [a.data["details"]["reason"] for a in alerts(events, "device_disagreement")]


def test_a_read_without_a_position_inside_a_positioned_pull_holds_the_round() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("Kh", 101)])
    # A two-card pull (positions 1, 2) and, between its reads, a card with no position.
    events += feed(
        eng,
        [read("3h", 102.0, position=1), read("Ad", 102.05), read("2c", 102.1, position=2)],
    )
    assert _disagreements(events) == ["unpositioned_read_in_pull"]
    events += feed(eng, [read("4d", 103)])
    assert not of_kind(events, "round_completed")  # decided, but held: its order was a guess
    assert of_kind(events, "round_held")
    assert_restores(eng, events)


def test_a_pull_card_arriving_after_cards_below_it_were_placed_holds_the_round() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("Kh", 101)])
    # Positions 2 and 3 come first and are held; position 1 releases them; then position 1
    # again (a card of the same pull, with an earlier time) arrives after they were placed.
    events += feed(
        eng,
        [
            read("3h", 102.00, position=1, transmission_id="a"),
            read("2c", 102.01, position=2, transmission_id="b"),
            read("5d", 101.99, position=1, transmission_id="c"),
        ],
    )
    assert _disagreements(events) == ["late_pull_card"]
    assert not of_kind(events, "round_completed")
    assert_restores(eng, events)


def test_rounds_dealt_while_a_card_over_the_composition_is_unresolved_are_held_too() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)  # the opening burn took Kd and Kh
    events += feed(eng, [read("9s", 100), read("Kd", 101)])  # a second Kd: over the composition
    (over,) = alerts(events, "over_composition")
    # The rescan names another card; round 1 is decided and held by the alert.
    events += feed(eng, [read("2h", 102), read("Kc", 103), read("3d", 104)])
    # Round 2, dealt while the refused Kd is still unexplained, is held by the same alert.
    events += feed(eng, [read("4c", 130), read("2d", 131), read("5c", 132), read("6d", 133)])  # a natural 9
    held = {e.data["hand"]: e.data["blocked_by"] for e in of_kind(events, "round_held")}
    assert held == {1: [f"alert {over.data['alert_id']}"], 2: [f"alert {over.data['alert_id']}"]}
    assert not of_kind(events, "round_completed")
    # One resolve_hold clears the alert: both rounds complete as dealt.
    events += eng.handle(cmd("resolve_hold", 140, "ok", hand=1))
    assert [e.data["hand"] for e in of_kind(events, "round_completed")] == [1, 2]
    assert_restores(eng, events)
