"""End-to-end harness: ``baccarat-edge run`` as a subprocess, a simulated shoe on a pty, a subscriber."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from common.inputs import DeviceTarget
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.secrets import Secret
from daemon.mqtt.supervisor_commands import CommandSender
from daemon.mqtt.topics import TableTopics
from daemon.rules.outcome import RoundOutcome
from daemon.simulation.dealer import DealSettings, plan_shoe
from drivers.fixtures import FixtureStep, SupervisorStep
from drivers.pty_device import PtyDevice
from drivers.simulate import ShoePlan, VirtualShoe, encode_plan
from tests.support.secrets import write_secret

TABLE_ID = "T7"
SPEED = 100.0


def write_config(
    tmp: Path, device: str, port: int, deal: DealSettings, extra: str = "", journal: str = ""
) -> tuple[Path, bytes, bytes]:
    """A daemon config for the test table; returns the path and the (events, command) keys."""
    events_key, command_key = secrets.token_hex(32).encode(), secrets.token_hex(32).encode()
    write_secret(tmp / "events.key", events_key + b"\n")
    write_secret(tmp / "command.key", command_key + b"\n")
    table = deal.table_settings()
    # The dealer is SPEED times faster than a real one; these tests deal no unneeded cards,
    # so the real-time "card right after a round" window is off and CPU load cannot matter.
    table["unneeded_card_window_s"] = 0
    config = {
        "table_id": TABLE_ID,
        "state_dir": str(tmp / "state"),
        "log": {"level": "info", "format": "json"},
        # health logged 4 times a second: wait_until_idle() reads it
        "service": {"tick_interval_s": 0.1, "health_interval_s": 0.25},
        "table": table,
        "readers": [{"driver": "angel_eye", "settings": {"url": device, "device_name": "reader"}}],
        "broker": {
            "host": "127.0.0.1",
            "port": port,
            "protocol": "mqtt5",
            "tls": {"enabled": False},
            "delivery": {"backoff_initial_s": 0.2, "backoff_max_s": 1.0, "health_interval_s": 1.0},
            "signing": {
                "events_key": {"file": str(tmp / "events.key")},
                "command_key": {"file": str(tmp / "command.key")},
            },
        },
    }
    text = json.dumps(config, indent=1)  # JSON is YAML
    if journal:
        config["journal"] = json.loads(journal)
        text = json.dumps(config, indent=1)
    path = tmp / "table.yaml"
    path.write_text(text + extra)
    return path, events_key, command_key


class DaemonProcess:
    """``baccarat-edge run --config FILE`` with its JSON log in a file."""

    def __init__(self, config: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "run", "--config", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def log_lines(self) -> list[dict[str, Any]]:
        return self.read_log(self.log_path)

    @staticmethod
    def read_log(path: Path) -> list[dict[str, Any]]:
        """The JSON log lines of a daemon's log file (a line that is not JSON kept as text)."""
        out = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"event": "(not json)", "text": line})
        return out

    def wait_for_log(self, event: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log_lines():
                if line.get("event") == event:
                    return line
            assert self.proc.poll() is None, (
                f"daemon exited ({self.proc.returncode}): {self.log_path.read_text()}"
            )
            time.sleep(0.05)
        raise AssertionError(f"no {event!r} in the daemon log:\n{self.log_path.read_text()}")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL (no clean-up at all: a power cut or an OOM kill) and reap the process."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def count_log(self, event: str) -> int:
        return sum(1 for line in self.log_lines() if line.get("event") == event)


def pty_pending(shoe: PtyDevice) -> int:
    """Bytes written into the pty that the daemon's reader has not read yet (FIONREAD on the slave)."""
    slave = shoe._slave  # the test's own handle on the slave side: the queue the reader reads from
    assert slave is not None, "the shoe is unplugged"
    raw = fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", raw)[0])


def wait_until_idle(daemon: DaemonProcess, shoe: PtyDevice, timeout: float = 20.0) -> None:
    """The daemon read every byte written and its engine handled every input it queued.

    A condition, not a sleep: the pty is drained, then the daemon's own health log lines
    (every ``service.health_interval_s``), two in a row written after that, show an empty
    input queue and the same processed-input count. Needs no broker.
    """
    deadline = time.monotonic() + timeout
    while pty_pending(shoe):
        assert time.monotonic() < deadline, "the daemon does not read the shoe"
        time.sleep(0.01)
    seen = len(daemon.log_lines())
    while True:
        engines = [line["engine"] for line in daemon.log_lines()[seen:] if line.get("event") == "health"]
        if (
            len(engines) >= 2
            and engines[-1]["queue_depth"] == 0
            and engines[-2]["queue_depth"] == 0
            and engines[-1]["processed"] == engines[-2]["processed"]
        ):
            return
        assert time.monotonic() < deadline, f"the daemon never went idle: {daemon.log_path}"
        assert daemon.proc.poll() is None, f"daemon exited: {daemon.log_path.read_text()}"
        time.sleep(0.05)


def wait_until_commandable(daemon: DaemonProcess, timeout: float = 30.0) -> None:
    """The daemon's broker acknowledged its command subscription (a command sent now arrives).

    ``online`` is published before the subscription is acknowledged: a command sent on seeing
    it may reach the broker first and be dropped (nobody subscribed yet).
    """
    deadline = time.monotonic() + timeout
    while not any(
        line.get("event") == "health" and line["engine"].get("command_channel_ready")
        for line in daemon.log_lines()
    ):
        assert time.monotonic() < deadline, f"no command subscription: {daemon.log_path}"
        assert daemon.proc.poll() is None, f"daemon exited: {daemon.log_path.read_text()}"
        time.sleep(0.05)


def device_health(subscriber: TableSubscriber, device: str) -> dict[str, Any]:
    """One device's part of the last published health report ({} before there is one)."""
    health = subscriber.health or {}
    devices = health.get("devices") or {}
    part = devices.get(device)
    return part if isinstance(part, dict) else {}


class TableSubscriber:
    """Everything a server would see of the table: verified, deduplicated events and retained topics."""

    def __init__(self, port: int, events_key: bytes, command_key: bytes) -> None:
        self.topics = TableTopics(TABLE_ID)
        self.consumer = EventConsumer(TABLE_ID, key=Secret(events_key, "test"), require_signature=True)
        self.events: list[dict[str, Any]] = []
        self.rejected: list[str] = []
        self.status: list[str] = []
        self.health: dict[str, Any] | None = None
        self.healths: list[dict[str, Any]] = []  # every health report, oldest first
        self.payloads: list[tuple[str, Any]] = []  # (schema name, parsed payload) of every message
        self._cond = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"test-sub-{secrets.token_hex(3)}",
                                  protocol=mqtt.MQTTv5)  # fmt: skip
        self.sender = CommandSender(self.client, TABLE_ID, Secret(command_key, "test"))
        self._subscribed = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *_a: self._subscribed.set()
        self.client.on_message = self._on_message
        self.port = port

    def start(self) -> TableSubscriber:
        self.client.connect("127.0.0.1", self.port)
        self.client.loop_start()
        assert self._subscribed.wait(10), "subscriber could not subscribe"
        return self

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

    def _on_connect(self, client: mqtt.Client, *_args: Any) -> None:
        client.subscribe(self.topics.all, qos=1)

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        payload = bytes(msg.payload)
        schema = _SCHEMA_BY_SUFFIX.get(msg.topic.removeprefix(self.topics.base + "/"))
        with self._cond:
            if schema is not None:
                self.payloads.append((schema, json.loads(payload)))
            if msg.topic == self.topics.cmd_reply:
                self.sender.on_reply(payload)
            elif msg.topic == self.topics.events:
                received = self.consumer.feed(payload)
                if received.verdict is Verdict.NEW and received.envelope is not None:
                    self.events.append(received.envelope)
                elif received.verdict is not Verdict.DUPLICATE:
                    self.rejected.append(f"{received.verdict.value}: {received.reason}")
            elif msg.topic == self.topics.status:
                self.status.append(json.loads(payload)["status"])
            elif msg.topic == self.topics.health:
                self.health = json.loads(payload)
                self.healths.append(self.health)
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[TableSubscriber], bool], timeout: float = 30.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def kinds(self) -> list[str]:
        with self._cond:
            return [e["kind"] for e in self.events]

    def sorted_events(self) -> list[dict[str, Any]]:
        with self._cond:
            return sorted(self.events, key=lambda e: e["seq"])


