"""CameraSource end to end on replayed frames: reads by slot, reconnect, watchdog, stale frames.

Frames are real images written to a folder (or an MJPG video) and read back through the
real capture code; the hung capture is a real FIFO that blocks ``cv2.imread``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from common.cards import Card
from common.inputs import CardRead, DeviceConnection, DeviceTarget, EngineInput, Source
from drivers.camera.settings import CameraSettings, parse_camera_settings
from drivers.camera.source import CameraSource
from drivers.device import Device
from drivers.registry import load
from tests.camera.synth import SLOT_BOXES, card_corners, felt_table, load_faces, paste
from tests.camera.test_settings import layout

WAIT_S = 30.0  # upper bound for a background event to show up (not a timing assertion)


class Collector:
    """A thread-safe sink that lets the test wait for what it expects."""

    def __init__(self) -> None:
        self.items: list[EngineInput] = []
        self._cond = threading.Condition()

    def __call__(self, item: EngineInput) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[EngineInput]], bool], what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.items), timeout=WAIT_S):
                pytest.fail(f"gave up waiting for {what}; got {self.items}")

    def connections(self) -> list[DeviceConnection]:
        with self._cond:
            return [i for i in self.items if isinstance(i, DeviceConnection)]

    def reads(self) -> list[CardRead]:
        with self._cond:
            return [i for i in self.items if isinstance(i, CardRead)]


def settings_for(source: Path | str, templates: Path, **overrides: object) -> CameraSettings:
    data: dict[str, object] = {
        "source": str(source),
        "templates": str(templates),
        "layout": layout(),
        "fps": 20,
        "stability_frames": 3,
        "watchdog_s": 2.0,
        "stale_frame_s": None,
        "reconnect_initial_s": 0.05,
        "reconnect_max_s": 0.2,
        "device": "overhead-cam",
    }
    data.update(overrides)
    return parse_camera_settings(data)


@pytest.fixture
def running() -> Iterator[list[CameraSource]]:
    sources: list[CameraSource] = []
    yield sources
    for source in sources:
        source.stop()


def _slot_center(slot: str) -> tuple[float, float]:
    x0, y0, x1, y1 = SLOT_BOXES[slot]
    return (x0 + x1) / 2 * 1280, (y0 + y1) / 2 * 720


def deal_frames(faces: dict[Card, np.ndarray], hold: int = 6) -> list[np.ndarray]:
    """Empty layout, then P1, then B1, then P2 and B2 together, then a hand sweeping over P1."""
    rng = np.random.default_rng(0)
    table = felt_table(rng)
    stages: list[list[tuple[str, Card]]] = [
        [],
        [("P1", Card.parse("9d"))],
        [("P1", Card.parse("9d")), ("B1", Card.parse("8c"))],
        [
            ("P1", Card.parse("9d")),
            ("B1", Card.parse("8c")),
            ("P2", Card.parse("4s")),
            ("B2", Card.parse("Ah")),
        ],
    ]
    frames: list[np.ndarray] = []
    for cards in stages:
        frame = table.copy()
        for slot, card in cards:
            face = faces[card]
            paste(
                frame,
                face,
                card_corners(_slot_center(slot), 180, face.shape[1] / face.shape[0], 3.0, 0.0, rng),
            )
        frames.extend([frame] * hold)
    still = frames[-1]
    cx, cy = _slot_center("P1")
    for step in range(4):  # a skin-toned hand moving across P1, then gone
        moving = still.copy()
        x = int(cx - 150 + 100 * step)
        cv2.ellipse(moving, (x, int(cy)), (90, 60), 20, 0, 360, (110, 150, 210), -1)
        frames.append(moving)
    frames.extend([still] * hold)
    return frames


@pytest.fixture(scope="module")
def frames(decks: dict[str, Path]) -> list[np.ndarray]:
    return deal_frames(load_faces(decks["svg-cards"]))


def write_folder(folder: Path, frames: list[np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{index:04d}.png"), frame)
    return folder


def test_folder_replay_reports_each_dealt_card_once_by_slot(
    frames, templates_file: Path, tmp_path: Path, running
) -> None:
    sink = Collector()
    source = CameraSource(
        settings_for(write_folder(tmp_path / "deal", frames), templates_file), sink, time.monotonic
    )
    running.append(source)
    source.start()
    sink.wait_for(
        lambda items: any(isinstance(i, DeviceConnection) and not i.connected for i in items), "end"
    )
    reads = sink.reads()
    assert [(r.card.code, r.target) for r in reads] == [
        ("9d", DeviceTarget.P1),
        ("8c", DeviceTarget.B1),
        ("4s", DeviceTarget.P2),
        ("Ah", DeviceTarget.B2),
    ]
    # P2 and B2 appeared in the same frame: one batch numbered in draw order.
    assert [r.position for r in reads[2:]] == [1, 2]
    assert all(r.source is Source.CAMERA and r.device == "overhead-cam" for r in reads)
    assert all(r.confidence is not None and 0.6 <= r.confidence <= 1.0 for r in reads)
    connections = sink.connections()
    assert [c.connected for c in connections] == [True, False]
    assert connections[-1].detail == "end of replay"
    health = source.health()
    assert health["ended"] is True
    assert health["reads"] == 4
    assert health["frames"] > 0


def test_the_camera_runs_through_the_device_protocol(frames, templates_file: Path, tmp_path: Path) -> None:
    """Built by the registry and driven only through ``Device``: progress while its thread lives,
    none once a replay has ended (what stops the service's watchdog pings)."""
    collector = Collector()
    connected = threading.Event()
    release = threading.Event()

    def sink(item: EngineInput) -> None:
        collector(item)
        if isinstance(item, DeviceConnection) and item.connected:
            connected.set()
            release.wait(WAIT_S)  # hold the camera thread here: it is certainly alive

    settings = settings_for(write_folder(tmp_path / "deal", frames), templates_file)
    device: Device = load("camera").build(settings, sink, time.monotonic)
    assert device.last_progress() is None  # not started
    device.start()
    try:
        assert connected.wait(WAIT_S)
        assert device.last_progress() is not None
        assert device.health()["connected"] is True
        release.set()
        collector.wait_for(
            lambda items: any(isinstance(i, DeviceConnection) and not i.connected for i in items), "end"
        )
        deadline = time.monotonic() + WAIT_S
        while device.last_progress() is not None:
            assert time.monotonic() < deadline, "the camera thread outlived the end of its replay"
            time.sleep(0.05)
        health = device.health()
        assert health["connected"] is False
        assert dict(health)["ended"] is True
    finally:
        release.set()
        device.stop()


def test_video_file_replay(frames, templates_file: Path, tmp_path: Path, running) -> None:
    video = tmp_path / "deal.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), 20, (1280, 720))
    assert writer.isOpened()
    # Each frame three times: a replay is paced like a live camera, which keeps only its latest
    # frame, so a CPU shared with a parallel test run must not make the analysis miss a card.
    for frame in frames:
        for _ in range(3):
            writer.write(frame)
    writer.release()
    sink = Collector()
    source = CameraSource(settings_for(video, templates_file), sink, time.monotonic)
    running.append(source)
    source.start()
    sink.wait_for(
        lambda items: any(isinstance(i, DeviceConnection) and not i.connected for i in items), "end"
    )
    assert [r.card.code for r in sink.reads()] == ["9d", "8c", "4s", "Ah"]


def test_folder_gone_and_back_reconnects(frames, templates_file: Path, tmp_path: Path, running) -> None:
    folder = write_folder(tmp_path / "live", frames[:8])
    sink = Collector()
    source = CameraSource(settings_for(folder, templates_file, loop_replay=True), sink, time.monotonic)
    running.append(source)
    source.start()
    sink.wait_for(
        lambda items: any(isinstance(i, DeviceConnection) and i.connected for i in items), "connect"
    )
    away = tmp_path / "away"
    folder.rename(away)
    sink.wait_for(
        lambda items: any(isinstance(i, DeviceConnection) and not i.connected for i in items), "loss"
    )
    away.rename(folder)
    sink.wait_for(
        lambda items: sum(isinstance(i, DeviceConnection) and i.connected for i in items) >= 2, "back"
    )
    assert [c.connected for c in sink.connections()][:3] == [True, False, True]
    assert source.health()["reconnects"] >= 1


def test_watchdog_abandons_a_hung_capture_and_reconnects(
    frames, templates_file: Path, tmp_path: Path, running
) -> None:
    folder = write_folder(tmp_path / "hang", frames[:4])
    fifo = folder / "0004.png"
    os.mkfifo(fifo)  # cv2.imread blocks opening it: a capture call that never returns
    sink = Collector()
    source = CameraSource(settings_for(folder, templates_file, watchdog_s=0.5), sink, time.monotonic)
    running.append(source)
    source.start()
    try:
        sink.wait_for(
            lambda items: any(
                isinstance(i, DeviceConnection)
                and not i.connected
                and (i.detail or "").startswith("watchdog")
                for i in items
            ),
            "watchdog",
        )
        health = source.health()
        assert health["watchdog_trips"] >= 1
    finally:
        # Wake the reader(s) blocked opening the FIFO (a writer arriving lets open() return;
        # closing at once gives them end-of-file), then take the FIFO away.
        with contextlib.suppress(OSError):  # OSError: nobody blocked on it at this instant
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        fifo.unlink()
    sink.wait_for(lambda items: any(getattr(i, "detail", None) == "end of replay" for i in items), "end")
    assert source.health()["abandoned_captures"] >= 1


def test_frozen_stream_of_identical_frames_is_detected(
    frames, templates_file: Path, tmp_path: Path, running
) -> None:
    folder = tmp_path / "frozen"
    folder.mkdir()
    cv2.imwrite(str(folder / "0000.png"), frames[0])
    for index in range(1, 4):
        shutil.copy(folder / "0000.png", folder / f"{index:04d}.png")
    sink = Collector()
    settings = settings_for(folder, templates_file, loop_replay=True, stale_frame_s=0.3)
    source = CameraSource(settings, sink, time.monotonic)
    running.append(source)
    source.start()
    sink.wait_for(
        lambda items: any(
            isinstance(i, DeviceConnection) and not i.connected and (i.detail or "").startswith("stale")
            for i in items
        ),
        "stale detection",
    )
    assert source.health()["stale_trips"] >= 1


def test_a_camera_that_never_opens_keeps_retrying_quietly(templates_file: Path, running) -> None:
    sink = Collector()
    source = CameraSource(settings_for("/dev/video-missing-99", templates_file), sink, time.monotonic)
    running.append(source)
    assert source.health()["state"] == "opening"  # no open attempt yet: no alert is due
    source.start()
    deadline = time.monotonic() + WAIT_S
    while source.health()["reconnects"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert source.health()["reconnects"] >= 2
    assert source.health()["connected"] is False
    assert source.health()["state"] == "disconnected"  # the first attempt has its result
    assert sink.connections() == []  # never connected, so nothing to announce as lost
    assert "cannot open" in (source.health()["last_error"] or "")
