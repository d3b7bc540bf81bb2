"""The monitor's table view and the ``monitor --once`` command against a real mosquitto."""

from __future__ import annotations

import json
import subprocess
import sys

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.service.table_text import render
from daemon.service.table_view import TableView
from tests.fleet.synthetic import SyntheticTable
from tests.support.broker import MosquittoBroker

BASE = "baccarat/v1/T9"
T9 = SyntheticTable("T9", shoe_id="shoe-7", hand=12)


def _state(**snapshot: object) -> bytes:
    """A schema-valid retained state of table T9 with these snapshot members changed."""
    body = json.loads(T9.state(1.0))
    body["state"] |= snapshot
    return json.dumps(body).encode()


def _round(hand: int, cards: dict[str, str]) -> dict[str, object]:
    """A round in progress as the engine's snapshot carries it."""
    return {
        "hand": hand,
        "opened_at": 1.0,
        "cards": cards,
        "sources": dict.fromkeys(cards, "reader"),
        "holds": [],
        "awaiting_verdict": False,
        "super_round_die": None,
        "corrected": False,
        "player_total": 0,
        "banker_total": 0,
        "next_slot": "P2",
        "blocked_by": [],
    }


def _event(seq: int, kind: str, data: dict[str, object], hand: int | None = None) -> bytes:
    return json.dumps(
        {
            "schema_version": 1,
            "event_id": f"id-{seq}",
            "seq": seq,
            "table_id": "T9",
            "shoe_id": "shoe-1",
            "hand": hand,
            "kind": kind,
            "ts": 1000.0 + seq,
            "published_at": 1000.5 + seq,
            "source": "reader",
            "data": data,
        }
    ).encode()


def _round_messages(start_seq: int, hand: int, cards: dict[str, str], winner: str) -> list[bytes]:
    out = [_event(start_seq, "round_opened", {"hand": hand}, hand)]
    seq = start_seq + 1
    for slot, card in cards.items():
        out.append(_event(seq, "card_dealt", {"slot": slot, "card": card, "round": hand}, hand))
        seq += 1
    out.append(_event(seq, "round_completed", {"hand": hand, "outcome": {"winner": winner}}, hand))
    return out


def test_view_follows_rounds_dedups_and_reports_gaps() -> None:
    view = TableView("T9")
    view.apply(f"{BASE}/status", T9.status(1.0))
    view.apply(f"{BASE}/events", _event(1, "shoe_started", {}))
    messages = _round_messages(2, 1, {"P1": "9s", "B1": "2h", "P2": "Kd", "B2": "3c"}, "player")
    for payload in messages:
        view.apply(f"{BASE}/events", payload)
    view.apply(f"{BASE}/events", messages[-1])  # at-least-once: a duplicate
    assert view.duplicates == 1
    assert view.results == ["player"]
    [line] = view.last_rounds
    assert (line.hand, line.winner, line.player_total, line.banker_total) == (1, "player", 9, 5)
    view.apply(f"{BASE}/events", _event(20, "round_opened", {"hand": 2}, 2))
    assert view.gaps == [(8, 19)]
    view.apply(f"{BASE}/events", _event(21, "card_dealt", {"slot": "P1", "card": "Ah", "round": 2}, 2))
    assert view.round_cards == {"P1": "Ah"}
    view.apply(
        f"{BASE}/events",
        _event(22, "alert_raised", {"alert_id": "a-1", "code": "rescan_needed", "message": "rescan"}),
    )
    assert "a-1" in view.open_alerts
    view.apply(f"{BASE}/events", _event(23, "alert_cleared", {"alert_id": "a-1"}))
    assert view.open_alerts == {}
    screen = render(view, colour=False)
    assert "Table T9" in screen
    assert "status: online" in screen
    assert "hand   1  PLAYER" in screen
    assert "1 gaps" in screen


def test_view_shows_the_betting_window_phase() -> None:
    """Issue #12: a betting_window table's phase and the server's round id, from events and state."""
    view = TableView("T9")
    assert "Betting  - (no betting window seen" in render(view, colour=False)
    view.apply(f"{BASE}/events", _event(1, "shoe_started", {}))
    opened: dict[str, object] = {
        "phase": "betting",
        "round_id": "T9-1001",
        "closes_at": None,
        "source": "server",
    }
    view.apply(f"{BASE}/events", _event(2, "betting_opened", opened))
    assert (view.betting_phase, view.betting_round_id) == ("betting", "T9-1001")
    assert (
        "Betting  OPEN: bets are being placed; a card drawn now is exposed round T9-1001 (from server)"
        in (render(view, colour=False))
    )
    view.apply(f"{BASE}/events", _event(3, "betting_closed", {"phase": "dealing", "round_id": "T9-1001"}))
    assert "Betting  closed: dealing round T9-1001" in render(view, colour=False)
    for payload in _round_messages(4, 1, {"P1": "9s", "B1": "2h", "P2": "Kd", "B2": "3c"}, "player"):
        view.apply(f"{BASE}/events", payload)
    assert view.betting_phase == "waiting"
    flow = {"phase": "betting", "round_id": "T9-1002", "closes_at": None,
            "last_round_id": "T9-1002", "burn_signalled": False}  # fmt: skip
    view.apply(f"{BASE}/state", _state(game_flow=flow))
    assert view.malformed == 0, view.last_problem
    assert (view.betting_phase, view.betting_round_id) == ("betting", "T9-1002")
    # A cards_only table's state says "waiting" forever: no window is shown until one opens.
    quiet = TableView("T9")
    quiet.apply(f"{BASE}/state", T9.state(1.0))
    assert quiet.malformed == 0, quiet.last_problem
    assert quiet.betting_phase is None


