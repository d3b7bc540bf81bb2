"""A full journal (``StorageState``): cards that would open a round are refused, counted, alerted."""

from __future__ import annotations

from common.inputs import ReadFailed, StorageState
from daemon.journal.codec import dumps_input, loads_input
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
NATURAL_2 = ("8c", "2d", "Qh", "4s")  # P 8, B 6


def test_a_full_journal_refuses_the_card_that_would_open_a_round_and_counts_it() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    out = eng.handle(StorageState(True, 110, "disk full"))
    events += out
    assert [(e.kind, e.data) for e in out] == [("storage_state", {"full": True, "detail": "disk full"})]
    cards_out = eng.snapshot()["shoe"]["cards_out"]

    out = feed(eng, [read("7h", 111), read("7h", 112), read("Ad", 113)])
    events += out
    assert kinds(out) == ["alert_raised", "card_refused", "card_refused", "card_refused"]
    assert not of_kind(out, "card_dealt")
    assert not of_kind(out, "round_opened")
    (alert,) = alerts(out, "journal_full_card_refused")
    assert alert.data["details"] == {"detail": "disk full", "refused": 1}
    refused = of_kind(out, "card_refused")
    assert [e.data["refused"] for e in refused] == [1, 2, 3]
    assert all(e.data["alert_id"] == alert.data["alert_id"] for e in refused)
    assert all(e.data["counted"] and e.data["reason"] == "journal_full" for e in refused)
    assert refused[0].data["read"]["card"] == "7h"

    snap = eng.snapshot()
    assert snap["shoe"]["cards_out"] == cards_out + 3
    assert snap["round"] is None
    assert snap["hand"] == 1
    assert snap["storage"] == {"full": True, "detail": "disk full", "refused_cards": 3}
    (open_alert,) = [a for a in snap["alerts"] if a["code"] == "journal_full_card_refused"]
    assert open_alert["details"]["refused"] == 3
    assert alert.data["details"]["refused"] == 1  # the published event itself is never changed

    out = eng.handle(StorageState(False, 120))
    events += out
    assert kinds(out) == ["storage_state", "alert_cleared"]
    assert out[1].data == {
        "alert_id": alert.data["alert_id"],
        "code": "journal_full_card_refused",
        "reason": "journal has room",
        "refused": 3,
    }
    out = feed(eng, [read(c, 130 + k) for k, c in enumerate(NATURAL_2)])
    events += out
    opened = of_kind(out, "round_opened")
    assert [e.data["hand"] for e in opened] == [2]
    assert of_kind(out, "card_dealt")[0].data["slot"] == "P1"
    (done,) = of_kind(out, "round_completed")
    assert done.data["cards"] == dict(zip(["P1", "B1", "P2", "B2"], NATURAL_2, strict=True))
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_the_round_in_progress_completes_while_the_journal_is_full() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read("9s", 100), read("2h", 101)])
    events += eng.handle(StorageState(True, 101.5, "backlog over its limit"))
    out = feed(eng, [read("Kc", 102), read("3d", 103)])
    events += out
    assert kinds(out).count("card_dealt") == 2
    (done,) = of_kind(out, "round_completed")
    assert done.data["cards"] == dict(zip(["P1", "B1", "P2", "B2"], NATURAL, strict=True))
    out = eng.handle(read("5c", 110))
    assert kinds(out) == ["alert_raised", "card_refused"]
    assert_restores(eng, events + out)


def test_a_refused_card_already_over_the_composition_is_not_counted() -> None:
    eng = engine(decks=1)
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    events += eng.handle(StorageState(True, 110))
    cards_out = eng.snapshot()["shoe"]["cards_out"]
    out = eng.handle(read("9s", 111))  # the only 9s of a one-deck shoe is on the table already
    (refused,) = of_kind(out, "card_refused")
    assert refused.data["counted"] is False
    assert "already appeared 1 time(s)" in refused.data["not_counted_because"]
    assert eng.snapshot()["shoe"]["cards_out"] == cards_out
    assert_legal(events + out, 1)


def test_a_rescan_of_an_opening_card_is_refused_and_satisfies_the_rescan() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    events += eng.handle(StorageState(True, 110))
    out = feed(eng, [ReadFailed(111), read("7h", 112)])
    events += out
    assert kinds(out) == ["alert_raised", "alert_raised", "card_refused", "alert_cleared"]
    assert out[0].data["code"] == "rescan_needed"
    assert out[1].data["code"] == "journal_full_card_refused"
    assert out[3].data["alert_id"] == out[0].data["alert_id"]
    assert eng.snapshot()["rescan_needed"] is False
    assert_restores(eng, events)


def test_burn_cards_are_dealt_while_full_and_a_supervisor_cannot_open_a_round() -> None:
    eng = engine(burn_before_each_round=True)
    events = start_shoe(eng)
    events += eng.handle(StorageState(True, 50))
    out = eng.handle(read("4c", 51))
    assert of_kind(out, "card_dealt")[0].data["burn"] == "round"
    out += eng.handle(cmd("assign_card", 52, "a1", card="5c"))
    (refusal,) = of_kind(out, "command_refused")
    assert "journal is full" in refusal.data["reason"]
    assert_restores(eng, events + out)


def test_storage_state_without_a_change_emits_nothing_and_round_trips_the_codec() -> None:
    eng = engine()
    assert eng.handle(StorageState(False, 1)) == []
    assert kinds(eng.handle(StorageState(True, 2, "disk full"))) == ["storage_state"]
    assert eng.handle(StorageState(True, 3, "disk full")) == []
    inp = StorageState(True, 4.5, "disk full")
    assert loads_input(dumps_input(inp)) == inp


def test_an_acknowledged_journal_alert_is_raised_again_by_the_next_refusal() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(StorageState(True, 10))
    out = eng.handle(read("7h", 11))
    (alert,) = alerts(out, "journal_full_card_refused")
    out += eng.handle(cmd("acknowledge_alert", 12, "ack", alert_id=alert.data["alert_id"]))
    out += eng.handle(read("8h", 13))
    raised = alerts(out, "journal_full_card_refused")
    assert len(raised) == 2
    assert raised[1].data["details"]["refused"] == 1
    assert of_kind(out, "card_refused")[-1].data["refused"] == 1
    assert_restores(eng, events + out)
