"""A shoe always ends on its signals (issue 21, item 6): the cut card's last round held, voided,
cut short or lost, and ``new_shoe`` while the last round waits for a card that never comes."""

from __future__ import annotations

from typing import Any

from common.inputs import CutCardDrawn, DeviceConnection, ReadFailed, ShoeSignal, ShoeSignalKind
from daemon.engine.events import Event
from daemon.engine.table import Engine
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    cmd,
    engine,
    feed,
    of_kind,
    read,
    start_shoe,
)

NATURAL = ("8c", "2d", "Kh", "3s")  # Player 8: decided on four cards
SHORT = ("2c", "3d", "4h")  # Player 6, Banker 3 + B2: the round needs its fourth card


def _first_round_then_cut(eng: Engine, **kw: Any) -> list[Event]:
    """Hand 1 completed; hand 2 opened; the cut card comes out during it (it is the last)."""
    out = start_shoe(eng)
    out += feed(eng, [read(c, 20 + k, **kw) for k, c in enumerate(NATURAL)])
    out += feed(eng, [read(c, 40 + k, **kw) for k, c in enumerate(SHORT[:2])])
    out += feed(eng, [CutCardDrawn(42.5)])
    (last,) = of_kind(out, "last_round")
    assert last.data["hand"] == 2
    return out


def _ended(out: list[Event]) -> Event:
    (ended,) = of_kind(out, "shoe_ended")
    return ended


def test_new_shoe_ends_a_shoe_whose_last_card_was_misread_and_never_rescanned() -> None:
    eng = engine()
    out = _first_round_then_cut(eng)
    out += feed(eng, [read(SHORT[2], 43), ReadFailed(44)])  # the shoe's last card: unreadable
    assert of_kind(out, "shoe_ended") == []
    out += feed(eng, [cmd("new_shoe", 300, "next", shoe_id="S2")])
    (refused,) = of_kind(out, "command_refused")
    assert "the shoe ended" in refused.data["reason"]
    (short,) = alerts(out, "round_cut_short")
    assert (short.data["hand"], short.data["holds"]) == (2, 2)
    assert short.data["details"]["missing"] == ["B2"]
    assert short.data["details"]["betting_source"] == "new_shoe"
    (rescan,) = alerts(out, "rescan_needed")
    assert [e for e in of_kind(out, "alert_cleared") if e.data["alert_id"] == rescan.data["alert_id"]]
    (held,) = of_kind(out, "round_held")
    assert held.data["cards"] == {"P1": "2c", "B1": "3d", "P2": "4h"}
    assert _ended(out).data["reason"] == "cut_card"
    assert eng.state.phase == "over"
    assert 2 in eng.state.held
    # the held round is the supervisor's (it is never dropped): voided, the next shoe starts
    out += feed(eng, [cmd("void_round", 301, "void", hand=2, reason="last card lost")])
    out += feed(eng, [cmd("new_shoe", 302, "again", shoe_id="S2")])
    assert of_kind(out, "shoe_started")[-1].data["shoe_id"] == "S2"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_the_readers_shoe_end_mark_ends_a_shoe_whose_last_card_never_came() -> None:
    """The reader marks the shoe taken out while the cut card's round waits for its last card (never
    scanned): the round is cut short and held, the shoe ends on its cut card. Before the last
    round the same mark only alerts (the shoe was taken out early: the supervisor decides)."""
    eng = engine()
    out = _first_round_then_cut(eng)
    out += feed(eng, [read(SHORT[2], 43), ShoeSignal(ShoeSignalKind.SHOE_ENDED, 90.0, raw="END")])
    (signal,) = of_kind(out, "shoe_signal")
    assert signal.data["applied"] is True
    (short,) = alerts(out, "round_cut_short")
    assert short.data["details"]["betting_source"] == "shoe_ended"
    assert _ended(out).data["reason"] == "cut_card"
    assert 2 in eng.state.held
    assert not alerts(out, "shoe_signal_unexpected")
    assert_restores(eng, out)

    early = engine()
    more = start_shoe(early)
    more += feed(early, [read(c, 20 + k) for k, c in enumerate(SHORT)])
    more += feed(early, [ShoeSignal(ShoeSignalKind.SHOE_ENDED, 30.0, raw="END")])
    assert alerts(more, "shoe_signal_unexpected")
    assert of_kind(more, "shoe_ended") == []


def test_new_shoe_before_the_last_round_is_still_refused_and_ends_nothing() -> None:
    eng = engine()
    out = start_shoe(eng)
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(SHORT)])
    out += feed(eng, [cmd("new_shoe", 30, "next", shoe_id="S2")])
    (refused,) = of_kind(out, "command_refused")
    assert "in progress" in refused.data["reason"]
    assert of_kind(out, "shoe_ended") == []
    assert not alerts(out, "round_cut_short")


def test_the_last_round_held_ends_the_shoe_when_it_is_decided() -> None:
    eng = engine()
    out = _first_round_then_cut(eng)
    out += feed(eng, [DeviceConnection(False, 42.6, detail="gone"), DeviceConnection(True, 42.8)])
    # P2, B2: Player 7 stands, Banker 3 draws B3
    out += feed(eng, [read("5s", 43), read("Kd", 44), read("Qc", 45)])
    assert alerts(out, "reader_gap")
    (held,) = of_kind(out, "round_held")
    assert held.data["hand"] == 2
    assert _ended(out).data["reason"] == "cut_card"
    assert eng.state.phase == "over"
    assert 2 in eng.state.held
    assert_restores(eng, out)


