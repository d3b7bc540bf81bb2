"""A card drawn outside the game flow (Angel Eye ``d`` frame): alerted, counted, never dealt."""

from __future__ import annotations

from common.cards import Card
from common.inputs import OutsideGameCard, OutsideGameMode
from daemon.journal.codec import decode_input, dumps_input, encode_input, loads_input
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    cmd,
    engine,
    feed,
    kinds,
    of_kind,
    read,
    start_shoe,
)

NATURAL = ("9s", "2h", "Kc", "3d")  # P 9, B 5: decided after four cards


def outside(
    code: str, at: float, mode: OutsideGameMode = OutsideGameMode.LOCK, tid: str = "7"
) -> OutsideGameCard:
    return OutsideGameCard(Card.parse(code), mode, at, transmission_id=tid, raw="05 37 64 80 b8 03 35 38")


def test_a_card_drawn_while_locked_for_betting_is_alerted_counted_and_never_dealt() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    cards_out = eng.snapshot()["shoe"]["cards_out"]
    out = eng.handle(outside("8s", 110))
    events += out
    assert kinds(out) == ["card_outside_game", "alert_raised"]
    drawn = out[0]
    assert drawn.data == {
        "card": "8s",
        "mode": "lock",
        "counted": True,
        "read": {
            "source": "reader",
            "device": "reader",
            "read_at": 110,
            "raw": "05 37 64 80 b8 03 35 38",
            "card": "8s",
            "position": None,
            "target": None,
            "transmission_id": "7",
            "confidence": None,
            "mode": "lock",
        },
    }
    (alert,) = alerts(out, "card_outside_game")
    assert alert.data["holds"] is None
    assert alert.data["hand"] is None  # between rounds
    assert alert.data["details"] == {
        "card": "8s",
        "mode": "lock",
        "counted": True,
        "rule": "RULES.md dealing mistake 7",
    }
    snap = eng.snapshot()
    assert snap["shoe"]["cards_out"] == cards_out + 1
    assert snap["shoe"]["phase"] == "ready"
    # Not a burn, not a Player 1: the next card opens round 2 as Player 1.
    nxt = eng.handle(read("4c", 130))
    events += nxt
    assert [(e.data["slot"], e.hand) for e in of_kind(nxt, "card_dealt")] == [("P1", 2)]
    assert not alerts(nxt)
    # A supervisor looks and acknowledges it (or voids the round: daemon/rules/RULES.md mistake 7).
    ack = eng.handle(cmd("acknowledge_alert", 131, "ack", alert_id=alert.data["alert_id"]))
    events += ack
    assert kinds(ack) == ["command_accepted", "alert_cleared"]
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_a_card_drawn_outside_the_game_during_a_round_leaves_the_round_alone() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("2h", 101)])
    out = eng.handle(outside("Qd", 101.5, OutsideGameMode.ERROR))
    events += out
    (alert,) = alerts(out)
    assert (alert.data["hand"], alert.data["holds"], alert.data["details"]["mode"]) == (1, None, "error")
    assert eng.snapshot()["round"]["next_slot"] == "P2"
    rest = feed(eng, [read("Kc", 102), read("3d", 103)])
    events += rest
    (completed,) = of_kind(rest, "round_completed")
    assert completed.data["cards"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert_restores(eng, events)


def test_an_outside_card_counts_against_the_shoes_composition() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)
    events += eng.handle(outside("9s", 50))
    refused = eng.handle(read("9s", 100))  # the one 9s of a 1-deck shoe is already out
    events += refused
    assert of_kind(refused, "card_dealt") == []
    (alert,) = alerts(refused, "over_composition")
    assert alert.data["details"] == {"card": "9s", "already_seen": 1, "decks": 1}
    assert_legal(events, 1)
    assert_restores(eng, events)


def test_an_outside_card_over_the_composition_is_alerted_but_not_counted() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)
    events += eng.handle(read("9s", 100))
    before = eng.snapshot()["shoe"]["cards_out"]
    out = eng.handle(outside("9s", 101))
    events += out
    assert out[0].data["counted"] is False
    (alert,) = alerts(out)
    assert alert.data["details"]["counted"] is False
    assert "already appeared 1 time(s) in a 1-deck shoe" in alert.data["details"]["not_counted_because"]
    assert eng.snapshot()["shoe"]["cards_out"] == before
    assert_legal(events, 1)
    assert_restores(eng, events)


def test_an_outside_card_with_no_shoe_running_is_alerted_and_not_counted() -> None:
    eng = engine()
    out = eng.handle(outside("8s", 1.0, OutsideGameMode.SETTING))
    (alert,) = alerts(out)
    assert alert.data["details"]["not_counted_because"] == "no shoe is running"
    assert alert.data["alert_id"] == "noshoe:a1"
    assert_restores(eng, out)


def test_a_resent_outside_card_frame_is_dropped_and_a_new_one_is_not() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(outside("8s", 50, tid="7"))
    assert eng.handle(outside("8s", 50.02, tid="7")) == []  # the same frame again
    second = eng.handle(outside("8s", 51, tid="8"))  # another 8s: legal in 8 decks
    events += second
    assert kinds(second) == ["card_outside_game", "alert_raised"]
    assert eng.state.counts["8s"] == 2
    assert_restores(eng, events)


def test_a_held_pull_is_settled_before_an_outside_card() -> None:
    """The pull's top card never came before the reader moved on: that card is missing (its slot
    waits, the round is held), decided before the outside card; the held card waits below it."""
    eng = engine(pull_hold_window_s=5.0)
    events = start_shoe(eng)
    events += eng.handle(read("2d", 100.0, position=2))
    out = eng.handle(outside("8s", 100.1))
    events += out
    assert [e.data["code"] for e in alerts(out)] == ["missing_card", "rescan_needed", "card_outside_game"]
    assert kinds(out)[-2:] == ["card_outside_game", "alert_raised"]
    assert not of_kind(out, "card_dealt")
    rescan = eng.handle(read("3c", 101.0))  # the top card, read again
    events += rescan
    assert [(e.data["slot"], e.data["card"]) for e in of_kind(rescan, "card_dealt")] == [
        ("P1", "3c"),
        ("B1", "2d"),
    ]
    assert_restores(eng, events)


def test_the_journal_codec_round_trips_an_outside_game_card() -> None:
    inp = outside("Th", 12.5, OutsideGameMode.SETTING)
    encoded = encode_input(inp)
    assert encoded == {
        "type": "OutsideGameCard",
        "card": "Th",
        "mode": "setting",
        "at": 12.5,
        "transmission_id": "7",
        "raw": "05 37 64 80 b8 03 35 38",
        "device": "reader",
    }
    assert decode_input(encoded) == inp
    assert loads_input(dumps_input(inp)) == inp
