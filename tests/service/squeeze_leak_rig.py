"""The leak test's rig: the real daemon (runner, engine thread, journal, publisher) in this process
on a real mosquitto started on its own port, a capture of every message the broker carries
(subscribed to ``#`` before the daemon starts), the daemon's info-level JSON log in a file, and a
fixture replayed through its protocol's real driver (a pseudo-terminal for the serial readers,
pyusb's replay backend for the USB HID one) into the daemon's input queue.

On a squeeze table whose fixture carries no reveals the rig plays the game server too: before
each card it hands on, when the round in progress has its four opening cards (or a third card)
dealt and not revealed, it sends the ``reveal`` command for them over MQTT, signed with a
``game_server`` keyring key, and waits for the table's reply; at the end it reveals whatever is
left. Cards of a one-deck shoe are all different, which is what lets the detector
(:mod:`tests.support.leak_detector`) call any mention of a hidden card a leak.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from common.inputs import CardRead, EngineInput
from daemon.mqtt.secrets import Secret
from daemon.mqtt.supervisor_commands import CommandSender
from daemon.mqtt.topics import TableTopics
from daemon.service.config import LoadedConfig, load_config
from daemon.service.logging import configure_logging, reset_logging
from daemon.service.runner import Daemon
from drivers.fixtures import Fixture
from drivers.pty_device import PtyDevice
from drivers.replay import replay_fixture
from tests.support.leak_detector import Captured, HiddenCard
from tests.support.secrets import write_secret

TABLE_ID = "LEAK-1"
REVEAL_ORDER = ["P1", "B1", "P2", "B2", "P3", "B3"]
GS_KEY_ID = "gs-leak"
WAIT = 20.0

HandOn = Callable[[EngineInput, Daemon], None]
"""Hands one replayed input to the daemon (and may add the camera's reads around it)."""


@dataclass
class Capture:
    """Every message on the broker (topic ``#``), in arrival order."""

    port: int
    messages: list[Captured] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    subscribed: threading.Event = field(default_factory=threading.Event)
    client: mqtt.Client = field(init=False)

    def start(self) -> None:
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"capture-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
        )
        self.client.on_connect = lambda c, *_a: c.subscribe("#", qos=1)
        self.client.on_subscribe = lambda *_a: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", self.port)
        self.client.loop_start()
        assert self.subscribed.wait(10), "the capture never subscribed"

    def _on_message(self, _c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append(Captured(len(self.messages), msg.topic, bytes(msg.payload)))

    def snapshot(self) -> list[Captured]:
        with self.lock:
            return list(self.messages)

    def events(self) -> list[dict[str, Any]]:
        topic = TableTopics(TABLE_ID).events
        return [json.loads(m.payload) for m in self.snapshot() if m.topic == topic]

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class GameServerClient:
    """The game server's MQTT client: signed commands with its keyring key, replies back."""

    def __init__(self, port: int, key: Secret) -> None:
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"gs-{secrets.token_hex(3)}", protocol=mqtt.MQTTv5
        )
        self.sender = CommandSender(self.client, TABLE_ID, key, key_id=GS_KEY_ID)
        subscribed = threading.Event()
        self.client.on_connect = lambda c, *_a: c.subscribe(self.sender.reply_topic, qos=1)
        self.client.on_subscribe = lambda *_a: subscribed.set()
        self.client.on_message = lambda _c, _u, msg: self.sender.on_reply(bytes(msg.payload))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(10), "the game server never subscribed to the replies"

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@dataclass
class LeakRun:
    """What one run left: the capture, the daemon's log lines and the journal's sealed cards."""

    messages: list[Captured]
    log_lines: list[Captured]
    hidden: list[HiddenCard]
    journal_events: list[dict[str, Any]]
    reveals_refused: list[str]
    events_key: Secret
    public: list[str]
    """Faces turned up for all at the deal (the indicator)."""


