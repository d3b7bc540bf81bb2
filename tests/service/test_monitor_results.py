"""The monitor's roads survive a monitor restart: the engine snapshot's ``results`` rebuild them."""

from __future__ import annotations

import json
from collections.abc import Iterable

from common.cards import Card
from common.inputs import CardRead, DeviceTarget, OutsideGameCard, OutsideGameMode, SupervisorCommand
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.roads import bead_plate
from daemon.rules.variants import load_variant_by_name
from daemon.service.table_text import render
from daemon.service.table_view import TableView

BASE = "baccarat/v1/T9"
ROUNDS = (
    ("9s", "2h", "Kc", "3d"),  # player
    ("3c", "2d", "4h", "2s", "5h"),  # banker
    ("4s", "4h", "4d", "4c"),  # tie
    ("Qs", "9h", "Kh", "Jd"),  # banker natural 9
)


class Table:
    """A real engine whose events and snapshots are turned into the MQTT payloads the monitor reads."""

    def __init__(self) -> None:
        self.engine = Engine(TableSettings(), load_variant_by_name("standard"))
        self.seq = 0
        self.payloads: list[tuple[str, bytes]] = []

    def feed(self, inputs: Iterable[CardRead | SupervisorCommand | OutsideGameCard]) -> list[Event]:
        out: list[Event] = []
        for inp in inputs:
            for event in self.engine.handle(inp):
                self.seq += 1
                body = event.to_dict() | {"event_id": f"e{self.seq}", "seq": self.seq, "table_id": "T9"}
                self.payloads.append((f"{BASE}/events", json.dumps(body).encode()))
                out.append(event)
        return out

    def state(self) -> bytes:
        body = {"schema_version": 1, "table_id": "T9", "ts": 1.0, "last_seq": self.seq}
        return json.dumps(body | {"state": self.engine.snapshot()}).encode()

    def deal(self, cards: Iterable[str], at: float, **kw: object) -> list[Event]:
        return self.feed(CardRead(Card.parse(c), at + n, **kw) for n, c in enumerate(cards))  # type: ignore[arg-type]


def _started() -> Table:
    table = Table()
    table.feed([SupervisorCommand("new_shoe", 0.0, "floor", "n1", {"shoe_id": "S1"})])
    table.deal(["2c", "Kd", "Kh"], 1)  # indicator 2 burns two cards
    return table


def _replay(view: TableView, payloads: Iterable[tuple[str, bytes]]) -> None:
    for topic, payload in payloads:
        view.apply(topic, payload)


def test_a_restarted_monitor_rebuilds_the_roads_from_the_snapshot_and_follows_new_rounds() -> None:
    table = _started()
    for k, cards in enumerate(ROUNDS[:3]):
        table.deal(cards, 100 + 30 * k)
    live = TableView("T9")
    _replay(live, table.payloads)
    # The monitor restarts: it gets the retained state, then only new events.
    restarted = TableView("T9")
    restarted.apply(f"{BASE}/state", table.state())
    assert restarted.results == live.results == ["player", "banker", "tie"]
    assert bead_plate(restarted.results) == bead_plate(live.results)
    assert [(r.hand, r.winner, r.player_total, r.banker_total) for r in restarted.last_rounds] == [
        (3, "tie", 8, 8),
        (2, "banker", 7, 9),
        (1, "player", 9, 5),
    ]
    screen = render(restarted, colour=False)
    assert "Bead plate  (3 rounds)" in screen
    assert "hand   3  TIE" in screen
    seen = len(table.payloads)
    table.deal(ROUNDS[3], 200)
    _replay(restarted, table.payloads[seen:])
    assert restarted.results == ["player", "banker", "tie", "banker"]
    # A snapshot sent after those events changes nothing.
    restarted.apply(f"{BASE}/state", table.state())
    assert restarted.results == ["player", "banker", "tie", "banker"]
    assert restarted.malformed == 0


def test_a_held_round_completed_late_takes_its_place_and_a_voided_one_leaves() -> None:
    table = _started()
    # Round 1 is held: the shoe names Player 2 for the Banker 1 card.
    table.deal(["9s"], 100)
    table.deal(["2h"], 101, target=DeviceTarget.P2)
    table.deal(["Kc", "3d"], 102)
    table.deal(ROUNDS[1], 130)
    view = TableView("T9")
    _replay(view, table.payloads)
    assert view.results == ["banker"]
    seen = len(table.payloads)
    table.feed([SupervisorCommand("resolve_hold", 150, "floor", "r1", {"hand": 1})])
    table.feed([SupervisorCommand("void_round", 151, "floor", "v1", {"hand": 2, "reason": "exposed"})])
    _replay(view, table.payloads[seen:])
    assert view.results == ["player"]
    fresh = TableView("T9")
    fresh.apply(f"{BASE}/state", table.state())
    assert fresh.results == view.results


def test_a_snapshot_of_a_new_shoe_replaces_the_old_shoes_results() -> None:
    table = _started()
    table.deal(ROUNDS[0], 100)
    table.deal(ROUNDS[1], 130)
    view = TableView("T9")
    _replay(view, table.payloads)
    table.feed([SupervisorCommand("new_shoe", 200, "floor", "n2", {"shoe_id": "S2"})])
    view.apply(f"{BASE}/state", table.state())
    assert view.results == []
    assert view.shoe_id == "S2"


def test_a_counted_card_drawn_outside_the_game_is_a_card_out_of_the_shoe() -> None:
    table = _started()
    table.feed([OutsideGameCard(Card.parse("8s"), OutsideGameMode.LOCK, 50.0, transmission_id="d1")])
    view = TableView("T9")
    _replay(view, table.payloads)
    assert view.cards_in_shoe == table.engine.snapshot()["shoe"]["cards_out"] == 4
    assert [a["code"] for a in view.open_alerts.values()] == ["card_outside_game"]


def test_malformed_results_in_a_snapshot_are_named_and_the_snapshot_not_used() -> None:
    table = _started()
    table.deal(ROUNDS[0], 100)
    body = json.loads(table.state())
    view = TableView("T9")
    for results in ([{"hand": 1, "winner": "dragon"}], "PBT", ["player", "tie"]):
        body["state"]["results"] = results
        view.apply(f"{BASE}/state", json.dumps(body).encode())
    assert (view.results, view.state, view.malformed) == ([], None, 3)
    assert (view.last_problem or "").startswith("state: state/results/0: 'player' is not of type 'object'")
    view.apply(f"{BASE}/state", table.state())
    assert (view.results, view.malformed) == (["player"], 3)
