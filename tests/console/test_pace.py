"""Dealers' pace from a real journal with known timestamps: exact rounds per hour, the split
of a round, mistakes per 100 rounds, and a dealer change mid-shoe attributing each round to
the dealer who started it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.engine.events import Event, EventKind
from daemon.journal.pace import IDLE_S, pace_from_events, pace_from_journal
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal

T0 = 1_800_000_000.0


def _round(
    events: list[Event], hand: int, start: float, *, betting: float, dealing: float, unneeded: bool = False
) -> None:
    """One betting-window round: opened at ``start``, betting ``betting`` s, dealt ``dealing`` s."""

    def add(kind: str, at: float, data: dict[str, Any]) -> None:
        events.append(
            Event(
                EventKind(kind),
                at,
                "shoe-1",
                hand if kind not in ("betting_opened",) else None,
                "reader",
                data,
            )
        )

    add("betting_opened", start, {"phase": "betting", "round_id": None})
    add("betting_closed", start + betting, {"phase": "dealing", "round_id": None})
    add("round_opened", start + betting + 1, {"hand": hand, "bets": []})
    add("card_dealt", start + betting + 1, {"slot": "P1", "card": "9s", "round": hand})
    if unneeded:
        add("alert_raised", start + betting + 2, {"alert_id": f"a{hand}", "code": "unneeded_card"})
    add("round_completed", start + betting + dealing, {"hand": hand, "outcome": {"winner": "player"}})


def _shoe() -> list[Event]:
    """Dealer A: rounds 1-3, 30 s apart (10 s betting, 12 s dealing, 8 s settling), one
    unneeded card in round 2. Dealer B takes over during round 3 (it stays A's) and deals
    rounds 4-5, 45 s apart (15 + 20 + 10); round 6 opens after a break longer than IDLE_S."""
    events = [
        Event(EventKind.SHOE_STARTED, T0 - 5, "shoe-1", None, "reader", {}),
        Event(
            EventKind.DEALER_CHANGED, T0 - 1, "shoe-1", None, "supervisor", {"dealer_id": "D-A", "name": "A"}
        ),
    ]
    for i, hand in enumerate((1, 2, 3)):
        _round(events, hand, T0 + 30 * i, betting=10, dealing=12, unneeded=hand == 2)
        if hand == 3:
            events.append(
                Event(EventKind.DEALER_CHANGED, T0 + 65, "shoe-1", None, "badge", {"dealer_id": "D-B"})
            )
    for i, hand in enumerate((4, 5)):
        _round(events, hand, T0 + 90 + 45 * i, betting=15, dealing=20)
    _round(events, 6, T0 + 135 + 35 + IDLE_S + 50, betting=15, dealing=20)
    return events


def test_pace_from_a_journal_is_exact_and_a_dealer_change_mid_shoe_attributes_each_round(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], _shoe())
    journal.close()
    report = pace_from_journal(path).report()  # read back from the file, as after a restart
    a, b = report["dealers"]["D-A"], report["dealers"]["D-B"]
    assert a["rounds"] == 3
    assert a["rounds_per_hour"] == 120.0  # 3 rounds in 3 x 30 s
    assert a["seconds_per_round"] == {"betting": 10.0, "dealing": 12.0, "settling": 8.0}
    assert a["mistakes"] == {"unneeded_card": 1}
    assert a["mistakes_per_100_rounds"] == {"unneeded_card": 33.33}
    assert b["rounds"] == 3  # rounds 4, 5 and 6; round 6's settling is not known yet
    # 4 and 5: 45 s each (15 + 20 + 10); round 5 to 6 is a break (idle); 6: 15 + 20
    assert b["rounds_per_hour"] == round(3 * 3600 / (45 + 35 + 35), 2)
    assert b["mistakes"] == {}
    assert report["table"]["rounds"] == 6
    assert report["table"]["rounds_per_hour"] == round(6 * 3600 / (90 + 115), 2)
    assert report["dealer"] == "D-B"


def test_a_held_round_completed_later_is_counted_once() -> None:
    events: list[dict[str, Any]] = [
        {"kind": "round_opened", "at": 0.0, "hand": 1, "data": {"hand": 1}},
        {"kind": "round_held", "at": 20.0, "hand": 1, "data": {"hand": 1}},
        {"kind": "round_opened", "at": 30.0, "hand": 2, "data": {"hand": 2}},
        {"kind": "round_completed", "at": 40.0, "hand": 1, "data": {"hand": 1}},  # the hold resolved
        {"kind": "round_completed", "at": 50.0, "hand": 2, "data": {"hand": 2}},
        {"kind": "round_opened", "at": "not a time", "hand": 3, "data": {}},
        {"kind": "alert_raised", "at": 51.0, "hand": None, "data": "not an object"},
    ]
    report = pace_from_events(events).report()
    assert report["table"]["rounds"] == 2
    assert report["table"]["rounds_per_hour"] == 2 * 3600 / 50  # 20 + 10 settling + 20
    assert list(report["dealers"]) == [""]  # no dealer was ever named


def test_pace_metrics_pass_promtool_and_carry_the_journal_figures(tmp_path: Path) -> None:
    from daemon.fleet.pace_metrics import pace_exposition
    from tests.fleet.promtool import promtool_check_metrics

    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], _shoe())
    journal.close()
    text = pace_exposition({"T1": pace_from_journal(path).report(), 'T"2': pace_from_events([]).report()})
    promtool_check_metrics(text)
    assert 'baccarat_edge_pace_rounds_per_hour{table="T1",dealer="D-A"} 120.0' in text
    assert 'baccarat_edge_pace_round_phase_seconds{table="T1",dealer="D-A",phase="dealing"} 12.0' in text
    assert (
        'baccarat_edge_pace_mistakes_per_100_rounds{table="T1",dealer="D-A",kind="unneeded_card"} 33.33'
        in text
    )
    assert 'baccarat_edge_pace_rounds{table="T\\"2",dealer="*"} 0' in text


def test_made_up_dealer_ids_cannot_grow_the_tracker_without_end() -> None:
    from daemon.journal.pace import MAX_DEALERS, OTHERS

    events: list[dict[str, Any]] = []
    for n in range(MAX_DEALERS + 50):
        at = 10.0 * n
        events += [
            {"kind": "dealer_changed", "at": at, "hand": None, "data": {"dealer_id": f"d{n}"}},
            {"kind": "round_opened", "at": at, "hand": n + 1, "data": {"hand": n + 1}},
            {"kind": "round_completed", "at": at + 5, "hand": n + 1, "data": {"hand": n + 1}},
        ]
    report = pace_from_events(events).report()
    assert len(report["dealers"]) == MAX_DEALERS + 1
    assert report["dealers"][OTHERS]["rounds"] == 50
    assert report["table"]["rounds"] == MAX_DEALERS + 50


def _health_with(pace: dict[str, Any] | None) -> bytes:
    """A retained health report as a table sends it, with ``pace`` when given."""
    import json

    from tests.fleet.synthetic import SyntheticTable

    body = json.loads(SyntheticTable("T1").health(T0))
    if pace is not None:
        body["pace"] = pace
    return json.dumps(body).encode()


def test_the_console_shows_the_tables_own_pace_from_the_first_health_after_a_restart(tmp_path: Path) -> None:
    """A console counted only the rounds it saw since it started; the table's health carries
    the pace from its journal, so a console started mid-shift shows the whole shift at once."""
    from daemon.console.table_model import ConsoleTable

    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], _shoe())
    journal.close()
    journal_pace = pace_from_journal(path).report()
    console = ConsoleTable("T1")  # just started: it has seen no event of the shift
    assert console.table_model()["pace"]["table"]["rounds"] == 0
    assert console.table_model()["pace_source"] == "console"
    console.apply("health", _health_with(journal_pace))
    assert console.table_model()["pace"] == journal_pace
    assert console.table_model()["pace_source"] == "table"
    assert console.table_model()["pace"]["dealers"]["D-A"]["rounds"] == 3
    assert console.floor_row()["rounds_per_hour"] == journal_pace["table"]["rounds_per_hour"]


def test_a_health_pace_outside_the_contract_is_never_shown() -> None:
    from daemon.console.table_model import ConsoleTable

    hostile = pace_from_events([]).report()
    hostile["dealers"] = {"X" * 3000: hostile["table"]}  # a dealer id longer than the contract allows
    console = ConsoleTable("T1")
    console.apply("health", _health_with(hostile))
    assert console.view.health is None  # refused by the schema
    assert console.table_model()["pace"] == pace_from_events([]).report()
