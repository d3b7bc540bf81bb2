"""``baccarat-edge run`` with a line reader on a pty, an image-folder camera and a real broker.

Issue #12: the camera exists for the cards the reader cannot read. Here the reader misreads
Player 2 in two rounds; the camera, replaying a folder whose one image the test rewrites as
the dealer lays the cards, names both: a clearly visible card (both corners) and a card half
covered by a hand, read by one corner and confirmed by its face. Both reach the engine's
default ``camera.min_confidence`` on the recogniser's scale, fill the misread slot, and the
rounds settle with the cards physically dealt. The camera is named ``overhead`` (in
``table.camera.devices``), not ``camera``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from common.cards import Card
from daemon.simulation.dealer import DealSettings
from drivers.camera.decide import CONFIDENT
from drivers.camera.recognize import Recognizer
from drivers.pty_device import PtyDevice
from tests.camera.synth import SynthFrame, felt_table, load_faces, table_scene
from tests.camera.test_settings import layout
from tests.service.harness import (
    DaemonProcess,
    TableSubscriber,
    contract_violations,
    received_winners,
    wait_until_commandable,
    write_config,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

SUIT_LETTER = {"s": "S", "h": "H", "c": "C", "d": "D"}
ROUND_1 = {"P1": "4c", "B1": "2d", "P2": "5h", "B2": "3s"}  # Player 9, Banker 5: naturals end it
ROUND_2 = {"P1": "Ks", "B1": "8d", "P2": "9c", "B2": "Qh"}  # Player 9, Banker 8
ONE_CORNER = ("read (one corner, face names it too)", "read (one corner, face agrees)")


def line(code: str) -> bytes:
    card = Card.parse(code)
    return f"{SUIT_LETTER[card.suit.value]}{int(card.rank):02d}\r\n".encode()


def scene(
    faces: dict[Card, Any], cards: dict[str, str], seed: int, occluded: tuple[str, ...] = ()
) -> SynthFrame:
    placed = {slot: Card.parse(code) for slot, code in cards.items()}
    return table_scene(faces, placed, np.random.default_rng(seed), occluded)


def occluded_scene(faces: dict[Card, Any], recognizer: Recognizer) -> SynthFrame:
    """Round 2's layout with Player 2 under a hand, read by one corner that the face confirms."""
    for seed in range(200):
        frame = scene(faces, ROUND_2, seed, occluded=("P2",))
        reads = {r.card.code if r.card else None: r for r in recognizer.recognize_frame(frame.image)}
        p2 = reads.get(ROUND_2["P2"])
        others_clear = all(reads.get(code) is not None for code in ROUND_2.values())
        if p2 is not None and p2.reason in ONE_CORNER and p2.confidence >= CONFIDENT and others_clear:
            return frame
    pytest.fail("no occluded Player 2 read by one corner in 200 scenes")


def show(folder: Path, frame: SynthFrame | np.ndarray) -> None:
    """Replace the camera's one image atomically (the folder source reads it at every frame)."""
    image = frame.image if isinstance(frame, SynthFrame) else frame
    ok, png = cv2.imencode(".png", image)
    assert ok
    staging = folder.parent / "staging.png"
    staging.write_bytes(png.tobytes())
    os.replace(staging, folder / "table.png")


def camera_settings(folder: Path, templates: Path) -> dict[str, Any]:
    return {
        "source": str(folder),
        "source_kind": "folder",
        "templates": str(templates),
        "layout": layout(),
        "fps": 10,
        "stability_frames": 2,
        "loop_replay": True,
        "stale_frame_s": None,
        "device": "overhead",
    }


def alerts(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["code"] for e in events if e["kind"] == "alert_raised"]


def camera_fills(events: list[dict[str, Any]]) -> list[tuple[int, str, str, float]]:
    return [
        (e["data"]["round"], e["data"]["slot"], e["data"]["card"], e["data"]["read"]["confidence"])
        for e in events
        if e["kind"] == "card_dealt" and e["data"]["source"] == "camera"
    ]


def test_a_misread_and_an_occluded_card_are_both_filled_by_the_camera(
    tmp_path: Path, mosquitto: MosquittoBroker, decks: dict[str, Path], templates_file: Path, recognizers: Any
) -> None:
    faces = load_faces(decks["svg-cards"])
    clear_scene = scene(faces, ROUND_1, seed=3)
    hidden_scene = occluded_scene(faces, recognizers["svg-cards"])
    folder = tmp_path / "camera"
    folder.mkdir()
    show(folder, felt_table(np.random.default_rng(1)))
    shoe = PtyDevice(tmp_path / "line-reader")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, DealSettings(decks=8))
    data = json.loads(config.read_text())
    data["readers"] = [{"driver": "ascii_lines", "settings": {"url": shoe.path, "device_name": "reader"}}]
    data["camera"] = {"settings": camera_settings(folder, templates_file)}
    data["table"]["camera"] = {"devices": ["overhead"]}
    config.write_text(json.dumps(data, indent=1))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")

    def wait_events(predicate: Any, what: str, timeout: float = 60) -> None:
        assert subscriber.wait_for(lambda s: predicate(s.sorted_events()), timeout), (
            f"waiting for {what}: {[e['kind'] for e in subscriber.sorted_events()]}\n"
            + daemon.log_path.read_text()[-4000:]
        )

    try:
        assert subscriber.wait_for(lambda s: "online" in s.status, 30), daemon.log_path.read_text()
        wait_until_commandable(daemon)
        daemon.wait_for_log("device connected")
        assert subscriber.sender.send("new_shoe", {"shoe_id": "e2e-camera"}).get("status") == "accepted"
        shoe.write(line("Ad") + line("7c"))  # indicator A♦ burns one card
        wait_events(lambda ev: any(e["kind"] == "bets_offered" for e in ev), "the first round offered")
        for number, (cards, frame) in enumerate(((ROUND_1, clear_scene), (ROUND_2, hidden_scene)), start=1):
            shoe.write(line(cards["P1"]) + line(cards["B1"]) + b"P2?\r\n")  # Player 2 unreadable
            wait_events(lambda ev, n=number: alerts(ev).count("rescan_needed") == n, f"misread {number}")
            show(folder, frame)  # the dealer's cards now lie on the layout
            wait_events(lambda ev, n=number: len(camera_fills(ev)) == n, f"camera fill {number}")
            shoe.write(line(cards["B2"]))
            wait_events(lambda ev, n=number: len(received_winners(ev)) == n, f"round {number} settled")
        status = daemon.terminate()
        assert status == 0, (status, daemon.log_path.read_text()[-6000:])
    finally:
        daemon.kill()
        shoe.close()
    subscriber.stop()
    events = subscriber.sorted_events()
    fills = camera_fills(events)
    assert [(r, slot, card) for r, slot, card, _ in fills] == [(1, "P2", "5h"), (2, "P2", "9c")]
    assert all(confidence >= CONFIDENT for *_, confidence in fills)
    dealt = {
        (e["data"]["round"], e["data"]["slot"]): e["data"]["card"]
        for e in events
        if e["kind"] == "card_dealt" and "round" in e["data"]
    }
    assert dealt == {
        (n, slot): code for n, cards in ((1, ROUND_1), (2, ROUND_2)) for slot, code in cards.items()
    }
    assert received_winners(events) == [(1, "player"), (2, "player")]
    cleared = [e["data"].get("reason") for e in events if e["kind"] == "alert_cleared"]
    assert cleared == ["camera_filled", "camera_filled"]
    assert alerts(events) == ["rescan_needed", "rescan_needed"]
    assert contract_violations(subscriber.payloads) == []