def _config(
    tmp: Path, port: int, table: dict[str, Any], idle_reader: dict[str, Any]
) -> tuple[LoadedConfig, bytes, bytes]:
    """The daemon's config; returns it with the events key and the game server's command key."""
    events_key, command_key = secrets.token_hex(32).encode(), secrets.token_hex(32).encode()
    gs_key = secrets.token_hex(32).encode()
    write_secret(tmp / "events.key", events_key + b"\n")
    write_secret(tmp / "command.key", command_key + b"\n")
    write_secret(tmp / "gs.key", gs_key + b"\n")
    overrides: dict[tuple[str | int, ...], Any] = {
        ("table_id",): TABLE_ID,
        ("state_dir",): str(tmp / "state"),
        ("broker", "port"): port,
        ("broker", "protocol"): "mqtt5",
        ("broker", "signing", "events_key"): {"file": str(tmp / "events.key")},
        ("broker", "signing", "command_key"): {"file": str(tmp / "command.key")},
        ("broker", "signing", "command_keys"): [
            {"key_id": GS_KEY_ID, "role": "game_server", "secret": {"file": str(tmp / "gs.key")}}
        ],
        ("log", "level"): "info",
        ("log", "format"): "json",
        ("readers", 0): idle_reader,
        ("service", "health_interval_s"): 0.5,
    }
    for key, value in table.items():
        overrides[("table", key)] = value
    return load_config(None, environ={}, overrides=overrides), events_key, gs_key


def _idle_reader(fixture: Fixture, path: str) -> dict[str, Any]:
    """The configured reader: the fixture's serial protocol with its settings (a dealer button's
    signal, say), on a pty that never sends a byte; an Angel Eye one for a USB fixture."""
    serial = fixture.header.transport == "serial"
    settings: dict[str, Any] = {"url": path, "device_name": "reader"}
    if serial and fixture.header.protocol_settings:
        settings["protocol"] = dict(fixture.header.protocol_settings)
    return {"driver": fixture.header.protocol if serial else "angel_eye", "settings": settings}


def shifted(fixture: Fixture, to: float) -> Fixture:
    """The fixture with its clock moved to start at ``to`` (the daemon's own ticks are wall time)."""
    first = fixture.steps[0].t if fixture.steps else 0.0
    steps = tuple(s.model_copy(update={"t": s.t - first + to}) for s in fixture.steps)
    return dataclasses.replace(fixture, steps=steps)


class _GameServer:
    """Hands the replay's inputs to the daemon; reveals a squeeze round's dealt cards in order."""

    def __init__(
        self, daemon: Daemon, squeeze: bool, hand_on: HandOn | None, sender: CommandSender | None
    ) -> None:
        self.daemon = daemon
        self.sender = sender
        self.squeeze = squeeze
        self.hand_on = hand_on
        self.refused: list[str] = []
        self.revealed = 0

    def __call__(self, inp: EngineInput) -> None:
        if self.squeeze and isinstance(inp, CardRead):
            self.reveal_dealt(minimum=4)
        if self.hand_on is None:
            self.daemon.submit(inp)
        else:
            self.hand_on(inp, self.daemon)

    def reveal_dealt(self, minimum: int) -> None:
        """Reveal each round (in progress or held) with ``minimum`` cards dealt and some face down."""
        assert self.daemon.wait_until_processed(WAIT), "the engine did not take the inputs"
        snapshot = self.daemon.engine.snapshot()
        rounds = [snapshot.get("round"), *snapshot.get("held_rounds", [])]
        for rnd in rounds:
            if not isinstance(rnd, dict):
                continue
            cards: dict[str, Any] = rnd.get("cards") or {}
            hidden = [slot for slot in REVEAL_ORDER if slot in cards and cards[slot] is None]
            if hidden and len(cards) >= minimum:
                self._reveal(hidden, rnd["hand"])

    def _reveal(self, slots: list[str], hand: int) -> None:
        """The game server's signed ``reveal`` over MQTT; a refusal is noted."""
        assert self.sender is not None, "a table that needs reveals needs the game server's key"
        self.revealed += 1
        reply = self.sender.send("reveal", {"slots": slots, "hand": hand}, timeout=WAIT)
        if reply.get("status") != "accepted":
            self.refused.append(f"round {hand} {slots}: {reply.get('reason')}")


