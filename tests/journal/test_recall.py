"""Recall of the last rounds (``daemon.journal.recall``): rounds dealt by the real engine, with
holds answered, a correction and a void; read back from a real journal file; junk never breaks
it (hypothesis) and every record keeps the contract's shape (``state.json``'s recent_round)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal.errors import JournalError
from daemon.journal.recall import MAX_LAST, ROUND_KINDS, RoundRecall, recall_from_journal
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.mqtt.contract import load_schema
from tests.engine.reference import deal_shoe, shuffled_shoe
from tests.engine.support import alerts, cmd, engine, feed, read, start_shoe, variant
from tests.engine.test_properties import FAULTS, _inject

NATURAL = ("9s", "2h", "Kc", "3d")  # P 9 against B 5
BANKER_DRAWS = ("3c", "2d", "4h", "2s", "5h")  # P 7 stands, B 4 draws 5h: B 9
_SCHEMA = load_schema("state")
_RECORD = jsonschema.Draft202012Validator({"$defs": _SCHEMA["$defs"], "$ref": "#/$defs/recent_round"})


def _deal(eng: Engine, cards: tuple[str, ...], at: float, step: float = 1.0) -> list[Event]:
    return feed(eng, [read(c, at + k * step) for k, c in enumerate(cards)])


def _bodies(events: list[Event]) -> list[dict[str, Any]]:
    """The events as the journal stores them (through JSON)."""
    return [json.loads(json.dumps(e.to_dict())) for e in events]


def _recall(events: list[Event], keep: int = 10) -> list[dict[str, Any]]:
    recall = RoundRecall(keep)
    for body in _bodies(events):
        recall.add(body)
    rounds = recall.rounds()
    for record in rounds:
        _RECORD.validate(record)
    return rounds


def _table_with_every_kind_of_round() -> tuple[Engine, list[Event]]:
    """Round 1 completes; round 2 (two unneeded cards) is held and its two holds are answered by
    two acknowledgements; round 3's sides are swapped (a correction) before its last card; round
    4 is voided after it completed; round 5 is in progress."""
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    extra = _deal(eng, ("7c", "6d"), 103.4, step=0.3)  # burn, then round 2's Player 1
    events += extra + _deal(eng, ("Ah", "Kd", "Ks", "4c"), 130)
    first, second = (a.data["alert_id"] for a in alerts(extra, "unneeded_card"))
    events += eng.handle(cmd("acknowledge_alert", 140, "ack-1", alert_id=first))
    events += eng.handle(cmd("acknowledge_alert", 141, "ack-2", alert_id=second))
    events += _deal(eng, BANKER_DRAWS[:4], 200)
    events += eng.handle(cmd("swap", 205, "swap-3", sides=True))
    events += _deal(eng, ("Kh",), 206)  # the Player (2+2 after the swap) draws: P 4, B 7
    events += _deal(eng, NATURAL, 300)
    events += eng.handle(cmd("void_round", 310, "void-4", hand=4, reason="card exposed"))
    events += _deal(eng, ("8d",), 400)
    return eng, events


def test_every_round_is_recalled_with_its_holds_corrections_and_void() -> None:
    eng, events = _table_with_every_kind_of_round()
    rounds = _recall(events)
    assert [(r["hand"], r["status"]) for r in rounds] == [
        (1, "completed"), (2, "completed"), (3, "completed"), (4, "voided"), (5, "in_progress"),
    ]  # fmt: skip
    one, two, three, four, five = rounds
    assert one["shoe_id"] == "S1"
    assert one["round_id"] is None
    assert one["cards"] == {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"}
    assert one["sources"] == dict.fromkeys(("P1", "B1", "P2", "B2"), "reader")
    assert one["outcome"] == {
        "winner": "player", "player_total": 9, "banker_total": 5, "player_pair": False,
        "banker_pair": False, "player_natural": True, "banker_natural": False,
    }  # fmt: skip
    assert one["holds"] == one["corrections"] == []
    assert one["void"] is None
    assert two["cards"] == {"P1": "6d", "B1": "Ah", "P2": "Kd", "B2": "Ks", "B3": "4c"}
    assert two["decided_at"] == 133  # when it was held, not when the holds ended
    assert [(h["code"], h["resolution"]) for h in two["holds"]] == [
        ("unneeded_card", {"how": "acknowledged", "actor": "floor-1", "command_id": "ack-1", "at": 140}),
        ("unneeded_card", {"how": "acknowledged", "actor": "floor-1", "command_id": "ack-2", "at": 141}),
    ]
    assert all(h["reason"] == f"alert {h['alert_id']}" for h in two["holds"])
    (swap,) = three["corrections"]
    assert (swap["action"], swap["actor"], swap["command_id"], swap["at"]) == (
        "swap",
        "floor-1",
        "swap-3",
        205,
    )
    assert swap["before"] == {"P1": "3c", "B1": "2d", "P2": "4h", "B2": "2s"}
    assert swap["after"] == {"P1": "2d", "B1": "3c", "P2": "2s", "B2": "4h"}
    assert three["cards"] == {**swap["after"], "P3": "Kh"}
    assert three["outcome"]["winner"] == "banker"
    assert three["holds"] == []
    assert four["void"] == {
        "reason": "card exposed", "was_completed": True, "opening_burn": False,
        "actor": "floor-1", "command_id": "void-4", "at": 310,
    }  # fmt: skip
    assert four["outcome"] is not None  # what it was before the void
    assert five["cards"] == {"P1": "8d"}
    assert five["outcome"] is None
    assert five["decided_at"] is None
    assert eng.snapshot()["round"]["hand"] == 5


def test_a_held_round_shows_the_reason_and_the_supervisor_who_resolved_it() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += _deal(eng, NATURAL, 100)
    events += _deal(eng, ("7c", "6d"), 103.4, step=0.3)
    events += _deal(eng, ("Ah", "Kd", "Ks", "4c"), 130)
    held = _recall(events)[-1]
    assert held["status"] == "held"
    assert held["outcome"] is None
    assert [h["resolution"] for h in held["holds"]] == [None, None]
    events += eng.handle(cmd("resolve_hold", 150, "res-2", hand=2))
    done = _recall(events)[-1]
    assert done["status"] == "completed"
    assert done["outcome"]["winner"] == "player"
    assert {h["resolution"]["command_id"] for h in done["holds"]} == {"res-2"}
    assert {h["resolution"]["how"] for h in done["holds"]} == {"hold resolved"}


def test_rounds_keep_the_servers_round_id() -> None:
    eng = engine(game_flow="betting_window")
    events = start_shoe(eng)
    for k, round_id in enumerate(("T9-1001", "T9-1002")):
        at = 100.0 + 100 * k
        events += feed(
            eng,
            [
                cmd("open_betting", at, f"open-{round_id}", round_id=round_id),
                cmd("close_betting", at + 10, f"close-{round_id}", round_id=round_id),
            ],
        )
        events += _deal(eng, NATURAL, at + 20)
    assert [(r["hand"], r["round_id"]) for r in _recall(events)] == [(1, "T9-1001"), (2, "T9-1002")]


def test_a_forgotten_opening_burn_voids_hand_1_which_is_dealt_afresh_as_a_new_record() -> None:
    eng = engine()
    events = feed(eng, [cmd("new_shoe", 0, "n", shoe_id="S1"), read("2c", 1)])
    events += _deal(eng, ("9s", "2h", "Kc", "3d"), 10)  # the first two were taken as the burn
    events += eng.handle(cmd("void_round", 20, "b", opening_burn=True, reason="opening burn forgotten"))
    events += _deal(eng, ("9h", "2s", "Kd", "3c"), 40)
    first, again = _recall(events)
    assert (first["hand"], first["status"], first["cards"]) == (1, "voided", {"P1": "Kc", "B1": "3d"})
    assert first["void"] is not None
    assert (first["void"]["opening_burn"], first["void"]["reason"]) == (True, "opening burn forgotten")
    assert (again["hand"], again["status"], again["void"]) == (1, "completed", None)
    assert again["cards"] == {"P1": "9h", "B1": "2s", "P2": "Kd", "B2": "3c"}


def test_only_the_newest_rounds_are_kept_oldest_first() -> None:
    eng = engine()
    events = start_shoe(eng)
    for hand in range(12):
        events += _deal(eng, NATURAL if hand % 2 else BANKER_DRAWS, 100 + 60 * hand)
    assert [r["hand"] for r in _recall(events)] == list(range(3, 13))
    assert [r["hand"] for r in _recall(events, keep=3)] == [10, 11, 12]


def test_a_card_not_yet_revealed_is_null_and_keeps_the_shape() -> None:
    recall = RoundRecall()
    recall.add({"kind": "round_opened", "at": 1.0, "shoe_id": "S", "hand": 1, "data": {"hand": 1}})
    for slot, card in (("P1", None), ("B1", "2h"), ("P2", None)):
        data = {"slot": slot, "card": card, "round": 1, "source": "reader"}
        recall.add({"kind": "card_dealt", "at": 2.0, "shoe_id": "S", "hand": 1, "data": data})
    (record,) = recall.rounds()
    assert record["cards"] == {"P1": None, "B1": "2h", "P2": None}
    _RECORD.validate(record)


def test_the_journal_tail_gives_the_same_rounds_as_the_whole_fold(tmp_path: Path) -> None:
    _, events = _table_with_every_kind_of_round()
    eng = engine()
    more = start_shoe(eng, at=1000)
    for hand in range(12):
        more += _deal(eng, NATURAL if hand % 3 else BANKER_DRAWS, 1100 + 60 * hand)
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], events + more)
    journal.close()
    everything = _recall(events + more, keep=MAX_LAST)
    for last in (1, 3, 10, 17, MAX_LAST):
        assert recall_from_journal(path, last) == everything[-last:]


def test_a_missing_or_foreign_file_is_a_journal_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no such file"):
        recall_from_journal(tmp_path / "nothing.sqlite3")
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    with pytest.raises(JournalError, match="not an SQLite database"):
        recall_from_journal(text)


def test_keep_is_bounded() -> None:
    for keep in (0, MAX_LAST + 1):
        with pytest.raises(ValueError, match="keep must be"):
            RoundRecall(keep)


# ---------------------------------------------------------------------- properties
_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.floats(allow_nan=True) | st.sampled_from(
        ["P1", "B3", "P9", "9s", "Xx", "", "alert S:a1", "next_round", "player", "banker", "S"]
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["hand", "round", "slot", "card", "cards", "sources", "outcome", "winner", "player_total",
         "banker_total", "blocked_by", "alert_id", "code", "holds", "actor", "command_id", "reason",
         "before", "after", "supplied", "round_id", "decided_at", "was_completed", "P1", "B1"]
    ), inner, max_size=6),
    max_leaves=12,
)  # fmt: skip
_events = st.lists(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from([*sorted(ROUND_KINDS), "shoe_started", "card_confirmed"]),
            "at": st.floats(0, 1e9) | st.none(),
            "shoe_id": st.sampled_from(["S", "T", None]),
            "hand": st.integers(0, 4) | st.none(),
            "data": st.dictionaries(
                st.sampled_from(["hand", "round", "slot", "card", "cards", "outcome", "blocked_by",
                                 "alert_id", "code", "holds", "actor", "before", "after", "reason"]),
                _junk, max_size=6,
            ) | _junk,
        }
    ),
    max_size=40,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(_events, st.integers(1, 12))
def test_any_events_give_records_of_the_contracts_shape_and_keep_only_cuts_the_oldest(
    events: list[dict[str, Any]], keep: int
) -> None:
    small, big = RoundRecall(keep), RoundRecall(MAX_LAST)
    for event in events:
        small.add(event)
        big.add(event)
    rounds = small.rounds()
    assert len(rounds) <= keep
    assert rounds == big.rounds()[-keep:] if rounds else big.rounds() == []
    for record in rounds:
        _RECORD.validate(json.loads(json.dumps(record, allow_nan=False)))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=25),
    await_verdict=st.booleans(),
)
def test_the_recall_agrees_with_the_engine_on_every_round_it_keeps(
    seed: int, faults: list[str], await_verdict: bool
) -> None:
    """A dealt shoe with injected faults and random supervisor commands: every round the recall
    keeps says what the engine's own state says of it (the round in progress, the held rounds
    and what holds them, the completed results)."""
    cfg = TableSettings(decks=8, await_device_verdict=await_verdict)
    rng = random.Random(seed)
    cards = shuffled_shoe(8, rng)
    clean = deal_shoe(cfg, variant("standard"), cards, rng.randint(len(cards) - 40, len(cards) - 22)).inputs
    inputs, _lost = _inject(clean, rng, faults)
    eng = Engine(cfg, variant("standard"))
    events = [event for inp in inputs for event in eng.handle(inp)]
    kept = {(r["shoe_id"], r["hand"]): r for r in _recall(events, keep=MAX_LAST)}  # the newest per hand
    snap, shoe_id = eng.snapshot(), eng.state.shoe_id
    if snap["round"] is not None:
        rnd = kept[(shoe_id, snap["round"]["hand"])]
        assert (rnd["status"], rnd["cards"]) == ("in_progress", snap["round"]["cards"])
    for held in snap["held_rounds"]:
        rnd = kept[(shoe_id, held["hand"])]
        assert (rnd["status"], rnd["cards"]) == ("held", held["cards"])
        blocking = {b for b in held["blocked_by"] if b.startswith("alert ")}
        assert blocking <= {h["reason"] for h in rnd["holds"] if h["resolution"] is None}
    for line in snap["results"]:
        result = kept.get((shoe_id, line["hand"]))
        if result is not None:  # the newest hundred rounds
            assert result["status"] == "completed"
            outcome = result["outcome"]
            assert outcome is not None
            assert (outcome["winner"], [outcome["player_total"], outcome["banker_total"]]) == (
                line["winner"],
                line["totals"],
            )
    open_alerts = {a["alert_id"] for a in snap["alerts"]}
    for rnd in kept.values():
        for hold in rnd["holds"]:
            if hold["alert_id"] is not None and hold["resolution"] is None and rnd["status"] != "voided":
                assert hold["alert_id"] in open_alerts, (rnd["hand"], hold)
