"""Helpers for the MQTT tests: a collecting subscriber, signed commands, schema checks."""

from __future__ import annotations

import copy
import functools
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from daemon.mqtt.contract import load_schema
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import sign

SCHEMA_BY_SUFFIX = {
    "events": "event",
    "alerts": "event",
    "shoe_certificate": "event",
    "status": "status",
    "state": "state",
    "health": "health",
    "cmd/reply": "reply",
    "cmd": "command",
    "ack": "ack",
    "audit": "audit",
}


def schema_for_topic(topic: str) -> str:
    for suffix, name in SCHEMA_BY_SUFFIX.items():
        if topic.endswith("/" + suffix):
            return name
    raise AssertionError(f"no schema for topic {topic}")


_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def validate_payload(topic: str, payload: bytes) -> dict[str, Any]:
    """Parse and validate one payload against the contract schema of its topic."""
    name = schema_for_topic(topic)
    validator = _VALIDATORS.get(name)
    if validator is None:
        validator = _VALIDATORS[name] = jsonschema.Draft202012Validator(
            load_schema(name), format_checker=jsonschema.FormatChecker()
        )
    message: dict[str, Any] = json.loads(payload)
    validator.validate(message)
    return message


@dataclass(frozen=True)
class Received:
    topic: str
    payload: bytes
    retain: bool
    properties: Properties | None

    def json(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.payload)
        return result


class Subscriber:
    """A real paho client that records every message it receives."""

    def __init__(
        self,
        port: int,
        topics: list[str],
        protocol: MQTTProtocolVersion = mqtt.MQTTv5,
        client_id: str = "",
        clean: bool = True,
        configure: Callable[[mqtt.Client], None] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.messages: list[Received] = []
        self._cond = threading.Condition()
        self._subscribed = threading.Event()
        self.topics = topics
        kwargs: dict[str, Any] = {}
        if protocol != mqtt.MQTTv5:
            kwargs["clean_session"] = clean
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"sub-{secrets.token_hex(4)}",
            protocol=protocol,
            **kwargs,
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: self._subscribed.set()
        if configure:
            configure(self.client)
        connect_kwargs: dict[str, Any] = {}
        if protocol == mqtt.MQTTv5:
            connect_kwargs["clean_start"] = clean
            if not clean:
                props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
                props.SessionExpiryInterval = 3600
                connect_kwargs["properties"] = props
        self.client.reconnect_delay_set(1, 2)
        self.client.connect(host, port, keepalive=30, **connect_kwargs)
        self.client.loop_start()
        assert self._subscribed.wait(10), "subscriber did not subscribe"

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        for topic in self.topics:
            client.subscribe(topic, qos=1)

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with self._cond:
            self.messages.append(Received(msg.topic, bytes(msg.payload), bool(msg.retain), msg.properties))
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.messages):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out; got {len(self.messages)} messages: "
                        + ", ".join(f"{m.topic}:{m.payload[:80]!r}" for m in self.messages[-5:])
                    )
                self._cond.wait(left)
            return list(self.messages)

    def on(self, suffix: str) -> list[Received]:
        with self._cond:
            return [m for m in self.messages if m.topic.endswith("/" + suffix)]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def topic_count(suffix: str, n: int) -> Callable[[list[Received]], bool]:
    return lambda msgs: sum(1 for m in msgs if m.topic.endswith("/" + suffix)) >= n


def signed_command(
    key: Secret,
    table_id: str,
    action: str,
    args: dict[str, Any] | None = None,
    ts: float | None = None,
    nonce: str | None = None,
    command_id: str | None = None,
    key_id: str | None = None,
) -> dict[str, Any]:
    """A signed command; with ``key_id`` a keyring command (no actor), else a legacy one."""
    command: dict[str, Any] = {
        "table_id": table_id,
        "action": action,
        "args": args or {},
        "command_id": command_id or f"c-{secrets.token_hex(4)}",
        "ts": time.time() if ts is None else ts,
        "nonce": nonce or secrets.token_hex(12),
    }
    if key_id is None:
        command["actor"] = "supervisor:test"
    else:
        command["key_id"] = key_id
    command["sig"] = sign(command, key)
    return command


@functools.cache
def _engine_run() -> tuple[dict[str, Any], ...]:
    from common.inputs import EngineInput
    from daemon.engine import Engine, TableSettings
    from daemon.rules.variants import load_variant_by_name
    from daemon.simulation.dealer import DealSettings, FaultSpec, make_fixture
    from drivers.replay import replay_fixture

    faults = [
        FaultSpec.parse(text)
        for text in ("unneeded_card@2", "double_pull@3", "misread@4", "card_exposed@5", "missing_card@6")
    ]
    runs = [
        # dealing faults: alerts, holds, voids
        (DealSettings(decks=8, seed=3, max_hands=8), faults, {}),
        # a whole one-deck shoe to its end, each decided round held for the reader's verdict
        (DealSettings(decks=1, seed=5), [], {"await_device_verdict": True}),
    ]
    snapshots: list[dict[str, Any]] = []
    for deal, fault_specs, table in runs:
        fixture = make_fixture("contract", "angel_eye", deal, fault_specs)
        inputs: list[EngineInput] = []
        replay_fixture(fixture, inputs.append)
        settings = TableSettings.model_validate({**fixture.header.table, **table})
        engine = Engine(settings, load_variant_by_name(settings.variant))
        snapshots.append(engine.snapshot())
        for inp in inputs:
            engine.handle(inp)
            snapshots.append(engine.snapshot())
    return tuple(snapshots)


def engine_snapshots() -> list[dict[str, Any]]:
    """Real engine snapshots (what the runner hands the publisher), one after every input of
    two simulated Angel Eye shoes: one with dealing faults (alerts, holds), one dealt to its
    end with rounds held for the verdict. Fresh copies on every call."""
    return copy.deepcopy(list(_engine_run()))


def engine_snapshot_mid_round() -> dict[str, Any]:
    """A real engine snapshot with a round in progress that has cards."""
    return next(s for s in engine_snapshots() if s["round"] is not None and s["round"]["cards"])
