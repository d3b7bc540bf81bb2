"""The betting window judged by time (issue 21 items 3-4) and the clock gate (issue 24 item 4): a
late close_betting issued before the cards it arrives after makes them the round's (within the
skew bound, never a card read before the close's own time); a card right after a decided round is
its unneeded card even if betting has reopened; open_betting is refused while the clock is
unsynchronised or the server's command time is too far off."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from common.inputs import ClockStatus, SupervisorCommand
from daemon.engine.events import Event
from daemon.engine.table import Engine
from daemon.rules.outcome import next_slot
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    engine,
    feed,
    of_kind,
    read,
    start_shoe,
)

# A natural: P1 8, B1 2, P2 K, B2 3 -> Player 8 against Banker 5, no third card.
NATURAL = ("8c", "2d", "Kh", "3s")
NATURAL_2 = ("9c", "4d", "Qh", "2s")


def window(**settings: Any) -> Engine:
    return engine(game_flow="betting_window", **settings)


def server(action: str, at: float, issued_at: float | None, round_id: str) -> SupervisorCommand:
    """A game server command received at ``at``, signed with its issued time ``issued_at``."""
    return SupervisorCommand(
        action, at, "game_server:gs", f"{action}-{round_id}", {"round_id": round_id}, issued_at
    )


def open_window(eng: Engine, round_id: str, at: float) -> list[Event]:
    return feed(eng, [server("open_betting", at, at, round_id)])


def replies(events: list[Event]) -> list[tuple[str, str | None]]:
    return [(e.data["action"], e.data["reason"]) for e in events if e.kind.startswith("command_")]


def dealt_round_cards(events: list[Event]) -> list[dict[str, str]]:
    return [e.data["cards"] for e in of_kind(events, "round_completed")]


# ------------------------------------------------------------------ a late close


def test_a_close_arriving_after_the_first_card_but_issued_before_it_is_honoured() -> None:
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read(NATURAL[0], 20.2)])  # read as exposed: the close is still on its way
    assert alerts(out, "card_exposed_during_betting")
    out += feed(eng, [server("close_betting", 20.5, 20.0, "1")])  # issued 0.2 s before the card
    (closed,) = of_kind(out, "betting_closed")
    assert closed.data["issued_at"] == 20.0
    assert closed.data["skew_s"] == 0.5
    assert closed.data["within_skew"] is True
    assert closed.data["claimed"] == ["8c"]
    out += feed(eng, [read(c, 21 + k) for k, c in enumerate(NATURAL[1:])])
    assert dealt_round_cards(out) == [dict(zip(("P1", "B1", "P2", "B2"), NATURAL, strict=True))]
    assert not eng.state.held
    assert not eng.state.next_round_holds
    (cleared,) = [
        e for e in out if e.kind == "alert_cleared" and e.data["code"] == "card_exposed_during_betting"
    ]
    assert cleared.data["reason"].startswith("betting had closed")
    assert eng.state.counts["8c"] == 1
    assert eng.state.cards_out == 3 + 4
    assert eng.state.loose_cards == []
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_late_close_claims_every_card_read_after_its_time_in_order() -> None:
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read("8c", 20.1), read("2d", 20.4)])
    out += feed(eng, [server("close_betting", 20.6, 20.0, "1")])
    out += feed(eng, [read("Kh", 21), read("3s", 21.5)])
    assert dealt_round_cards(out) == [{"P1": "8c", "B1": "2d", "P2": "Kh", "B2": "3s"}]
    assert_restores(eng, out)


def test_a_card_read_before_the_closes_own_time_stays_exposed() -> None:
    # no past-posting: the card was seen while betting was still open
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read("5h", 19.8)])
    out += feed(eng, [server("close_betting", 20.3, 20.0, "1")])
    assert of_kind(out, "betting_closed")[0].data["claimed"] == []
    out += feed(eng, [read(c, 21 + k) for k, c in enumerate(NATURAL)])
    (held,) = of_kind(out, "round_held")
    assert held.data["cards"] == dict(zip(("P1", "B1", "P2", "B2"), NATURAL, strict=True))
    assert eng.state.counts["5h"] == 1
    assert_restores(eng, out)


def test_a_close_outside_the_skew_bound_leaves_the_card_exposed() -> None:
    eng = window(betting={"max_skew_s": 1.0})
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read("8c", 20.2)])
    out += feed(eng, [server("close_betting", 21.5, 20.0, "1")])  # 1.5 s after its own time
    (closed,) = of_kind(out, "betting_closed")
    assert closed.data["within_skew"] is False
    assert closed.data["claimed"] == []
    assert eng.state.open_alert_ids("card_exposed_during_betting")
    assert eng.state.next_round_holds
    out += feed(eng, [read(c, 22 + k) for k, c in enumerate(NATURAL_2)])
    assert of_kind(out, "round_held")
    assert not of_kind(out, "round_completed")
    assert_restores(eng, out)


def test_a_close_without_its_time_is_judged_on_arrival_as_before() -> None:
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read("8c", 20.2)])
    out += feed(eng, [server("close_betting", 20.5, None, "1")])
    (closed,) = of_kind(out, "betting_closed")
    assert "issued_at" not in closed.data
    assert "claimed" not in closed.data
    assert eng.state.open_alert_ids("card_exposed_during_betting")


def test_a_skew_bound_of_zero_never_honours_a_late_close() -> None:
    eng = window(betting={"max_skew_s": 0})
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [read("8c", 20.2), server("close_betting", 20.25, 20.0, "1")])
    assert of_kind(out, "betting_closed")[0].data["claimed"] == []


@settings(max_examples=60, deadline=None)
@given(
    issued=st.floats(15.0, 25.0),
    lag=st.floats(-2.0, 2.0),
    reads=st.lists(st.floats(10.5, 24.0), min_size=1, max_size=3, unique=True),
)
def test_no_card_read_before_the_close_is_ever_a_rounds_card(
    issued: float, lag: float, reads: list[float]
) -> None:
    """Whatever the times: a card is claimed exactly when it was read at or after the close's own
    time and the close came within the bound; a claimed card is counted once."""
    reads = sorted(reads)
    arrival = max(issued + lag, reads[-1] + 0.01)
    eng = window(betting={"max_skew_s": 1.0})
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    codes = ["8c", "2d", "7s"][: len(reads)]
    out += feed(eng, [read(c, t) for c, t in zip(codes, reads, strict=True)])
    out += feed(eng, [server("close_betting", arrival, issued, "1")])
    within = abs(arrival - issued) <= 1.0
    expected = [c for c, t in zip(codes, reads, strict=True) if within and t >= issued]
    assert of_kind(out, "betting_closed")[0].data["claimed"] == expected
    dealt = [e.data["card"] for e in of_kind(out, "card_dealt") if e.data.get("from_outside_game")]
    assert dealt == expected
    assert all(eng.state.counts[c] == 1 for c in codes)
    assert len(eng.state.open_alert_ids("card_exposed_during_betting")) == len(codes) - len(expected)
    assert_legal(out, 8)
    assert_restores(eng, out)


# ------------------------------------------------------------------ unneeded or exposed, by time


def test_a_card_right_after_a_decided_round_is_unneeded_even_if_betting_reopened() -> None:
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [server("close_betting", 15, 15, "1")])
    out += feed(eng, [read(c, 20 + 0.5 * k) for k, c in enumerate(NATURAL)])  # decided at 21.5
    out += open_window(eng, "2", 22.0)  # betting reopened quickly
    out += feed(eng, [read("5h", 22.3)])  # 0.8 s after the deciding card
    (burn,) = [e for e in of_kind(out, "card_dealt") if e.data["card"] == "5h"]
    assert burn.data["burn"] == "unneeded"
    (alert,) = alerts(out, "card_before_betting_closed")
    assert alert.data["holds"] is None  # RULES.md mistake 1: the next round's burn, nothing to decide
    assert not alerts(out, "card_exposed_during_betting")
    out += feed(eng, [server("close_betting", 27, 27, "2")])
    out += feed(eng, [read(c, 30 + 0.5 * k) for k, c in enumerate(NATURAL_2)])
    assert len(dealt_round_cards(out)) == 2  # the next round unaffected
    assert not eng.state.held
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_card_later_than_the_window_while_betting_is_open_is_exposed() -> None:
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [server("close_betting", 15, 15, "1")])
    out += feed(eng, [read(c, 20 + 0.5 * k) for k, c in enumerate(NATURAL)])
    out += open_window(eng, "2", 22.0)
    out += feed(eng, [read("5h", 23.5)])  # 2 s after the deciding card (window 1.5 s)
    assert alerts(out, "card_exposed_during_betting")
    assert [e.data["mode"] for e in of_kind(out, "card_outside_game")] == ["betting"]


def test_a_second_card_in_the_window_holds_the_next_round() -> None:
    # RULES.md mistake 2: the dealer may have used it as the next round's Player 1
    eng = window()
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [server("close_betting", 15, 15, "1")])
    out += feed(eng, [read(c, 20 + 0.5 * k) for k, c in enumerate(NATURAL)])
    out += open_window(eng, "2", 21.7)
    out += feed(eng, [read("5h", 22.0), read("6h", 22.8)])
    holds = [a.data["holds"] for a in alerts(out, "card_before_betting_closed")]
    assert holds == [None, "next_round"]


def test_an_unneeded_window_of_zero_keeps_every_card_while_betting_exposed() -> None:
    eng = window(betting={"unneeded_window_s": 0})
    out = start_shoe(eng)
    out += open_window(eng, "1", 10)
    out += feed(eng, [server("close_betting", 15, 15, "1")])
    out += feed(eng, [read(c, 20 + 0.5 * k) for k, c in enumerate(NATURAL)])
    out += open_window(eng, "2", 21.6)
    out += feed(eng, [read("5h", 21.7)])
    assert alerts(out, "card_exposed_during_betting")


# ------------------------------------------------------------------ the clock gate


def test_open_betting_is_refused_while_the_clock_is_unsynchronised() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [ClockStatus(False, 5, "adjtimex", "TIME_ERROR")])
    (status,) = of_kind(out, "clock_status")
    assert status.data == {"synchronised": False, "source": "adjtimex", "detail": "TIME_ERROR"}
    (lost,) = alerts(out, "clock_unsynchronised")
    assert lost.data["details"] == {"clock_source": "adjtimex", "detail": "TIME_ERROR"}
    refused = open_window(eng, "1", 10)
    assert replies(refused) == [
        ("open_betting", "betting cannot open: the table's clock is not synchronised (TIME_ERROR)")
    ]
    (gate,) = alerts(refused, "clock_gate_closed")
    assert gate.data["details"]["round_id"] == "1"
    assert gate.data["details"]["synchronised"] is False
    again = open_window(eng, "1", 12)  # the gate stays closed: refused, no second alert
    assert replies(again)[0][1] is not None
    assert not alerts(again)
    assert eng.state.flow_phase == "waiting"
    out += refused + again
    out += feed(eng, [ClockStatus(True, 14, "adjtimex", None), ClockStatus(True, 15, "adjtimex", "ok")])
    assert len(of_kind(out, "clock_status")) == 2  # a change only
    assert [e.data["code"] for e in out if e.kind == "alert_cleared"] == ["clock_unsynchronised"]
    opened = open_window(eng, "1", 16)
    assert of_kind(opened, "betting_opened")
    assert [e.data["code"] for e in opened if e.kind == "alert_cleared"] == ["clock_gate_closed"]
    out += opened
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_open_betting_is_refused_when_its_time_is_beyond_the_skew_bound() -> None:
    eng = window(betting={"max_skew_s": 1.0})
    out = start_shoe(eng)
    refused = feed(eng, [server("open_betting", 10, 8.5, "1")])
    assert replies(refused)[0][1] == (
        "betting cannot open: the command's time is +1.500 s from the table's clock "
        "(table.betting.max_skew_s 1 s)"
    )
    (gate,) = alerts(refused, "clock_gate_closed")
    assert gate.data["details"]["skew_s"] == 1.5
    assert gate.data["details"]["max_skew_s"] == 1.0
    ahead = feed(eng, [server("open_betting", 11, 12.2, "1")])  # the server's clock ahead
    assert replies(ahead)[0][1] is not None
    ok = feed(eng, [server("open_betting", 12, 11.6, "1")])
    assert of_kind(ok, "betting_opened")
    assert_restores(eng, out + refused + ahead + ok)


def test_the_gate_can_be_turned_off() -> None:
    eng = window(betting={"clock_gate": False})
    out = start_shoe(eng)
    out += feed(eng, [ClockStatus(False, 5, "adjtimex", None)])
    out += feed(eng, [server("open_betting", 10, 2, "1")])
    assert of_kind(out, "betting_opened")
    assert alerts(out, "clock_unsynchronised")  # still said


def test_clock_status_outside_a_shoe_is_recorded_and_kept_across_a_restore() -> None:
    eng = window()
    out = feed(eng, [ClockStatus(False, 1, "timedatectl", "NTPSynchronized=no")])
    assert of_kind(out, "clock_status")
    assert alerts(out, "clock_unsynchronised")
    assert eng.state.clock_synchronised is False
    assert_restores(eng, out)


# ------------------------------------------------------------------ the property over a shoe


def _deal_round(shoe: list[Card]) -> list[str]:
    player: list[Card] = []
    banker: list[Card] = []
    cards: list[str] = []
    while (slot := next_slot(player, banker)) is not None:
        card = shoe.pop()
        (player if slot.value.startswith("P") else banker).append(card)
        cards.append(card.code)
    return cards


_ROUND = st.tuples(
    st.floats(0.1, 1.0),  # the first card, after the close was issued
    st.floats(0.0, 2.0),  # the close's lag: received this long after it was issued
    st.one_of(st.none(), st.floats(0.1, 1.4)),  # an unneeded card this long after the decision
    st.floats(0.3, 2.0),  # betting reopens this long after the decision
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), rounds=st.lists(_ROUND, min_size=1, max_size=6))
def test_late_closes_and_quick_reopens_never_settle_other_than_the_physical_cards(
    seed: int, rounds: list[tuple[float, float, float | None, float]]
) -> None:
    """Any lag of the close (within the bound or not) and any quick reopen with a late unneeded card:
    a completed round has exactly its physical cards; a close within the bound and unneeded cards
    within the window complete every round; every card is counted once."""
    rng = random.Random(seed)
    shoe = [card for card in ALL_CARDS for _ in range(8)]
    rng.shuffle(shoe)
    eng = window(betting={"max_skew_s": 1.0, "unneeded_window_s": 1.5})
    out = start_shoe(eng)
    physical_out = Counter(["2c", "Kd", "Kh"])
    physical: dict[str, list[str]] = {}
    inputs: list[tuple[float, int, Any]] = []
    t = 10.0
    for n, (first, lag, unneeded, reopen) in enumerate(rounds, start=1):
        round_id = str(n)
        if n == 1:
            inputs.append((t, len(inputs), server("open_betting", t, t, round_id)))
        closed = t + 5
        inputs.append((closed + lag, len(inputs), server("close_betting", closed + lag, closed, round_id)))
        cards = _deal_round(shoe)
        physical[round_id] = cards
        physical_out.update(cards)
        times = [closed + first + 0.8 * k for k in range(len(cards))]
        inputs += [(at, len(inputs), read(code, at)) for code, at in zip(cards, times, strict=True)]
        decided = times[-1]
        if unneeded is not None:
            burned = shoe.pop().code
            physical_out[burned] += 1
            inputs.append((decided + unneeded, len(inputs), read(burned, decided + unneeded)))
        next_open = decided + reopen
        inputs.append((next_open, len(inputs), server("open_betting", next_open, next_open, str(n + 1))))
        t = next_open
    for _at, _k, inp in sorted(inputs, key=lambda item: (item[0], item[1])):
        out += feed(eng, [inp])
    completed = of_kind(out, "round_completed")
    for e in completed:
        assert list(e.data["cards"].values()) == physical[e.data["round_id"]], e.data["round_id"]
    if all(lag <= 1.0 for _first, lag, _u, _r in rounds):
        assert [e.data["round_id"] for e in completed] == list(physical)
        assert not eng.state.open_alert_ids("card_exposed_during_betting")  # raised, then claimed
        assert not of_kind(out, "round_held")
    assert Counter({c: k for c, k in eng.state.counts.items() if k}) == physical_out
    assert_legal(out, 8)
    assert_restores(eng, out)
