"""The snapshot's ``results``: the current shoe's completed rounds, by hand, surviving a restart."""

from __future__ import annotations

import json
import random

import jsonschema

from common.inputs import DeviceTarget
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.mqtt.contract import load_schema
from tests.engine.reference import deal_shoe, shuffled_shoe
from tests.engine.support import (
    assert_restores,
    cmd,
    engine,
    feed,
    of_kind,
    read,
    roundtrip,
    start_shoe,
    variant,
)

NATURAL = ("9s", "2h", "Kc", "3d")  # Player 9 natural, Banker 5
BANKER_DRAWS = ("3c", "2d", "4h", "2s", "5h")  # Player 7 stands; Banker pair of 2s draws to 9
PAIRED_TIE = ("4s", "4h", "4d", "4c")  # both sides 8, both pairs: a natural tie


def test_results_list_every_completed_round_of_the_shoe_in_order() -> None:
    eng = engine()
    events = start_shoe(eng)
    for k, cards in enumerate((NATURAL, BANKER_DRAWS, PAIRED_TIE)):
        events += feed(eng, [read(c, 100 + 30 * k + n) for n, c in enumerate(cards)])
    assert eng.snapshot()["results"] == [
        {"hand": 1, "winner": "player", "totals": [9, 5], "pairs": [False, False], "naturals": [True, False]},
        {"hand": 2, "winner": "banker", "totals": [7, 9], "pairs": [False, True], "naturals": [False, False]},
        {"hand": 3, "winner": "tie", "totals": [8, 8], "pairs": [True, True], "naturals": [True, True]},
    ]
    assert json.loads(json.dumps(eng.snapshot())) == eng.snapshot()
    assert_restores(eng, events)


def test_results_match_the_completed_events_of_a_whole_shoe_and_a_restore_from_that_shoe() -> None:
    cfg = TableSettings()
    rng = random.Random(5)
    eng = Engine(cfg, variant("standard"))
    first = deal_shoe(cfg, variant("standard"), shuffled_shoe(8, rng), 380, shoe_id="S1").inputs
    second = deal_shoe(cfg, variant("standard"), shuffled_shoe(8, rng), 380, shoe_id="S2").inputs
    events = [e for inp in first + second[:60] for e in eng.handle(inp)]
    start = max(i for i, e in enumerate(events) if e.kind == "shoe_started")
    completed = [e for e in events[start:] if e.kind == "round_completed"]
    results = eng.snapshot()["results"]
    assert len(completed) > 5  # only the current shoe's rounds
    assert [(r["hand"], r["winner"]) for r in results] == [
        (e.data["hand"], e.data["outcome"]["winner"]) for e in completed
    ]
    resumed = Engine.restore(cfg, variant("standard"), roundtrip(events[start:]))
    assert resumed.snapshot()["results"] == results


def test_a_held_round_completed_later_takes_its_place_by_hand() -> None:
    eng = engine()
    events = start_shoe(eng)
    # Round 1: the reader names another box for Banker 1, so the round is held.
    events += feed(eng, [read("9s", 100), read("2h", 101, target=DeviceTarget.P2), read("Kc", 102)])
    events += feed(eng, [read("3d", 103)])
    assert of_kind(events, "round_held")
    events += feed(eng, [read(c, 130 + n) for n, c in enumerate(BANKER_DRAWS)])
    assert [r["hand"] for r in eng.snapshot()["results"]] == [2]
    events += eng.handle(cmd("resolve_hold", 150, "r", hand=1))
    assert [(r["hand"], r["winner"]) for r in eng.snapshot()["results"]] == [(1, "player"), (2, "banker")]
    assert_restores(eng, events)


def test_a_voided_completed_round_leaves_the_results_and_a_new_shoe_clears_them() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + n) for n, c in enumerate(NATURAL)])
    events += feed(eng, [read(c, 130 + n) for n, c in enumerate(BANKER_DRAWS)])
    events += eng.handle(cmd("void_round", 140, "v", hand=2, reason="card exposed"))
    assert [r["hand"] for r in eng.snapshot()["results"]] == [1]
    assert_restores(eng, events)
    events += eng.handle(cmd("new_shoe", 150, "n2", shoe_id="S2"))
    assert eng.snapshot()["results"] == []
    assert_restores(eng, events)


def test_the_snapshot_with_results_fits_the_state_topic_schema() -> None:
    eng = engine()
    start_shoe(eng)
    feed(eng, [read(c, 100 + n) for n, c in enumerate(NATURAL)])
    payload = {"schema_version": 1, "table_id": "t7", "ts": 1.0, "last_seq": 9, "state": eng.snapshot()}
    jsonschema.validate(payload, load_schema("state"))
