"""The test bench the daemon benchmarks share: a mosquitto of their own, the real daemon as a
process (``python -m daemon.cli run``), simulated shoes written into a pty, a subscriber that
timestamps what arrives, and a ``NOTIFY_SOCKET`` to catch READY.

Everything here drives the production code unchanged; only the bytes, the broker and the
observers are the bench's.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.simulation.dealer import DealSettings, plan_shoe
from drivers.fixtures import FixtureStep
from drivers.protocols.angel_eye_codec import ENQ, ETX, encode_frame
from drivers.pty_device import PtyDevice
from drivers.simulate import encode_plan
from tests.support.broker import MosquittoBroker

REPO = Path(__file__).resolve().parents[1]
SEQ_MARKS = b"123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The simulator's Angel Eye sequence marks (drivers.simulate), renumbered across shoes here."""
SHOE_CHANGE_S = 60.0
"""Simulated seconds between two shoes (a real change takes minutes)."""


# ----------------------------------------------------------------------------- shoes
@dataclass(frozen=True, slots=True)
class ShoeStream:
    """Several clean 8-deck shoes as one Angel Eye byte stream (timed steps)."""

    steps: list[FixtureStep]
    shoes: int
    card_frames: int


def shoe_stream(shoes: int, seed: int = 1, decks: int = 8) -> ShoeStream:
    """``shoes`` clean shoes back to back, as one shoe would send them.

    The simulator numbers each shoe's frames from '1'; a real shoe keeps counting, so the
    marks are renumbered to continue across shoes (otherwise the daemon's repeat filter
    would see a new shoe's first frames as resends of the last shoe's). Supervisor steps
    are dropped: the bench tables start shoes from the reader's first card
    (``device_starts_shoe``); the reader's start-of-communication frame is kept once.
    """
    out: list[FixtureStep] = []
    offset_t = 0.0
    mark = 0
    card_frames = 0
    for n in range(shoes):
        deal = DealSettings(decks=decks, seed=seed + n)
        steps = encode_plan(plan_shoe(deal), "angel_eye", seed=seed + n)
        # A frame's repeats follow it closely; the same bytes further on are a new frame (the
        # simulator's 35 marks wrap, so e.g. two equal verdicts can share bytes in one shoe).
        recent: deque[tuple[bytes, bytes]] = deque(maxlen=4)
        for step in steps:
            if step.data is None:
                continue
            frame = step.data
            if frame[0] != ENQ or frame[-3] != ETX:
                raise ValueError(f"unexpected simulator bytes {frame.hex(' ')}")
            code = chr(frame[2])
            if code == "S" and n > 0:
                continue
            sent = next((new for old, new in recent if old == frame), None)
            if sent is None:
                sent = encode_frame(SEQ_MARKS[mark % len(SEQ_MARKS)], code, frame[3:-3])
                mark += 1
                card_frames += code == "D"
                recent.append((frame, sent))
            out.append(FixtureStep(t=round(offset_t + step.t, 6), data=sent))
        offset_t += steps[-1].t + SHOE_CHANGE_S
    return ShoeStream(out, shoes, card_frames)


class TimedPty(PtyDevice):
    """A pty shoe that notes when the first transmission of each card frame was written."""

    def __init__(self, link: Path | None = None) -> None:
        super().__init__(link)
        self.card_writes: list[tuple[float, bytes]] = []
        self._last: bytes | None = None

    def write(self, data: bytes) -> None:
        first_card = len(data) > 3 and data[0] == ENQ and data[2:3] == b"D" and data != self._last
        stamp = time.time()
        super().write(data)
        if data[:1] == bytes([ENQ]):
            self._last = data
        if first_card:
            self.card_writes.append((stamp, data))


# ----------------------------------------------------------------------------- broker
class Broker(MosquittoBroker):
    """The tests' mosquitto (own port, own config) with no limit on queued messages."""

    def __init__(self, workdir: Path, port: int | None = None, persistent: bool = False) -> None:
        super().__init__(workdir, port, extra_config="max_queued_messages 0", persistent=persistent)


