"""The shoe's audit wired into the engine: the certificate at the shoe's end, the remainder count,
the irregular-shoe alert, and the table's recent shoes across a restart."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from common.cards import ALL_CARDS, Card
from common.inputs import CutCardDrawn, ReadFailed
from daemon.alerts import ALERTS, AlertCode, Severity
from daemon.audit.certificate import ShoeCertificate
from daemon.audit.factory_order import FACTORY_ORDER
from daemon.engine.checkpoint import EngineCheckpoint, capture
from daemon.engine.events import Event, EventKind
from daemon.engine.phases import Phase
from daemon.engine.table import Engine
from tests.engine.support import (
    alerts,
    assert_engine_alert_as_catalogued,
    assert_restores,
    cmd,
    engine,
    feed,
    of_kind,
    read,
    roundtrip,
)

STEP = 10.0  # seconds between cards: never inside the unneeded-card window


def shuffled(decks: int, seed: int) -> list[str]:
    cards = [c.code for _ in range(decks) for c in ALL_CARDS]
    random.Random(seed).shuffle(cards)
    return cards


def deal_shoe(
    eng: Engine, cards: list[str], *, shoe_id: str, at: float = 0.0, start: bool = True
) -> tuple[list[Event], list[str], float]:
    """Start ``shoe_id`` (unless ``start`` is false: it is started) and deal ``cards`` in order to
    the cut card's last round (the cut card 16 from the end); the events, the cards left in the
    shoe and the time reached."""
    cut_from_end = 16
    out = feed(eng, [cmd("new_shoe", at, f"new-{shoe_id}", shoe_id=shoe_id)]) if start else []
    cut_at = len(cards) - cut_from_end
    for i, code in enumerate(cards):
        at += STEP
        if i == cut_at:
            out += eng.handle(CutCardDrawn(at - 1.0))
        out += eng.handle(read(code, at))
        if eng.state.phase == Phase.OVER:
            return out, cards[i + 1 :], at
    raise AssertionError("the shoe never ended")


def count_remainder(eng: Engine, cards: list[str], at: float) -> list[Event]:
    out = feed(eng, [cmd("remainder_count", at + 1, "count", step="start")])
    out += feed(eng, [read(code, at + 2 + k) for k, code in enumerate(cards)])
    out += feed(eng, [cmd("remainder_count", at + 3 + len(cards), "done", step="finish")])
    return out


def certificates(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data for e in of_kind(events, EventKind.SHOE_CERTIFICATE)]


# ------------------------------------------------------------------ the certificate at the shoe's end
def test_the_shoe_end_certifies_every_card_seen_and_left() -> None:
    eng = engine(decks=1)
    cards = shuffled(1, seed=3)
    events, left, _ = deal_shoe(eng, cards, shoe_id="S1")
    kinds = [e.kind for e in events]
    assert kinds.index(EventKind.SHOE_CERTIFICATE) == kinds.index(EventKind.SHOE_ENDED) + 1
    (data,) = certificates(events)
    assert (data["stage"], data["reason"], data["status"]) == ("end", "cut_card", "not_counted")
    cert = ShoeCertificate.from_dict(data["certificate"])
    assert cert.seen == 52 - len(left) == eng.state.cards_out
    assert cert.left == len(left)
    assert {f.card.code: f.left for f in cert.faces if f.left} == Counter(left)
    completed = of_kind(events, EventKind.ROUND_COMPLETED)
    in_rounds = Counter(c for e in completed for c in e.data["cards"].values())
    assert {f.card.code: f.in_rounds for f in cert.faces if f.in_rounds} == in_rounds
    dealt = of_kind(events, EventKind.CARD_DEALT)
    burned = Counter(e.data["card"] for e in dealt if e.data["slot"] in ("indicator", "burn"))
    assert {f.card.code: f.burned for f in cert.faces if f.burned} == burned
    # one deck has no simulated null table: the detectors say why they did not run
    assert data["irregular"] == {
        "checked": False,
        "reason": "no simulated null table for this many decks",
        "findings": [],
    }
    assert_restores(eng, events)


def test_voided_rounds_and_a_voided_shoe_are_certified() -> None:
    eng = engine(decks=1)
    cards = shuffled(1, seed=5)
    events = feed(eng, [cmd("new_shoe", 0.0, "n", shoe_id="S1")])
    at = 0.0
    for code in cards[:12]:
        at += STEP
        events += eng.handle(read(code, at))
    in_progress = eng.state.round
    assert in_progress is not None
    on_table = list(in_progress.cards.values())
    events += eng.handle(cmd("void_shoe", at + 1, "v", reason="test"))
    (data,) = certificates(events)
    assert data["reason"] == "voided"
    cert = ShoeCertificate.from_dict(data["certificate"])
    assert sum(f.voided for f in cert.faces) == len(on_table)
    assert cert.seen == 12
    assert_restores(eng, events)


def test_a_new_shoe_certifies_the_one_it_replaces_first() -> None:
    eng = engine(decks=1)
    cards = shuffled(1, seed=7)
    events = feed(eng, [cmd("new_shoe", 0.0, "n", shoe_id="S1")])
    events += feed(eng, [read(code, STEP * (k + 1)) for k, code in enumerate(cards[:3])])
    events += feed(eng, [cmd("new_shoe", 100.0, "n2", shoe_id="S2")])
    kinds = [e.kind for e in events]
    ended = kinds.index(EventKind.SHOE_ENDED)
    assert kinds[ended + 1] == EventKind.SHOE_CERTIFICATE
    assert events[ended + 1].shoe_id == "S1"
    assert kinds.index(EventKind.SHOE_STARTED, ended) > ended + 1


def test_a_foreign_card_is_named_extra_at_the_shoe_end() -> None:
    eng = engine(decks=1)
    cards = shuffled(1, seed=11)
    foreign = cards[0]  # the indicator again: one copy more than one deck holds
    events = feed(eng, [cmd("new_shoe", 0.0, "n", shoe_id="S1")])
    at = 0.0
    for code in cards[:10]:
        at += STEP
        events += eng.handle(read(code, at))
    events += eng.handle(read(foreign, at + STEP))
    assert alerts(events, AlertCode.OVER_COMPOSITION)
    events += eng.handle(cmd("void_shoe", at + 2 * STEP, "v", reason="foreign card"))
    (data,) = certificates(events)
    assert data["status"] == "mismatch"
    assert data["certificate"]["extra"] == [{"card": foreign, "copies": 1}]
    assert_restores(eng, events)


# ------------------------------------------------------------------ the remainder count
def test_a_remainder_count_accounts_for_every_card() -> None:
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += count_remainder(eng, left, at)
    _, counted = certificates(events)
    assert (counted["stage"], counted["status"]) == ("remainder", "balanced")
    assert counted["certificate"]["totals"]["accounted"] == 52 == counted["certificate"]["totals"]["expected"]
    assert counted["certificate"]["totals"]["remainder"] == len(left)
    assert len(of_kind(events, EventKind.REMAINDER_CARD)) == len(left)
    assert not alerts(events, AlertCode.SHOE_COUNT_MISMATCH)
    assert not alerts(events, AlertCode.CARD_AFTER_LAST_ROUND)  # counted, not refused
    assert (eng.state.remainder, eng.state.certified) == (None, "remainder")
    assert_restores(eng, events)


def test_a_card_the_reader_cannot_read_during_the_count_is_rescanned_never_missing() -> None:
    """A misread during the remainder count asks for a rescan (not a card after the last round);
    the count cannot finish until the card is read, then it balances."""
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += feed(eng, [cmd("remainder_count", at + 1, "count", step="start")])
    events += feed(eng, [read(code, at + 2 + k) for k, code in enumerate(left[:3])])
    events += feed(eng, [ReadFailed(at + 10, code=1)])
    (rescan,) = alerts(events, AlertCode.RESCAN_NEEDED)
    assert rescan.data["details"]["remainder_count"] is True
    assert_engine_alert_as_catalogued(rescan.data)
    assert not alerts(events, AlertCode.CARD_AFTER_LAST_ROUND)
    early = feed(eng, [cmd("remainder_count", at + 11, "early", step="finish")])
    assert of_kind(early, EventKind.COMMAND_REFUSED)[0].data["reason"].startswith("a card of the count")
    events += early
    events += feed(eng, [read(code, at + 20 + k) for k, code in enumerate(left[3:])])  # the rescan first
    cleared = [
        e for e in of_kind(events, EventKind.ALERT_CLEARED) if e.data["alert_id"] == rescan.data["alert_id"]
    ]
    assert [e.data["reason"] for e in cleared] == ["rescanned"]
    events += feed(eng, [cmd("remainder_count", at + 90, "done", step="finish")])
    assert certificates(events)[-1]["status"] == "balanced"
    assert_restores(eng, events)


def test_eight_decks_balance_416_of_416() -> None:
    eng = engine(decks=8)
    events, left, at = deal_shoe(eng, shuffled(8, seed=8), shoe_id="S8")
    events += count_remainder(eng, left, at)
    counted = certificates(events)[-1]
    assert counted["status"] == "balanced"
    assert counted["certificate"]["totals"]["accounted"] == 416


def test_a_card_missing_from_the_remainder_is_named_and_alerted() -> None:
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    lost = left[3]
    events += count_remainder(eng, left[:3] + left[4:], at)
    counted = certificates(events)[-1]
    assert counted["status"] == "mismatch"
    assert counted["certificate"]["missing"] == [{"card": lost, "copies": 1}]
    (alert,) = alerts(events, AlertCode.SHOE_COUNT_MISMATCH)
    assert_engine_alert_as_catalogued(alert.data)
    assert ALERTS[AlertCode.SHOE_COUNT_MISMATCH].severity is Severity.CRITICAL
    assert alert.data["details"]["missing"] == [{"card": lost, "copies": 1}]
    assert alert.data["details"]["extra"] == []
    assert alert.data["details"]["accounted"] == 51
    assert_restores(eng, events)
    # the supervisor acknowledges it once the decks are checked
    done = eng.handle(cmd("acknowledge_alert", at + 500, "ack", alert_id=alert.data["alert_id"]))
    assert of_kind(done, EventKind.ALERT_CLEARED)


def test_a_foreign_card_in_the_remainder_is_named_extra() -> None:
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += count_remainder(eng, [*left, left[0]], at)
    counted = certificates(events)[-1]
    assert counted["certificate"]["extra"] == [{"card": left[0], "copies": 1}]
    (alert,) = alerts(events, AlertCode.SHOE_COUNT_MISMATCH)
    assert alert.data["details"]["extra"] == [{"card": left[0], "copies": 1}]


@pytest.mark.parametrize(
    ("step", "why"),
    [("finish", "no remainder count is running"), ("start", "no ended shoe to count"), ("go", "step")],
)
def test_a_remainder_count_out_of_place_is_refused(step: str, why: str) -> None:
    eng = engine(decks=1)
    feed(eng, [cmd("new_shoe", 0.0, "n", shoe_id="S1"), read("2c", 1.0)])
    (reply,) = eng.handle(cmd("remainder_count", 2.0, "r", step=step))
    assert reply.kind == EventKind.COMMAND_REFUSED
    assert why in reply.data["reason"]


def test_a_second_start_is_refused_and_a_resent_card_counts_once() -> None:
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += feed(eng, [cmd("remainder_count", at + 1, "a", step="start")])
    (reply,) = eng.handle(cmd("remainder_count", at + 2, "b", step="start"))
    assert reply.kind == EventKind.COMMAND_REFUSED
    card = read(left[0], at + 3, transmission_id="7")
    events += feed(eng, [card, read(left[0], at + 3.1, transmission_id="7")])
    assert eng.state.remainder == [left[0]]


def test_a_new_shoe_waits_for_the_running_count() -> None:
    eng = engine(decks=1)
    _, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    feed(eng, [cmd("remainder_count", at + 1, "a", step="start"), read(left[0], at + 2)])
    (reply,) = eng.handle(cmd("new_shoe", at + 3, "n", shoe_id="S2"))
    assert reply.kind == EventKind.COMMAND_REFUSED
    assert "remainder count is running" in reply.data["reason"]
    done = feed(eng, [cmd("remainder_count", at + 4, "f", step="finish"), cmd("new_shoe", at + 5, "n2")])
    assert [e.kind for e in done if e.kind == EventKind.SHOE_STARTED] == [EventKind.SHOE_STARTED]


def test_a_restart_during_the_remainder_count_goes_on_counting() -> None:
    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += feed(eng, [cmd("remainder_count", at + 1, "a", step="start")])
    events += feed(eng, [read(c, at + 2 + k) for k, c in enumerate(left[:5])])
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(events))
    assert restored.state.remainder == left[:5]
    more = feed(restored, [read(c, at + 10 + k) for k, c in enumerate(left[5:])])
    more += feed(restored, [cmd("remainder_count", at + 100, "f", step="finish")])
    assert certificates(more)[-1]["status"] == "balanced"


# ------------------------------------------------------------------ irregular shoes
def test_a_slug_from_the_last_shoe_is_alerted_with_its_evidence() -> None:
    eng = engine(decks=8)
    first = shuffled(8, seed=21)
    events, _, at = deal_shoe(eng, first, shoe_id="A")
    assert certificates(events)[0]["irregular"] == {"checked": True, "reason": None, "findings": []}
    assert [s["shoe_id"] for s in eng.state.recent_shoes] == ["A"]
    second = _with_slug(shuffled(8, seed=22), first, start=100, length=20)
    events, _, _ = deal_shoe(eng, second, shoe_id="B", at=at + 100)
    (alert,) = alerts(events, AlertCode.SHOE_IRREGULAR)
    assert_engine_alert_as_catalogued(alert.data)
    (finding,) = [f for f in alert.data["details"]["findings"] if f["detector"] == "repeated_stretch"]
    assert finding["earlier_shoe_id"] == "A"
    assert finding["length"] >= 20
    assert finding["probability"] < alert.data["details"]["alpha"]
    assert certificates(events)[0]["irregular"]["findings"] == alert.data["details"]["findings"]


def test_a_stretch_in_factory_order_is_alerted_without_any_history() -> None:
    eng = engine(decks=8)
    factory = [c.code for c in FACTORY_ORDER[:12]]  # a fresh deck's first twelve cards, unshuffled
    events, _, _ = deal_shoe(eng, _with_slug(shuffled(8, seed=23), factory, start=0, length=12), shoe_id="F")
    (alert,) = alerts(events, AlertCode.SHOE_IRREGULAR)
    (finding,) = [f for f in alert.data["details"]["findings"] if f["detector"] == "factory_order"]
    assert finding["length"] >= 12
    assert finding["probability_kind"] == "exact_bound"
    assert alert.data["details"]["recent_shoes"] == 0


def test_the_recent_shoes_survive_a_restart_from_the_events_and_from_a_checkpoint() -> None:
    eng = engine(decks=8)
    first = shuffled(8, seed=21)
    history, _, at = deal_shoe(eng, first, shoe_id="A")
    from_events = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(history))
    checkpoint = EngineCheckpoint.from_json(capture(eng, at).to_json())
    from_checkpoint = Engine.restore(eng.configured_settings, eng.configured_variant, [], start=checkpoint)
    second = _with_slug(shuffled(8, seed=22), first, start=50, length=12)
    for restored in (from_events, from_checkpoint):
        assert restored.state.recent_shoes == eng.state.recent_shoes
        events, _, _ = deal_shoe(restored, second, shoe_id="B", at=at + 100)
        (alert,) = alerts(events, AlertCode.SHOE_IRREGULAR)
        assert any(f["earlier_shoe_id"] == "A" for f in alert.data["details"]["findings"])


def test_a_shoe_voided_after_its_cut_card_is_certified_again_never_compared_with_itself() -> None:
    eng = engine(decks=8)
    events, _, at = deal_shoe(eng, shuffled(8, seed=41), shoe_id="A")
    events += eng.handle(cmd("void_shoe", at + 10, "v", reason="found a marked card"))
    first, second = certificates(events)
    assert (first["reason"], second["reason"]) == ("cut_card", "voided")
    assert second["irregular"]["findings"] == []
    assert not alerts(events, AlertCode.SHOE_IRREGULAR)
    assert [s["shoe_id"] for s in eng.state.recent_shoes] == ["A"]
    assert_restores(eng, events)


def test_the_table_keeps_only_its_recent_shoes_and_the_detectors_can_be_off() -> None:
    eng = engine(decks=8, audit={"irregular": {"recent_shoes": 1, "enabled": False}})
    at = 0.0
    for n, seed in enumerate((1, 2, 3)):
        events, _, at = deal_shoe(eng, shuffled(8, seed=seed), shoe_id=f"S{n}", at=at + 100)
        assert certificates(events)[0]["irregular"]["reason"] == "disabled"
    assert [s["shoe_id"] for s in eng.state.recent_shoes] == ["S2"]


def _with_slug(cards: list[str], earlier: list[str], *, start: int, length: int) -> list[str]:
    """``cards`` with ``earlier[start:start+length]`` moved in as a block at the same place (the
    composition kept: the slug's cards are taken out of where they were)."""
    slug = earlier[start : start + length]
    rest = list(cards)
    for code in slug:
        rest.remove(code)
    return rest[:start] + slug + rest[start:]


def test_the_certificate_events_fit_the_contract(tmp_path: Any) -> None:
    from daemon.journal import Journal, JournalSettings
    from daemon.mqtt.envelope import event_payload
    from tests.mqtt.support import validate_payload

    eng = engine(decks=1)
    events, left, at = deal_shoe(eng, shuffled(1, seed=3), shoe_id="S1")
    events += count_remainder(eng, left[1:], at)
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    try:
        stored = journal.append([], events)
    finally:
        journal.close()
    checked = 0
    for event in stored:
        if event.kind in (EventKind.SHOE_CERTIFICATE, EventKind.REMAINDER_CARD, "remainder_count_started"):
            validate_payload("baccarat/v1/T1/shoe_certificate", event_payload(event, "T1", 1.0, None))
            checked += 1
    assert checked == 2 + 1 + len(left) - 1
    assert Card.parse(left[0])  # (the card left out is a real one)