_SCHEMA_BY_SUFFIX = {
    "events": "event",
    "alerts": "event",
    "status": "status",
    "state": "state",
    "health": "health",
    "cmd/reply": "reply",
}


def contract_violations(payloads: Sequence[tuple[str, Any]]) -> list[str]:
    """Every payload checked against the published JSON Schema of its topic."""
    from jsonschema import Draft202012Validator

    from daemon.mqtt.contract import load_schema

    validators = {name: Draft202012Validator(load_schema(name)) for name in set(_SCHEMA_BY_SUFFIX.values())}
    problems = []
    for name, payload in payloads:
        for error in validators[name].iter_errors(payload):
            problems.append(f"{name}: {error.json_path}: {error.message}")
    return problems


def dealt_shoe(
    seed: int, decks: int = 8, max_hands: int | None = None
) -> tuple[DealSettings, ShoePlan, list[FixtureStep]]:
    deal = DealSettings(decks=decks, seed=seed, max_hands=max_hands, shoe_id=f"e2e-{seed}")
    plan = plan_shoe(deal)
    return deal, plan, encode_plan(plan, "angel_eye", seed=seed)


def play(
    steps: Sequence[FixtureStep],
    shoe: PtyDevice,
    subscriber: TableSubscriber | None,
    refused: list[str],
    before_command: Callable[[], None] | None = None,
) -> None:
    """Write the steps into the pty at SPEED; supervisor steps go out as signed MQTT commands
    (without a subscriber there is no broker: the shoe's first-card mark starts the shoe).

    A command and the bytes written just before it reach the engine by two paths (MQTT and
    the pty), in either order; ``before_command`` (e.g. wait until the daemon is idle) makes
    the order the steps' own, for a test that compares two runs' streams."""

    def on_supervisor(step: SupervisorStep, _t: float) -> None:
        if subscriber is None:
            return
        if before_command is not None:
            before_command()
        reply = subscriber.sender.send(step.action, dict(step.args))
        if reply.get("status") != "accepted":
            refused.append(f"{step.action}: {reply}")

    VirtualShoe(steps, shoe, speed=SPEED, on_supervisor=on_supervisor).run()