# ----------------------------------------------------------------------------- daemon
def write_config(
    workdir: Path,
    table_id: str,
    device: str,
    port: int,
    *,
    journal: dict[str, Any] | None = None,
    service: dict[str, Any] | None = None,
    camera: dict[str, Any] | None = None,
    delivery: dict[str, Any] | None = None,
    log_level: str = "warning",
) -> Path:
    """A production-shaped config for one bench table: MQTT 5, signed events, plain TCP on loopback.

    The simulated dealer may run many times faster than a real one, so the real-time
    "card right after a round = unneeded card" window is off (the bench deals none).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    events_key = workdir / "events.key"
    command_key = workdir / "command.key"
    for key in (events_key, command_key):
        if not key.exists():
            key.write_text(secrets.token_hex(32) + "\n")
            key.chmod(0o600)
    config: dict[str, Any] = {
        "table_id": table_id,
        "state_dir": str(workdir / "state"),
        "log": {"level": log_level, "format": "json"},
        "service": {"health_interval_s": 30.0, **(service or {})},
        "table": {"decks": 8, "device_starts_shoe": True, "unneeded_card_window_s": 0},
        "readers": [{"driver": "angel_eye", "settings": {"url": device, "device_name": "reader"}}],
        "broker": {
            "host": "127.0.0.1",
            "port": port,
            "protocol": "mqtt5",
            "tls": {"enabled": False},
            "delivery": {
                "backoff_initial_s": 0.1,
                "backoff_max_s": 0.5,
                "health_interval_s": 10.0,
                **(delivery or {}),
            },
            "signing": {"events_key": {"file": str(events_key)}, "command_key": {"file": str(command_key)}},
        },
    }
    if journal:
        config["journal"] = journal
    if camera:
        config["camera"] = camera
    path = workdir / "table.yaml"
    path.write_text(json.dumps(config, indent=1) + "\n")  # JSON is YAML
    return path


class NotifySocket:
    """A unix datagram socket standing in for systemd: records when READY=1 arrives."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def wait_ready(self, timeout: float) -> float | None:
        """``time.monotonic()`` when READY=1 arrived, None on timeout."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                return None
            if b"READY=1" in data.split(b"\n"):
                return time.monotonic()
        return None

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


class DaemonProcess:
    """``python -m daemon.cli run --config FILE``: the daemon exactly as systemd starts it."""

    def __init__(self, config: Path, log: Path, notify_socket: Path | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        if notify_socket is not None:
            env["NOTIFY_SOCKET"] = str(notify_socket)
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.log_path = log
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "run", "--config", str(config)],
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (the daemon flushes and says offline), SIGKILL if it does not go in time."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    return self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
                    return None
            return self.proc.returncode
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# ----------------------------------------------------------------------------- subscriber
@dataclass(slots=True)
class Received:
    """One event message as the subscriber got it."""

    at: float
    topic: str
    payload: bytes


@dataclass
class EventRecorder:
    """A game-server stand-in: subscribes (QoS 1) to ``topics`` and timestamps each message.

    The callback only appends (time, topic, bytes); parsing happens after the run, so the
    subscriber costs the measured path as little as possible.
    """

    port: int
    client_id: str = field(default_factory=lambda: f"bench-sub-{secrets.token_hex(3)}")
    persistent: bool = False
    topics: tuple[str, ...] = ("baccarat/v1/+/events",)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._subscribed = threading.Event()
        self._lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv5)
        self.client.reconnect_delay_set(1, 2)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *_a: self._subscribed.set()
        self.client.on_message = self._on_message

    def _on_connect(self, client: mqtt.Client, *_args: Any) -> None:
        client.subscribe([(topic, 1) for topic in self.topics])

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        stamp = time.time()
        with self._lock:
            self.received.append(Received(stamp, msg.topic, bytes(msg.payload)))

    def start(self, timeout: float = 10.0) -> EventRecorder:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = None
        if self.persistent:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = 3600
        self.client.connect(
            "127.0.0.1", self.port, keepalive=30, clean_start=not self.persistent, properties=props
        )
        self.client.loop_start()
        if not self._subscribed.wait(timeout):
            raise RuntimeError("the bench subscriber could not subscribe")
        return self

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def count(self) -> int:
        with self._lock:
            return len(self.received)


def parse_events(received: Sequence[Received]) -> list[tuple[float, dict[str, Any]]]:
    """(receive time, envelope) of every message, in arrival order."""
    return [(r.at, json.loads(r.payload)) for r in received]


def seq_report(envelopes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-table order check of received envelopes: distinct seqs, gaps, duplicates, reorders."""
    by_table: dict[str, list[int]] = {}
    for env in envelopes:
        by_table.setdefault(env["table_id"], []).append(int(env["seq"]))
    out: dict[str, Any] = {"tables": len(by_table), "gaps": 0, "duplicates": 0, "out_of_order": 0}
    for seqs in by_table.values():
        distinct = set(seqs)
        out["duplicates"] += len(seqs) - len(distinct)
        out["gaps"] += (max(distinct) - min(distinct) + 1) - len(distinct)
        out["out_of_order"] += sum(1 for a, b in itertools.pairwise(seqs) if b < a)
    return out


def await_condition(predicate: Any, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def journal_last_seq(state_dir: Path) -> int:
    """The highest seq in a table's journal, read from the file (read-only, beside the daemon)."""
    import sqlite3

    path = state_dir / "journal.sqlite3"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
        return int(row[0]) - 1
    finally:
        db.close()


def forwarded(frames: Sequence[Any]) -> list[Any]:
    """The engine inputs a driver forwards from decoded frames (``drivers.base`` ``_deliver``):
    new inputs, and the rescan a refused card frame stands for; repeats and notices dropped."""
    out: list[Any] = []
    for frame in frames:
        if frame.rejected is not None:
            rescan = getattr(frame, "rescan", None)
            if rescan is not None:
                out.append(rescan)
        elif not frame.duplicate and frame.reply is None and frame.notice is None and frame.input is not None:
            out.append(frame.input)
    return out