def run_fixture(
    tmp: Path,
    broker_port: int,
    fixture: Fixture,
    *,
    reveal_mode: str,
    hand_on: HandOn | None = None,
) -> LeakRun:
    """Replay ``fixture`` through the daemon on a ``reveal_mode`` table; everything it let out."""
    table = dict(fixture.header.table)
    if reveal_mode == "squeeze" and "reveal" not in table:
        table["reveal"] = {"mode": "squeeze", "order_source": "server", "order": REVEAL_ORDER}
    # a squeeze fixture plays its reveals itself (the game server's commands, or the dealer's
    # button in the reader's bytes); else the rig reveals as the game server
    auto_reveal = (
        reveal_mode == "squeeze"
        and table["reveal"].get("order_source", "server") == "server"
        and not any(s.supervisor is not None and s.supervisor.action == "reveal" for s in fixture.steps)
    )
    tmp.mkdir(parents=True, exist_ok=True)
    idle = PtyDevice(tmp / "idle-shoe")  # the configured reader: opened, never sends a byte
    loaded, events_key, gs_key = _config(tmp, broker_port, table, _idle_reader(fixture, idle.path))
    capture = Capture(broker_port)
    capture.start()
    game_server = GameServerClient(broker_port, Secret(gs_key, "gs"))
    log_path = tmp / "daemon.log"
    with open(log_path, "a", encoding="utf-8") as log_stream:
        configure_logging("info", "json", stream=log_stream)
        daemon = Daemon(loaded)
        daemon.start()
        try:
            _await(daemon.publisher.subscribed.is_set, "the daemon's command subscription")
            server = _GameServer(daemon, auto_reveal, hand_on, game_server.sender)

            def restart(_t: float) -> None:
                """The edge restarts mid-shoe: the daemon stops and a new one resumes its journal."""
                nonlocal daemon
                assert daemon.wait_until_processed(WAIT)
                daemon.stop()
                daemon = Daemon(loaded)
                daemon.start()
                server.daemon = daemon
                _await(daemon.publisher.subscribed.is_set, "the restarted daemon's command subscription")

            replay_fixture(shifted(fixture, time.time()), server, final_tick=False, on_restart=restart)
            if auto_reveal:
                server.reveal_dealt(minimum=1)
            assert daemon.wait_until_processed(WAIT)
            assert daemon.journal is not None
            last = daemon.journal.last_seq()
            _await(
                lambda: any(e.get("seq") == last for e in capture.events()), f"event seq {last} on the broker"
            )
        finally:
            daemon.stop()
            reset_logging()
            idle.close()
            game_server.stop()
    capture.stop()
    journal_events = _journal(tmp / "state", loaded)
    lines = [Captured(i, "log", line.encode()) for i, line in enumerate(log_path.read_text().splitlines())]
    return LeakRun(
        capture.snapshot(),
        lines,
        _hidden(journal_events),
        journal_events,
        server.refused,
        Secret(events_key, "events"),
        [str(e["data"].get("card")) for e in journal_events if e["data"].get("slot") == "indicator"],
    )


def _await(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"waiting for {what}"
        time.sleep(0.02)


def _journal(state_dir: Path, loaded: LoadedConfig) -> list[dict[str, Any]]:
    from daemon.journal import Journal

    journal = Journal(loaded.config.journal, TABLE_ID)
    try:
        return [
            {"kind": e.kind, "shoe_id": e.shoe_id, "hand": e.hand, "seq": e.seq, "data": e.data}
            for e in journal.events()
        ]
    finally:
        journal.close()


def _hidden(events: list[dict[str, Any]]) -> list[HiddenCard]:
    """Every card the journal holds sealed: each card dealt (on an open table, every round and
    burn card), and each card another event kept sealed (refused, held, drawn outside the game:
    never revealed at all; their slot is named ``kind:seq``)."""
    out = []
    for event in events:
        data = event.get("data") or {}
        sealed = data.get("sealed") or {}
        card = sealed.get("card", data.get("card") if event.get("kind") == "card_dealt" else None)
        if not isinstance(card, str) or data.get("slot") == "indicator":
            continue
        read = sealed.get("read", data.get("read")) or {}
        raw = read.get("raw") if isinstance(read, dict) else None
        if event.get("kind") == "card_dealt":
            hand, slot = int(data.get("round", event.get("hand")) or 0), str(data.get("slot"))
        else:
            hand, slot = -1, f"{event.get('kind')}:{event.get('seq')}"
        out.append(HiddenCard(str(event.get("shoe_id")), hand, slot, card, raw))
    return out