_SLOTS = {DeviceTarget(s): s for s in ("P1", "B1", "P2", "B2", "P3", "B3")}


def expected_cards(plan: ShoePlan) -> list[tuple[str, str, int | None]]:
    """(slot, card, round) of every card the plan deals, in order (indicator and burns included)."""
    out: list[tuple[str, str, int | None]] = []
    for action in plan.actions:
        if action.kind != "draw" or action.card is None:
            continue
        if action.target is DeviceTarget.FIRST_CARD:
            out.append(("indicator", action.card.code, None))
        elif action.target is DeviceTarget.BURN:
            out.append(("burn", action.card.code, None))
        else:
            assert action.target is not None
            out.append((_SLOTS[action.target], action.card.code, action.hand))
    return out


def expected_winners(plan: ShoePlan) -> list[tuple[int, str]]:
    """(hand, winner) of every round, computed from the dealt cards by the rules."""
    hands: dict[int, dict[str, list[Any]]] = {}
    for action in plan.actions:
        if action.kind == "draw" and action.target in _SLOTS and action.hand is not None:
            side = "player" if _SLOTS[action.target].startswith("P") else "banker"
            hands.setdefault(action.hand, {"player": [], "banker": []})[side].append(action.card)
    return [
        (hand, RoundOutcome(tuple(sides["player"]), tuple(sides["banker"])).winner.value)
        for hand, sides in sorted(hands.items())
    ]


_WALL_CLOCK_KEYS = frozenset({"at", "ts", "since", "command_id"})
"""Data members that differ between two runs of the same shoe: times and fresh command ids."""


def timeless(value: Any) -> Any:
    """Event data without wall-clock times or command ids (two runs deal at different moments)."""
    if isinstance(value, dict):
        return {
            k: timeless(v) for k, v in value.items() if k not in _WALL_CLOCK_KEYS and not k.endswith("_at")
        }
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def comparable_stream(events: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    """(seq, kind, data without times) of a deduplicated stream: equal for two runs of one shoe."""
    return [(e["seq"], e["kind"], timeless(e["data"])) for e in events]


def untraced_events(events: list[dict[str, Any]], log: list[dict[str, Any]]) -> list[str]:
    """``kind seq event_id`` of every published event whose ``event_id`` no daemon log line carries."""
    logged = {line.get("event_id") for line in log}
    return [f"{e['kind']} {e['seq']} {e['event_id']}" for e in events if e["event_id"] not in logged]


def received_cards(events: list[dict[str, Any]]) -> list[tuple[str, str, int | None]]:
    return [
        (e["data"]["slot"], e["data"]["card"], e["data"].get("round"))
        for e in events
        if e["kind"] == "card_dealt"
    ]


def received_winners(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [
        (e["data"]["hand"], e["data"]["outcome"]["winner"]) for e in events if e["kind"] == "round_completed"
    ]


class TcpForwarder:
    """A TCP port that forwards to the broker once ``open()`` is called: the network coming back.

    Lets a test subscribe to a broker that is already running while the daemon, configured
    with this port, still finds the broker unreachable (so no event can slip past unseen).
    """

    def __init__(self, target_port: int) -> None:
        import socket as _socket

        self.target_port = target_port
        self.port = 0
        self._socket_mod = _socket
        self._listener: _socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        probe = _socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()

    def open(self) -> None:
        listener = self._socket_mod.socket()
        listener.setsockopt(self._socket_mod.SOL_SOCKET, self._socket_mod.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(8)
        listener.settimeout(0.2)
        self._listener = listener
        self._spawn(self._accept_loop)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = self._socket_mod.create_connection(("127.0.0.1", self.target_port))
            self._spawn(self._pipe, client, upstream)
            self._spawn(self._pipe, upstream, client)

    def _pipe(self, source: Any, sink: Any) -> None:
        source.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = source.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(self._socket_mod.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        for thread in self._threads:
            thread.join(2)
