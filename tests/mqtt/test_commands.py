"""The command channel end to end through a real mosquitto: authenticated commands (lock and
unlock included) reach the engine handler, everything else is refused with the reason and
journaled as a ``command_refused`` event, replies are signed and honour the MQTT 5 response
topic and correlation data."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from common.inputs import SupervisorCommand
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.command_channel import ReplyFn
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, verify
from tests.mqtt.conftest import TABLE, make_settings
from tests.mqtt.support import Subscriber, signed_command, validate_payload
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

CMD = f"baccarat/v1/{TABLE}/cmd"


class Supervisor:
    """The game server side: publishes commands, collects replies by command_id."""

    def __init__(self, port: int) -> None:
        self.replies = Subscriber(port, [f"baccarat/v1/{TABLE}/cmd/reply/#"])  # the reply topic and below
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="supervisor", protocol=mqtt.MQTTv5)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def send(self, command: dict[str, Any] | bytes, properties: Properties | None = None) -> None:
        payload = command if isinstance(command, bytes) else json.dumps(command).encode()
        self.client.publish(CMD, payload, qos=1, properties=properties).wait_for_publish(5)

    def reply_to(self, command_id: str | None, count: int = 1) -> list[dict[str, Any]]:
        messages = self.replies.wait_for(
            lambda msgs: sum(1 for m in msgs if m.json().get("command_id") == command_id) >= count
        )
        return [m.json() for m in messages if m.json().get("command_id") == command_id]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
        self.replies.close()


class EngineDouble:
    """Stands in for the service's engine queue: records commands and answers like the
    engine does (accepted unless the args ask for a refusal)."""

    def __init__(self) -> None:
        self.commands: list[SupervisorCommand] = []

    def on_command(self, command: SupervisorCommand, reply: ReplyFn) -> None:
        self.commands.append(command)
        if command.args.get("refuse"):
            reply({"accepted": False, "reason": "no round in progress", "event_id": "e-1", "seq": 7})
        else:
            reply({"accepted": True, "reason": None, "event_id": "e-2", "seq": 8})


def wait_until_delivered(journal: Journal, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while journal.pending():
        assert time.monotonic() < deadline, "journal not drained"
        time.sleep(0.02)


@pytest.fixture
def supervisor(mosquitto: MosquittoBroker) -> Any:
    s = Supervisor(mosquitto.port)
    yield s
    s.close()


def start(
    make_publisher: Callable[..., Publisher],
    port: int,
    keys: dict[str, Path],
    journal: Journal,
    engine: EngineDouble,
) -> Publisher:
    publisher = make_publisher(
        make_settings(port, keys),
        TABLE,
        journal,
        on_command=engine.on_command,
    )
    assert publisher.subscribed.wait(10), "the broker did not acknowledge the cmd subscription"
    return publisher


def test_commands_accepted_refused_and_replayed(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    events_key: Secret,
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    engine = EngineDouble()
    start(make_publisher, mosquitto.port, keys, journal, engine)

    good = signed_command(command_key, TABLE, "void_round", {"reason": "misdeal"}, command_id="good")
    supervisor.send(good)
    [reply] = supervisor.reply_to("good")
    assert reply["status"] == "accepted"
    assert reply["code"] is None
    assert (reply["event_id"], reply["seq"]) == ("e-2", 8)
    assert engine.commands[0].action == "void_round"
    assert engine.commands[0].args == {"reason": "misdeal"}
    assert engine.commands[0].actor == "supervisor:test"

    supervisor.send(good)  # the very same bytes again
    replies = supervisor.reply_to("good", count=2)
    assert (replies[1]["status"], replies[1]["code"]) == ("refused", "replayed")

    refused = signed_command(command_key, TABLE, "void_round", {"refuse": True}, command_id="engine-no")
    supervisor.send(refused)
    [reply] = supervisor.reply_to("engine-no")
    assert (reply["status"], reply["code"], reply["reason"]) == (
        "refused",
        "refused_by_table",
        "no round in progress",
    )

    tampered = signed_command(command_key, TABLE, "void_shoe", command_id="tampered")
    tampered["action"] = "new_shoe"
    supervisor.send(tampered)
    assert supervisor.reply_to("tampered")[0]["code"] == "bad_signature"

    from daemon.mqtt.secrets import Secret as RawSecret

    wrong_key = signed_command(RawSecret(b"not-the-key", "test"), TABLE, "void_shoe", command_id="wrong-key")
    supervisor.send(wrong_key)
    assert supervisor.reply_to("wrong-key")[0]["code"] == "bad_signature"

    old = signed_command(command_key, TABLE, "void_shoe", ts=time.time() - 300, command_id="old")
    supervisor.send(old)
    reply = supervisor.reply_to("old")[0]
    assert reply["code"] == "stale"
    assert "old" in reply["reason"]

    future = signed_command(command_key, TABLE, "void_shoe", ts=time.time() + 300, command_id="future")
    supervisor.send(future)
    assert supervisor.reply_to("future")[0]["code"] == "future"

    unknown = signed_command(command_key, TABLE, "format_disk", command_id="unknown")
    supervisor.send(unknown)
    assert supervisor.reply_to("unknown")[0]["code"] == "unknown_action"

    other_table = signed_command(command_key, "T2", "void_shoe", command_id="other-table")
    supervisor.send(other_table)
    assert supervisor.reply_to("other-table")[0]["code"] == "wrong_table"

    extra = signed_command(command_key, TABLE, "void_shoe", command_id="extra")
    extra["priority"] = "high"
    supervisor.send(extra)
    reply = supervisor.reply_to("extra")[0]
    assert reply["code"] == "malformed"
    assert "priority" in reply["reason"]

    supervisor.send(b"\xff not json")
    reply = supervisor.reply_to(None)[0]
    assert reply["code"] == "malformed"
    assert reply["command_id"] is None

    lock = signed_command(command_key, TABLE, "lock", command_id="lock")
    supervisor.send(lock)
    assert supervisor.reply_to("lock")[0]["status"] == "accepted"

    # Only the authenticated, fresh commands reached the engine; lock goes the same way.
    assert [c.command_id for c in engine.commands] == ["good", "engine-no", "lock"]
    assert engine.commands[2].action == "lock"
    for message in supervisor.replies.messages:
        body = validate_payload(message.topic, message.payload)
        assert verify(body, events_key), "replies are signed with the table's key"

    # Every refusal before the engine is journaled for audit and named in its reply.
    refusals = [e for e in journal.events(origin=None) if e.kind == "command_refused"]
    assert [(e.data["command_id"], e.data["code"]) for e in refusals] == [
        ("good", "replayed"),
        ("tampered", "bad_signature"),
        ("wrong-key", "bad_signature"),
        ("old", "stale"),
        ("future", "future"),
        ("unknown", "unknown_action"),
        ("other-table", "wrong_table"),
        ("extra", "malformed"),
        (None, "malformed"),
    ]
    assert refusals[3].data["actor"] == "supervisor:test"
    assert refusals[3].data["reason"].startswith("command ts is")
    assert supervisor.reply_to("tampered")[0]["seq"] == refusals[1].seq
    assert supervisor.reply_to("tampered")[0]["event_id"] == refusals[1].event_id


def test_refused_commands_reach_the_events_stream(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    events_key: Secret,
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    events = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/events"])
    start(make_publisher, mosquitto.port, keys, journal, EngineDouble())
    forged = {**signed_command(command_key, TABLE, "void_shoe", command_id="forged"), "sig": "0" * 64}
    supervisor.send(forged)
    [message] = events.wait_for(lambda msgs: len(msgs) >= 1)
    events.close()
    envelope = validate_payload(message.topic, message.payload)
    assert verify(envelope, events_key, UNSIGNED_EVENT_FIELDS)
    assert envelope["kind"] == "command_refused"
    assert envelope["data"]["command_id"] == "forged"
    assert envelope["data"]["code"] == "bad_signature"
    assert envelope["data"]["refused_by"] == "edge"
    wait_until_delivered(journal)


def test_mqtt5_response_topic_and_correlation_data(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    start(make_publisher, mosquitto.port, keys, journal, EngineDouble())
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    # The Response Topic must lie in the table's reply subtree (a requester may not make the
    # table publish anywhere else: see test_settings_and_verifier for the refused ones).
    response_topic = f"baccarat/v1/{TABLE}/cmd/reply/server-42"
    props.ResponseTopic = response_topic
    props.CorrelationData = b"corr-42"
    supervisor.send(signed_command(command_key, TABLE, "rescan_ack", command_id="rr"), properties=props)
    messages = supervisor.replies.wait_for(lambda msgs: any(m.topic == response_topic for m in msgs))
    direct = next(m for m in messages if m.topic == response_topic)
    assert direct.json()["command_id"] == "rr"
    assert direct.properties is not None
    assert direct.properties.CorrelationData == b"corr-42"  # type: ignore[attr-defined]
    validate_payload("x/cmd/reply", direct.payload)


def test_nonce_memory_survives_a_restart(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    command_key: Secret,
    tmp_path: Path,
    make_publisher: Callable[..., Publisher],
) -> None:
    settings = JournalSettings(path=tmp_path / "restart.sqlite3")
    first_journal = Journal(settings, TABLE)
    first = start(make_publisher, mosquitto.port, keys, first_journal, EngineDouble())
    command = signed_command(command_key, TABLE, "new_shoe", command_id="once")
    supervisor.send(command)
    assert supervisor.reply_to("once")[0]["status"] == "accepted"
    first.stop()
    first_journal.close()

    second_journal = Journal(settings, TABLE)
    engine = EngineDouble()
    second = start(make_publisher, mosquitto.port, keys, second_journal, engine)
    supervisor.send(command)  # replayed after the daemon restarted
    replies = supervisor.reply_to("once", count=2)
    assert replies[1]["code"] == "replayed"
    assert engine.commands == []
    second.stop()
    second_journal.close()


def test_no_command_key_refuses_everything(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    settings = make_settings(mosquitto.port, keys)
    settings = settings.model_copy(
        update={"signing": settings.signing.model_copy(update={"command_key": None})}
    )
    engine = EngineDouble()
    publisher = make_publisher(settings, TABLE, journal, on_command=engine.on_command)
    assert publisher.subscribed.wait(10)
    supervisor.send(signed_command(command_key, TABLE, "new_shoe", command_id="nokey"))
    reply = supervisor.reply_to("nokey")[0]
    assert reply["code"] == "bad_signature"
    assert "no command key" in reply["reason"]
    assert engine.commands == []


class HeldEngine:
    """Queues commands without answering: the engine answers later, as during a reload."""

    def __init__(self) -> None:
        self.pending: list[tuple[SupervisorCommand, ReplyFn]] = []
        self.received = threading.Event()

    def on_command(self, command: SupervisorCommand, reply: ReplyFn) -> None:
        self.pending.append((command, reply))
        self.received.set()


def test_a_reply_owed_across_a_publisher_swap_goes_out_through_the_new_connection(
    mosquitto: MosquittoBroker,
    supervisor: Supervisor,
    keys: dict[str, Path],
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    engine = HeldEngine()
    old = make_publisher(make_settings(mosquitto.port, keys), TABLE, journal, on_command=engine.on_command)
    assert old.subscribed.wait(10)
    supervisor.send(signed_command(command_key, TABLE, "void_round", {"reason": "x"}, command_id="held"))
    assert engine.received.wait(10)
    # the runner's SIGHUP swap: the new publisher is built, takes the replies, the old one stops
    fresh = Publisher(make_settings(mosquitto.port, keys), TABLE, journal, on_command=engine.on_command)
    old.hand_over_replies(fresh)
    old.stop(timeout=2.0)
    [(_command, reply)] = engine.pending
    reply({"accepted": True, "reason": None, "event_id": "e-9", "seq": 9})  # before fresh connects
    fresh.start()
    try:
        [answer] = supervisor.reply_to("held")
    finally:
        fresh.stop(timeout=2.0)
    assert (answer["status"], answer["event_id"], answer["seq"]) == ("accepted", "e-9", 9)
