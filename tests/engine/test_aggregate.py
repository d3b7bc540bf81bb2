"""Refused cards aggregated per episode (``daemon/engine/aggregate.py``): one open alert, the
first cards listed, every later one counted in a bounded ``cards_refused`` summary; the state
(composition, counts, the alert's ``details.refused``) is exactly what one event per card gave."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from common.cards import ALL_CARDS
from common.inputs import CardRead, CutCardDrawn, StorageState, Tick
from daemon.engine.aggregate import LISTED, SUMMARY_AFTER_S, SUMMARY_EVERY
from daemon.engine.events import Event
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
from tests.mqtt.support import validate_payload

NATURAL = ("9s", "2h", "Kc", "3d")


def _codes(n: int) -> list[str]:
    return [c.code for c in itertools.islice(itertools.cycle(ALL_CARDS), n)]


def test_two_thousand_cards_into_a_full_journal_make_a_bounded_number_of_events() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    events += eng.handle(StorageState(True, 110, "disk full"))
    counts_before, out_before = dict(eng.state.counts), eng.state.cards_out
    codes = _codes(2000)
    refused: list[Event] = []
    absorbed = 0
    for k, code in enumerate(codes):
        refused += eng.handle(read(code, 111 + k * 0.05))
        absorbed += eng.absorbed
    refused += eng.handle(StorageState(False, 300))  # the journal has room: summary, then the clear
    events += refused
    summaries = of_kind(refused, "cards_refused")
    assert kinds(refused)[: 1 + LISTED] == ["alert_raised"] + ["card_refused"] * LISTED
    assert len(summaries) == -(-(2000 - LISTED) // SUMMARY_EVERY)  # 40: one per 50 cards
    assert len(refused) == 1 + LISTED + len(summaries) + 2
    assert absorbed == 2000 - LISTED
    # which cards, in order, and how many: nothing lost
    listed = [e.data["card"] for e in of_kind(refused, "card_refused")]
    assert listed + [c for s in summaries for c in s.data["codes"]] == codes
    assert [s.data["refused"] for s in summaries][-1] == 2000
    assert sum(s.data["cards"] for s in summaries) == 2000 - LISTED
    assert all(len(s.data["codes"]) <= SUMMARY_EVERY for s in summaries)
    cleared = of_kind(refused, "alert_cleared")[-1]
    assert cleared.data["refused"] == 2000
    # the composition counts exactly as one card_refused per card would
    expected = dict(counts_before)
    for code in codes:
        if expected.get(code, 0) < 8:
            expected[code] = expected.get(code, 0) + 1
    assert eng.state.counts == expected
    assert eng.state.cards_out == out_before + sum(expected.values()) - sum(counts_before.values())
    not_counted = sum(s.data["not_counted"] for s in summaries)
    assert not_counted == 2000 - (eng.state.cards_out - out_before)
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_cards_after_the_last_round_keep_one_open_alert() -> None:
    eng = engine()
    events = start_shoe(eng)
    events += eng.handle(CutCardDrawn(at=99))
    events += feed(eng, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    assert of_kind(events, "shoe_ended")
    out = feed(eng, [read(c, 200 + k * 0.1) for k, c in enumerate(_codes(500))])
    events += out
    (alert,) = alerts(out)
    assert alert.data["code"] == "card_after_last_round"
    assert alert.data["details"] == {"refused": 1}
    summaries = of_kind(out, "cards_refused")
    assert len(summaries) == 499 // SUMMARY_EVERY
    assert len([a for a in eng.state.alerts.values() if a["code"] == "card_after_last_round"]) == 1
    # acknowledging it: the pending cards' summary first, then the clear
    out = eng.handle(cmd("acknowledge_alert", 300, "ack", alert_id=alert.data["alert_id"]))
    events += out
    assert kinds(out)[:2] == ["cards_refused", "command_accepted"]
    assert out[0].data["refused"] == 500
    assert eng.state.alerts == {}
    # the next card starts a new episode
    out = eng.handle(read("2c", 301))
    events += out
    assert alerts(out, "card_after_last_round")[0].data["alert_id"] != alert.data["alert_id"]
    assert_legal(events, 8)
    assert_restores(eng, events)


def test_an_idle_tick_summarises_cards_waiting_longer_than_the_interval() -> None:
    eng = engine()
    events = feed(eng, [read(c, 10 + k) for k, c in enumerate(_codes(5))])  # no shoe
    assert kinds(events) == ["alert_raised"]
    assert eng.handle(Tick(at=10 + SUMMARY_AFTER_S - 1)) == []
    out = eng.handle(Tick(at=11 + SUMMARY_AFTER_S))
    (summary,) = out
    assert summary.kind == "cards_refused"
    assert summary.data["reason"] == "no_shoe"
    assert summary.data["codes"] == _codes(5)[1:]
    assert summary.data["counted"] == {}
    assert summary.data["first_read"]["read_at"] == 11
    assert summary.data["last_read"]["read_at"] == 14
    assert eng.state.alerts[summary.data["alert_id"]]["details"]["refused"] == 5
    assert_restores(eng, events + out)


def test_a_resent_card_is_absorbed_once_and_a_clean_stop_gets_its_summary() -> None:
    eng = engine()
    events = feed(eng, [CardRead(ALL_CARDS[0], 1, transmission_id="7")])
    again = [CardRead(ALL_CARDS[k], 2 + k, transmission_id=str(k)) for k in (1, 2)]
    events += feed(eng, [*again, again[0]])  # the first one sent a second time
    assert events[1:] == []
    out = eng.summarise_refusals()
    assert [e.data["codes"] for e in out] == [[ALL_CARDS[1].code, ALL_CARDS[2].code]]
    assert eng.summarise_refusals() == []
    assert_restores(eng, events + out)


def _envelope(event: Event, seq: int) -> bytes:
    body = event.to_dict()
    return json.dumps(
        {
            "schema_version": 1,
            "event_id": "0b5c8f8e-8f43-5d1e-9d8e-3f1f1c7a2b11",
            "seq": seq,
            "table_id": "T1",
            "shoe_id": body["shoe_id"],
            "hand": body["hand"],
            "kind": body["kind"],
            "ts": body["at"],
            "published_at": body["at"],
            "source": body["source"],
            "data": body["data"],
        }
    ).encode()


def test_every_summary_fits_the_event_contract() -> None:
    eng = engine()
    events = start_shoe(eng) + eng.handle(StorageState(True, 50, "disk full"))
    events += feed(eng, [read(c, 60 + k) for k, c in enumerate(_codes(200))])
    events += feed(eng, [read(c, 400 + k) for k, c in enumerate(_codes(5))])  # the 30 s rule
    events += eng.summarise_refusals()
    summaries = of_kind(events, "cards_refused")
    assert len(summaries) >= 4
    for seq, summary in enumerate(summaries, 1):
        validate_payload("x/events", _envelope(summary, seq))
    too_many = summaries[0]._replace(data={**summaries[0].data, "codes": _codes(51)})
    with pytest.raises(jsonschema.ValidationError):
        validate_payload("x/events", _envelope(too_many, 1))