def test_view_survives_garbage() -> None:
    view = TableView("T9")
    view.apply(f"{BASE}/events", b"\xff\xfe not json")
    view.apply(f"{BASE}/state", b"[1, 2]")
    assert view.last_problem == "state: not a JSON object but list"
    view.apply(f"{BASE}/events", json.dumps({"kind": "card_dealt", "data": {"slot": "P1"}}).encode())
    view.apply(f"{BASE}/health", b"{}")
    assert view.last_problem == "health: schema_version None is not 1"
    assert view.malformed == 4
    assert (view.state, view.health) == (None, None)
    assert "4 malformed (health: schema_version None is not 1)" in render(view, colour=False)


def test_a_retained_payload_the_schema_refuses_is_a_named_problem_not_taken() -> None:
    """The monitor reads retained status, health and state by the contract's schemas, as the
    console and the fleet view do: what a schema refuses is named and leaves the view as it was."""
    view = TableView("T9")
    view.apply(f"{BASE}/state", _state(round=_round(12, {"P1": "8s"})))
    view.apply(f"{BASE}/status", T9.status(1.0))
    assert (view.status, view.round_cards, view.malformed) == ("online", {"P1": "8s"}, 0)
    view.apply(f"{BASE}/state", _state(round=_round(13, {"P1": "8s", "X9": "Qh"})))
    assert view.last_problem is not None
    assert view.last_problem.startswith("state: state/round/cards: 'X9' is not one of ['P1', 'B1',")
    view.apply(f"{BASE}/status", json.dumps({"schema_version": 1, "table_id": "T9", "status": "up"}).encode())
    assert view.last_problem.startswith("status: (top level): 'ts' is a required property")
    other = json.loads(T9.status(1.0)) | {"table_id": "T8"}
    view.apply(f"{BASE}/status", json.dumps(other).encode())
    assert view.last_problem == "status: table_id 'T8' on the topic of table 'T9'"
    assert (view.status, view.round_hand, view.round_cards, view.malformed) == ("online", 12, {"P1": "8s"}, 3)
    assert "3 malformed (status: table_id 'T8'" in render(view, colour=False)


@pytest.mark.mosquitto
def test_monitor_once_prints_the_table_from_retained_and_live_topics(mosquitto: MosquittoBroker) -> None:
    publisher = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    publisher.connect("127.0.0.1", mosquitto.port)
    publisher.loop_start()
    try:
        publisher.publish(f"{BASE}/status", T9.status(1.0), qos=1, retain=True).wait_for_publish(5)
        # the shape the publisher retains: its envelope around the engine's snapshot
        shoe = json.loads(T9.state(1.0))["state"]["shoe"] | {"cards_out": 9, "phase": "round"}
        alert = {"alert_id": "a-3", "code": "rescan_needed", "message": "rescan the card", "hand": 12,
                 "holds": 12, "device": None, "details": {}}  # fmt: skip
        state = _state(
            shoe=shoe,
            offered_bets={"hand": 12, "bets": ["player", "banker", "tie"]},
            round=_round(12, {"P1": "8s", "B1": "Th"}),
            alerts=[alert],
        )
        publisher.publish(f"{BASE}/state", state, qos=1, retain=True).wait_for_publish(5)
        publisher.publish(f"{BASE}/health", T9.health(1.0), qos=1, retain=True).wait_for_publish(5)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "daemon.cli",
                "monitor",
                "--table",
                "T9",
                "--broker",
                f"mqtt://127.0.0.1:{mosquitto.port}",
                "--once",
                "--wait",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        publisher.loop_stop()
        publisher.disconnect()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Table T9" in out
    assert "status: online" in out
    assert "shoe: shoe-7" in out
    assert "hand: 12" in out
    assert "8♠" in out
    assert "T♥" in out
    assert "player, banker, tie" in out
    assert "reader connected" in out
    assert "broker connected, 0 undelivered" in out
    assert "cards out: 9" in out
    assert "! rescan_needed: rescan the card" in out


def test_monitor_says_when_the_broker_is_unreachable() -> None:
    from tests.support.broker import free_port

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "monitor",
            "--table",
            "T9",
            "--broker",
            f"mqtt://127.0.0.1:{free_port()}",
            "--once",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert "cannot reach the broker at 127.0.0.1" in result.stderr
