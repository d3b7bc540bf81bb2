"""The monitor's table view and the ``monitor --once`` command against a real mosquitto."""

from __future__ import annotations

import json
import subprocess
import sys

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.service.table_view import TableView, render
from tests.support.broker import MosquittoBroker

BASE = "baccarat/v1/T9"


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
    view.apply(f"{BASE}/status", b"online")
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
    state = {"game_flow": {"phase": "betting", "round_id": "T9-1002", "closes_at": None,
                           "last_round_id": "T9-1002", "burn_signalled": False}}  # fmt: skip
    view.apply(f"{BASE}/state", json.dumps({"state": state}).encode())
    assert (view.betting_phase, view.betting_round_id) == ("betting", "T9-1002")
    # A cards_only table's state says "waiting" forever: no window is shown until one opens.
    quiet = TableView("T9")
    quiet.apply(f"{BASE}/state", json.dumps({"state": {"game_flow": {"phase": "waiting"}}}).encode())
    assert quiet.betting_phase is None


def test_view_survives_garbage() -> None:
    view = TableView("T9")
    view.apply(f"{BASE}/events", b"\xff\xfe not json")
    view.apply(f"{BASE}/state", b"[1, 2]")
    view.apply(f"{BASE}/events", json.dumps({"kind": "card_dealt", "data": {"slot": "P1"}}).encode())
    view.apply(f"{BASE}/health", b"{}")
    assert view.malformed == 3
    assert "malformed" in render(view, colour=False)


@pytest.mark.mosquitto
def test_monitor_once_prints_the_table_from_retained_and_live_topics(mosquitto: MosquittoBroker) -> None:
    publisher = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    publisher.connect("127.0.0.1", mosquitto.port)
    publisher.loop_start()
    try:
        status = {"table_id": "T9", "status": "online", "ts": 1.0}
        publisher.publish(f"{BASE}/status", json.dumps(status).encode(), qos=1, retain=True).wait_for_publish(
            5
        )
        # the shape the publisher retains: its envelope around the engine's snapshot
        state = {
            "table_id": "T9",
            "last_seq": 40,
            "state": {
                "shoe": {"shoe_id": "shoe-7", "cards_out": 9, "phase": "round"},
                "hand": 12,
                "offered_bets": {"hand": 12, "bets": ["player", "banker", "tie"]},
                "round": {"hand": 12, "cards": {"P1": "8s", "B1": "Th"}},
                "alerts": [{"alert_id": "a-3", "code": "rescan_needed", "message": "rescan the card"}],
            },
        }
        publisher.publish(f"{BASE}/state", json.dumps(state).encode(), qos=1, retain=True).wait_for_publish(5)
        health = {
            "connected": True,
            "queue_depth": 0,
            "devices": {"reader": {"connected": True}, "engine": {}},
        }
        publisher.publish(f"{BASE}/health", json.dumps(health).encode(), qos=1, retain=True).wait_for_publish(
            5
        )
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
