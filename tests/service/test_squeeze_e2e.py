"""``baccarat-edge run`` on a squeeze table end to end: a simulated Angel Eye shoe on a pty, a real
mosquitto, the game server's signed reveal commands. The server's stream carries commitments, each
card only in its card_revealed (verified with the documented byte string and a nonce the service
drew from the OS), the retained state and the info-level log name no unrevealed card, and the
journal keeps the cards."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from daemon.simulation.dealer import DealSettings
from daemon.simulation.golden import seeded_nonce
from drivers.fixtures import load_fixture
from drivers.pty_device import PtyDevice
from tests.conftest import REPO_ROOT
from tests.service.harness import (
    TABLE_ID,
    DaemonProcess,
    TableSubscriber,
    contract_violations,
    play,
    wait_until_commandable,
    wait_until_idle,
    write_config,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

CARD = re.compile(r'"([A2-9TJQK][cdhs])"')


def commitment(shoe: str, hand: int, slot: str, card: str, nonce: str) -> str:
    text = f"baccarat-edge card commitment v1\n{TABLE_ID}\n{shoe}\n{hand}\n{slot}\n{card}\n{nonce}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_squeeze_table_publishes_commitments_and_shows_each_card_at_its_reveal(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    fixture = load_fixture(REPO_ROOT / "hw-fixtures" / "angel_eye-squeeze-clean.fixture.jsonl")
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(
        tmp_path, shoe.path, mosquitto.port, DealSettings(seed=11, max_hands=4)
    )
    data = json.loads(config.read_text())
    data["table"]["reveal"] = {"mode": "squeeze"}
    config.write_text(json.dumps(data, indent=1))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        assert subscriber.wait_for(lambda s: "online" in s.status, 30), daemon.log_path.read_text()
        wait_until_commandable(daemon)
        refused: list[str] = []
        play(fixture.steps, shoe, subscriber, refused, before_command=lambda: wait_until_idle(daemon, shoe))
        assert refused == []
        assert subscriber.wait_for(lambda s: s.kinds().count("round_completed") == 4, 30)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
    subscriber.stop()
    events = subscriber.sorted_events()
    assert contract_violations(subscriber.payloads) == []

    committed: dict[tuple[str, int, str], str] = {}
    shown: set[str] = set()
    nonces: list[str] = []
    for event in events:
        d = event["data"]
        text = json.dumps(event)
        assert "sealed" not in d
        if event["kind"] == "card_dealt" and d["slot"] == "indicator":
            shown.add(d["card"])
        elif event["kind"] == "card_dealt":
            assert "card" not in d
            assert "read" not in d
            committed[(event["shoe_id"], d["round"], d["slot"])] = d["commitment"]
        elif event["kind"] == "card_revealed":
            key = (event["shoe_id"], d["round"], d["slot"])
            assert commitment(*key, d["card"], d["nonce"]) == committed[key]
            shown.add(d["card"])
            nonces.append(d["nonce"])
        elif event["kind"] != "round_completed":
            assert all(code in shown for code in CARD.findall(text)), text
    assert len(nonces) == 21
    assert len(set(nonces)) == 21  # fresh for every card, from the OS: not the fixtures' seeded ones
    assert not set(nonces) & {seeded_nonce(fixture.header.name, n) for n in range(1, 60)}

    # every state the server kept: no card of a round before it is revealed (null, with commitments)
    states = [payload["state"] for name, payload in subscriber.payloads if name == "state"]
    for state in states:
        rnd = state["round"]
        if rnd is not None and rnd["cards"]:
            assert set(rnd["commitments"]) == set(rnd["cards"])
    assert any(s["round"] and None in s["round"]["cards"].values() for s in states)

    # the info-level log shows what the players may see; the journal keeps the cards
    for line in daemon.log_lines():
        if line.get("event") == "card_dealt" and line.get("slot") not in ("indicator", None):
            assert "card" not in line
            assert "read" not in line
            assert CARD.search(json.dumps(line)) is None
            assert re.search(r'"[0-9a-f]{32}"', json.dumps(line)) is None  # no nonce
    db = sqlite3.connect(tmp_path / "state" / "journal.sqlite3")
    bodies: list[dict[str, Any]] = [
        json.loads(row[0]) for row in db.execute("SELECT body FROM events WHERE kind = 'card_dealt'")
    ]
    db.close()
    published = sum(1 for e in events if e["kind"] == "card_dealt" and "commitment" in e["data"])
    assert sum(1 for b in bodies if "sealed" in b["data"]) == published == 31  # 10 burns, 21 round cards


def test_sigterm_between_the_deal_and_the_reveal_then_the_restarted_daemon_reveals(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    """The daemon stops after hand 2's cards, before its reveal: the restarted one folds the sealed
    cards and nonces back from its journal and the game server's reveal shows the committed cards."""
    fixture = load_fixture(REPO_ROOT / "hw-fixtures" / "angel_eye-squeeze-clean.fixture.jsonl")
    cut = next(
        i
        for i, s in enumerate(fixture.steps)
        if s.supervisor is not None and s.supervisor.command_id == "reveal-2"
    )
    part1, part2 = fixture.steps[:cut], fixture.steps[cut:]
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(
        tmp_path, shoe.path, mosquitto.port, DealSettings(seed=11, max_hands=4)
    )
    data = json.loads(config.read_text())
    data["table"]["reveal"] = {"mode": "squeeze"}
    config.write_text(json.dumps(data, indent=1))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    refused: list[str] = []
    daemon = DaemonProcess(config, tmp_path / "daemon-1.log")
    try:
        assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
        wait_until_commandable(daemon)
        daemon.wait_for_log("device connected")
        play(part1, shoe, subscriber, refused, before_command=lambda: wait_until_idle(daemon, shoe))
        wait_until_idle(daemon, shoe)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
    assert subscriber.wait_for(lambda s: s.status[-1:] == ["offline"], 10)
    assert subscriber.kinds().count("round_completed") == 1  # hand 2 dealt, not revealed
    daemon = DaemonProcess(config, tmp_path / "daemon-2.log")
    try:
        daemon.wait_for_log("engine_restored")
        assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
        wait_until_commandable(daemon)
        daemon.wait_for_log("device connected")
        play(part2, shoe, subscriber, refused, before_command=lambda: wait_until_idle(daemon, shoe))
        assert subscriber.wait_for(lambda s: s.kinds().count("round_completed") == 4, 30)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
        subscriber.stop()
    assert refused == []
    events = subscriber.sorted_events()
    assert subscriber.consumer.unexplained_gaps == []
    committed = {
        (e["shoe_id"], e["data"]["round"], e["data"]["slot"]): e["data"]["commitment"]
        for e in events
        if e["kind"] == "card_dealt" and e["data"].get("round")
    }
    revealed = [e for e in events if e["kind"] == "card_revealed"]
    assert len(revealed) == 21
    for event in revealed:
        d = event["data"]
        key = (event["shoe_id"], d["round"], d["slot"])
        assert commitment(*key, d["card"], d["nonce"]) == committed[key]