def test_the_last_round_voided_while_dealt_ends_the_shoe() -> None:
    eng = engine()
    out = _first_round_then_cut(eng)
    out += feed(eng, [cmd("void_round", 45, "void", reason="card dropped")])
    assert of_kind(out, "round_voided")[0].data["hand"] == 2
    assert _ended(out).data["reason"] == "cut_card"
    out += feed(eng, [cmd("new_shoe", 50, "next", shoe_id="S2")])
    assert of_kind(out, "shoe_started")[-1].data["shoe_id"] == "S2"
    assert_legal(out, 8)


def test_a_betting_window_last_round_cut_short_ends_the_shoe_without_a_new_window() -> None:
    eng = engine(game_flow="betting_window")
    out = start_shoe(eng)
    out += feed(
        eng, [cmd("open_betting", 10, "o1", round_id="1"), cmd("close_betting", 15, "c1", round_id="1")]
    )
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(SHORT)])
    out += feed(eng, [cmd("cut_card", 23, "cut")])
    out += feed(eng, [cmd("open_betting", 40, "o2", round_id="2")])  # its last card never read
    (short,) = alerts(out, "round_cut_short")
    assert short.data["details"]["next_round_id"] == "2"
    assert _ended(out).data["reason"] == "cut_card"
    assert not [e for e in of_kind(out, "betting_opened") if e.data.get("round_id") == "2"]
    assert_restores(eng, out)


def test_a_last_round_lost_entirely_ends_the_shoe_on_new_shoe() -> None:
    """The cut card between rounds makes the next round the last; the reader is out while it is
    dealt (no card of it is read): ``new_shoe`` ends the shoe and starts the next one."""
    eng = engine(game_flow="betting_window")
    out = start_shoe(eng)
    out += feed(
        eng, [cmd("open_betting", 10, "o1", round_id="1"), cmd("close_betting", 15, "c1", round_id="1")]
    )
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(NATURAL)])
    out += feed(eng, [cmd("cut_card", 25, "cut")])
    out += feed(
        eng, [cmd("open_betting", 30, "o2", round_id="2"), cmd("close_betting", 35, "c2", round_id="2")]
    )
    out += feed(eng, [cmd("new_shoe", 400, "next", shoe_id="S2")])
    ended = _ended(out)
    assert ended.data["reason"] == "replaced"
    assert ended.data["hands"] == 1
    assert of_kind(out, "shoe_started")[-1].data["shoe_id"] == "S2"
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_the_configured_round_limit_ends_the_shoe_even_when_its_last_round_is_held() -> None:
    """``max_rounds_per_shoe``: the shoe ends when that round is decided (here held for a reader
    gap), the rounds lost while the edge was down counted (server round ids skipped)."""
    eng = engine(game_flow="betting_window", max_rounds_per_shoe=3)
    out = start_shoe(eng)
    out += feed(eng, [cmd("open_betting", 10, "o1", round_id="T-1")])
    out += feed(eng, [cmd("close_betting", 15, "c1", round_id="T-1")])
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(NATURAL)])
    out += feed(eng, [cmd("open_betting", 100, "o3", round_id="T-3")])  # T-2 dealt while the edge was down
    out += feed(eng, [cmd("close_betting", 105, "c3", round_id="T-3")])
    out += feed(eng, [read(c, 110 + k) for k, c in enumerate(NATURAL)])  # hand 2 = physical round 3
    ended = _ended(out)
    assert (ended.data["reason"], ended.data["hands"]) == ("round_limit", 2)
    assert eng.state.phase == "over"
    assert 2 in eng.state.held  # held by the skipped round id: kept for the supervisor
    out += feed(eng, [read("5c", 130)])
    assert alerts(out, "card_after_last_round")
    out += feed(eng, [cmd("resolve_hold", 140, "ok", hand=2)])
    assert [e.data["hand"] for e in of_kind(out, "round_completed")] == [1, 2]
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_the_round_limit_ends_a_cards_only_shoe_at_a_voided_last_round() -> None:
    eng = engine(max_rounds_per_shoe=2)
    out = start_shoe(eng)
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(NATURAL)])
    out += feed(eng, [read(c, 40 + k) for k, c in enumerate(SHORT[:2])])
    out += feed(eng, [cmd("void_round", 45, "void", reason="card dropped")])
    assert _ended(out).data["reason"] == "round_limit"
    out += feed(eng, [cmd("new_shoe", 50, "next", shoe_id="S2")])
    assert of_kind(out, "shoe_started")[-1].data["shoe_id"] == "S2"


def test_new_shoe_ends_a_shoe_whose_limit_round_waits_for_a_card() -> None:
    eng = engine(max_rounds_per_shoe=2)
    out = start_shoe(eng)
    out += feed(eng, [read(c, 20 + k) for k, c in enumerate(NATURAL)])
    out += feed(eng, [read(SHORT[0], 40), read(SHORT[1], 41), ReadFailed(42)])
    out += feed(eng, [cmd("new_shoe", 300, "next", shoe_id="S2")])
    (short,) = alerts(out, "round_cut_short")
    assert short.data["details"]["missing"] == ["P2", "B2"]
    assert _ended(out).data["reason"] == "round_limit"
    assert 2 in eng.state.held
