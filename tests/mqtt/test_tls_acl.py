"""TLS with certificate verification and the production ACL (config/mosquitto/acl) on a real
mosquitto, certificates made by config/mosquitto/make-pki.sh: a table cannot publish into
another table's topics nor into any command topic (its own included), reads nothing but its
own commands, commands with a bad signature, an old timestamp or a reused nonce are refused
there too, a broker rejection is dead-lettered with an alert (never retried forever), and the
daemon refuses a broker it cannot verify."""

from __future__ import annotations

import getpass
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.journal import Journal, JournalSettings
from daemon.mqtt.consumer import EventConsumer
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret, SecretSource
from daemon.mqtt.settings import BrokerSettings, DeliverySettings, SigningSettings, TlsSettings
from daemon.mqtt.signing import verify
from daemon.mqtt.tls import tls_context
from tests.conftest import REPO_ROOT
from tests.mqtt.conftest import TABLE, card_event
from tests.mqtt.support import Subscriber, signed_command, validate_payload
from tests.mqtt.test_commands import EngineDouble, Supervisor
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

CONFIG = REPO_ROOT / "config" / "mosquitto"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["bash", str(CONFIG / "make-pki.sh"), str(out), "127.0.0.1", "T1", "T2", "game-server"],
        check=True,
        capture_output=True,
    )
    # A second, unrelated CA: a broker certificate signed by it must be refused.
    rogue = out / "rogue"
    subprocess.run(
        ["bash", str(CONFIG / "make-pki.sh"), str(rogue), "127.0.0.1", "x"], check=True, capture_output=True
    )
    return out


@pytest.fixture
def tls_broker(tmp_path: Path, pki: Path) -> Iterator[MosquittoBroker]:
    broker = MosquittoBroker(
        tmp_path / "broker",
        extra_config="\n".join(
            [
                f"cafile {pki / 'ca.crt'}",
                f"certfile {pki / 'broker.crt'}",
                f"keyfile {pki / 'broker.key'}",
                "tls_version tlsv1.2",
                "require_certificate true",
                "use_identity_as_username true",
                "allow_anonymous false",
                f"acl_file {CONFIG / 'acl'}",
                # mosquitto started as root drops to its own user, which cannot read the test's keys.
                f"user {getpass.getuser()}",
            ]
        ),
    )
    broker.start()
    yield broker
    broker.stop()


def tls_settings(port: int, pki: Path, cert: str, ca: Path | None = None) -> BrokerSettings:
    return BrokerSettings(
        host="127.0.0.1",
        port=port,
        client_id=f"edge-{cert}-{time.monotonic_ns()}",
        tls=TlsSettings(
            ca_file=ca or pki / "ca.crt", cert_file=pki / f"{cert}.crt", key_file=pki / f"{cert}.key"
        ),
        delivery=DeliverySettings(health_interval_s=0.3, backoff_initial_s=0.05, backoff_max_s=0.3),
    )


def tls_for(pki: Path, cert: str) -> Callable[[mqtt.Client], None]:
    def configure(client: mqtt.Client) -> None:
        client.tls_set(
            ca_certs=str(pki / "ca.crt"), certfile=str(pki / f"{cert}.crt"), keyfile=str(pki / f"{cert}.key")
        )

    return configure


def server_subscriber(port: int, pki: Path) -> Subscriber:
    return Subscriber(
        port, ["baccarat/v1/#"], configure=tls_for(pki, "game-server"), client_id="game-server-sub"
    )


def raw_client(port: int, pki: Path, cert: str) -> mqtt.Client:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"raw-{cert}", protocol=mqtt.MQTTv5)
    client.tls_set(
        ca_certs=str(pki / "ca.crt"), certfile=str(pki / f"{cert}.crt"), keyfile=str(pki / f"{cert}.key")
    )
    connected = threading.Event()
    client.on_connect = lambda *a: connected.set()
    client.connect("127.0.0.1", port)
    client.loop_start()
    assert connected.wait(10)
    return client


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_table_publishes_its_own_topics_over_verified_tls(
    tls_broker: MosquittoBroker, pki: Path, tmp_path: Path
) -> None:
    server = server_subscriber(tls_broker.port, pki)
    journal = Journal(JournalSettings(path=tmp_path / "t1.sqlite3"), "T1")
    journal.append([], [card_event(n) for n in range(10)])
    publisher = Publisher(tls_settings(tls_broker.port, pki, "T1"), "T1", journal)
    publisher.start()
    try:
        server.wait_for(lambda msgs: sum(m.topic == "baccarat/v1/T1/events" for m in msgs) >= 10)
        wait_until(lambda: not journal.pending(), what="PUBACKs")
    finally:
        publisher.stop()
        journal.close()
    consumer = EventConsumer("T1")
    for message in server.messages:
        validate_payload(message.topic, message.payload)
        if message.topic.endswith("/events"):
            consumer.feed(message.payload)
    server.close()
    assert consumer.stats.new == 10
    assert consumer.unexplained_gaps == []


def test_a_table_cannot_publish_into_another_tables_topics(tls_broker: MosquittoBroker, pki: Path) -> None:
    server = server_subscriber(tls_broker.port, pki)
    t1 = raw_client(tls_broker.port, pki, "T1")
    acks: dict[int, Any] = {}
    done = threading.Event()

    def on_publish(client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        acks[mid] = reason
        if len(acks) >= 3:
            done.set()

    t1.on_publish = on_publish
    forged = [
        t1.publish("baccarat/v1/T2/events", b'{"forged": true}', qos=1),
        t1.publish("baccarat/v1/T2/status", b'{"status": "offline"}', qos=1, retain=True),
        t1.publish("baccarat/v1/T1/events", b'{"own": true}', qos=1),
    ]
    assert done.wait(10)
    assert acks[forged[0].mid].value == 0x87  # Not authorized
    assert acks[forged[1].mid].value == 0x87
    assert acks[forged[2].mid].value == 0
    # The broker handles one connection's packets in order and delivers to the server in
    # order: once T1's own event (sent last) arrived, the forged ones would have too.
    server.wait_for(lambda msgs: any(m.topic == "baccarat/v1/T1/events" for m in msgs))
    assert not [m for m in server.messages if m.topic.startswith("baccarat/v1/T2/")]

    # Nor read another table's commands (mosquitto grants the subscription but never delivers).
    t1_got: list[str] = []
    marker = threading.Event()
    subscribed = threading.Event()

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        t1_got.append(msg.topic)
        if msg.topic == "baccarat/v1/T1/cmd":
            marker.set()

    t1.on_message = on_message
    t1.on_subscribe = lambda *a: subscribed.set()
    t1.subscribe([("baccarat/v1/T2/cmd", 1), ("baccarat/v1/T1/cmd", 1)])
    assert subscribed.wait(10)
    t2 = Subscriber(tls_broker.port, ["baccarat/v1/T2/cmd"], configure=tls_for(pki, "T2"), client_id="T2-sub")
    server.client.publish("baccarat/v1/T2/cmd", b'{"for": "T2"}', qos=1).wait_for_publish(5)
    # A message T1 may read, sent after the forbidden one: when it arrives, the other would have.
    server.client.publish("baccarat/v1/T1/cmd", b'{"for": "T1"}', qos=1).wait_for_publish(5)
    t2.wait_for(lambda msgs: len(msgs) >= 1)
    assert marker.wait(10)
    assert t1_got == ["baccarat/v1/T1/cmd"]
    t2.close()
    t1.disconnect()
    t1.loop_stop()
    server.close()


def publish_and_collect_acks(client: mqtt.Client, messages: list[tuple[str, bytes]]) -> list[int]:
    """Publish each (topic, payload) at QoS 1 in order; return the PUBACK reason codes."""
    acks: dict[int, int] = {}
    done = threading.Event()

    def on_publish(client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        acks[mid] = reason.value
        if len(acks) >= len(messages):
            done.set()

    client.on_publish = on_publish
    mids = [client.publish(topic, payload, qos=1).mid for topic, payload in messages]
    assert done.wait(10), f"PUBACKs missing: got {acks}"
    return [acks[mid] for mid in mids]


def test_no_table_writes_a_command_topic_its_own_included(
    tls_broker: MosquittoBroker, pki: Path, command_key: Secret
) -> None:
    """Only the game server writes commands: even a correctly signed command (a leaked key)
    published by a table is refused by the broker and reaches no subscriber."""
    server = server_subscriber(tls_broker.port, pki)
    t1_cmd = Subscriber(
        tls_broker.port, ["baccarat/v1/T1/cmd"], configure=tls_for(pki, "T1"), client_id="T1-sub"
    )
    t2_cmd = Subscriber(
        tls_broker.port, ["baccarat/v1/T2/cmd"], configure=tls_for(pki, "T2"), client_id="T2-sub"
    )
    t1 = raw_client(tls_broker.port, pki, "T1")
    forged = [
        ("baccarat/v1/T1/cmd", json.dumps(signed_command(command_key, "T1", "void_shoe")).encode()),
        ("baccarat/v1/T2/cmd", json.dumps(signed_command(command_key, "T2", "void_shoe")).encode()),
        ("baccarat/v1/T1/cmd", b"not even json"),
        # T1's own events topic, allowed: the marker that the forged ones were handled first.
        ("baccarat/v1/T1/events", b'{"own": true}'),
    ]
    assert publish_and_collect_acks(t1, forged) == [0x87, 0x87, 0x87, 0]  # 0x87 Not authorized
    # The broker handled the refusals before the PUBACKs came back; markers the server sends
    # afterwards reach each subscriber after anything the forged publishes would have queued.
    server.wait_for(lambda msgs: any(m.topic == "baccarat/v1/T1/events" for m in msgs))
    for table in ("T1", "T2"):
        server.client.publish(f"baccarat/v1/{table}/cmd", b'{"marker": true}', qos=1).wait_for_publish(5)
    for subscriber in (t1_cmd, t2_cmd):
        subscriber.wait_for(lambda msgs: len(msgs) >= 1)
    server.wait_for(lambda msgs: sum(m.topic.endswith("/cmd") for m in msgs) >= 2)
    assert [m.payload for m in t1_cmd.messages] == [b'{"marker": true}']
    assert [m.payload for m in t2_cmd.messages] == [b'{"marker": true}']
    assert [(m.topic, m.payload) for m in server.messages if m.topic.endswith("/cmd")] == [
        ("baccarat/v1/T1/cmd", b'{"marker": true}'),
        ("baccarat/v1/T2/cmd", b'{"marker": true}'),
    ]
    t1.disconnect()
    t1.loop_stop()
    for subscriber in (t1_cmd, t2_cmd, server):
        subscriber.close()


def test_a_table_reads_nothing_but_its_own_commands(tls_broker: MosquittoBroker, pki: Path) -> None:
    """Wildcard subscriptions are granted but deliver only what the ACL lets T1 read: its own
    ``cmd``. Not T2's events, retained state or replies, not T2's commands, not its own stream."""
    server = raw_client(tls_broker.port, pki, "game-server")
    t2 = raw_client(tls_broker.port, pki, "T2")
    state = t2.publish("baccarat/v1/T2/state", b'{"retained": true}', qos=1, retain=True)
    state.wait_for_publish(5)
    t1_reads = Subscriber(
        tls_broker.port,
        ["baccarat/v1/#", "baccarat/v1/+/events", "baccarat/v1/T2/#", "#"],
        configure=tls_for(pki, "T1"),
        client_id="T1-wildcards",
    )
    t1 = raw_client(tls_broker.port, pki, "T1")
    assert publish_and_collect_acks(t1, [("baccarat/v1/T1/events", b'{"own": true}')]) == [0]
    assert publish_and_collect_acks(
        t2,
        [
            ("baccarat/v1/T2/events", b'{"t2": true}'),
            ("baccarat/v1/T2/alerts", b'{"t2": true}'),
            ("baccarat/v1/T2/cmd/reply", b'{"t2": true}'),
        ],
    ) == [0, 0, 0]
    server.publish("baccarat/v1/T2/cmd", b'{"for": "T2"}', qos=1).wait_for_publish(5)
    server.publish("baccarat/v1/T1/cmd", b'{"for": "T1"}', qos=1).wait_for_publish(5)
    # The last message, and the only one T1 may read: once it arrived, any other would have.
    messages = t1_reads.wait_for(lambda msgs: any(m.payload == b'{"for": "T1"}' for m in msgs))
    assert {(m.topic, m.payload) for m in messages} == {("baccarat/v1/T1/cmd", b'{"for": "T1"}')}
    for client in (server, t1, t2):
        client.disconnect()
        client.loop_stop()
    t1_reads.close()


def test_command_refusals_on_the_tls_acl_broker(
    tls_broker: MosquittoBroker,
    pki: Path,
    tmp_path: Path,
    keys: dict[str, Path],
    events_key: Secret,
    command_key: Secret,
) -> None:
    """The refusals of test_commands.py, on the production broker set-up: the game server
    sends commands over verified TLS through the ACL; a bad signature, an old timestamp and a
    reused nonce are refused, with the reason, and never reach the engine."""
    assert TABLE == "T1"  # the helpers of test_commands.py address T1, whose certificate we hold
    journal = Journal(JournalSettings(path=tmp_path / "t1.sqlite3"), TABLE)
    signing = SigningSettings(
        events_key=SecretSource(file=keys["events"]), command_key=SecretSource(file=keys["command"])
    )
    settings = tls_settings(tls_broker.port, pki, TABLE).model_copy(update={"signing": signing})
    engine = EngineDouble()
    publisher = Publisher(settings, TABLE, journal, on_command=engine.on_command)
    publisher.start()
    supervisor = TlsSupervisor(tls_broker.port, pki)
    try:
        assert publisher.subscribed.wait(10), "the broker did not grant T1 its cmd subscription"
        good = signed_command(command_key, TABLE, "void_round", {"reason": "misdeal"}, command_id="good")
        supervisor.send(good)
        assert supervisor.reply_to("good")[0]["status"] == "accepted"
        supervisor.send(good)  # the same nonce again
        tampered = signed_command(command_key, TABLE, "void_shoe", command_id="tampered")
        tampered["action"] = "new_shoe"
        supervisor.send(tampered)
        supervisor.send(
            signed_command(command_key, TABLE, "void_shoe", ts=time.time() - 300, command_id="old")
        )
        replies = {
            "replayed": supervisor.reply_to("good", count=2)[1],
            "bad_signature": supervisor.reply_to("tampered")[0],
            "stale": supervisor.reply_to("old")[0],
        }
        wait_until(lambda: not journal.pending(), what="the refusals delivered")
    finally:
        supervisor.close()
        publisher.stop()
    for code, reply in replies.items():
        assert (reply["status"], reply["code"]) == ("refused", code)
        assert reply["reason"]
    assert [c.command_id for c in engine.commands] == ["good"]
    for message in supervisor.replies.messages:
        assert message.topic == "baccarat/v1/T1/cmd/reply"
        assert verify(validate_payload(message.topic, message.payload), events_key)
    refusals = [e for e in journal.events(origin=None) if e.kind == "command_refused"]
    assert [(e.data["command_id"], e.data["code"]) for e in refusals] == [
        ("good", "replayed"),
        ("tampered", "bad_signature"),
        ("old", "stale"),
    ]
    assert publisher.counters.dead_lettered == 0  # the ACL let T1 publish its replies and events
    journal.close()


class TlsSupervisor(Supervisor):
    """test_commands.Supervisor as the game server over verified TLS with its certificate."""

    def __init__(self, port: int, pki: Path) -> None:
        # Same attributes as Supervisor.__init__ (send/reply_to/close are reused as they are);
        # only the connections differ: TLS with the game-server certificate.
        self.replies = Subscriber(
            port,
            [f"baccarat/v1/{TABLE}/cmd/reply"],
            configure=tls_for(pki, "game-server"),
            client_id="gs-replies",
        )
        self.client = raw_client(port, pki, "game-server")


def test_broker_rejection_is_dead_lettered_with_an_alert_not_retried(
    tls_broker: MosquittoBroker, pki: Path, tmp_path: Path
) -> None:
    # A daemon misconfigured as table T2 while holding T1's certificate: every event is refused.
    journal = Journal(JournalSettings(path=tmp_path / "t2.sqlite3"), "T2")
    journal.append([], [card_event(n) for n in range(3)])
    publisher = Publisher(tls_settings(tls_broker.port, pki, "T1"), "T2", journal)
    publisher.start()
    try:
        wait_until(lambda: len(journal.dead_letters()) >= 6, what="dead letters")
        # A marker card after them: a retry or an alert about the alerts would be journaled
        # (and processed) before the marker's own dead letter and alert.
        journal.append([], [card_event(99)])
        publisher.notify()
        wait_until(lambda: len(journal.dead_letters()) >= 8, what="the marker's dead letter")
        dead = journal.dead_letters()
        health = publisher.health()
    finally:
        publisher.stop()
    assert [e.kind for e in dead] == ["card_dealt"] * 3 + ["alert_raised"] * 3 + [
        "card_dealt",
        "alert_raised",
    ]
    assert all("Not authorized" in (e.dead_letter or "") for e in dead)
    alerts = [e.data for e in dead if e.kind == "alert_raised"]
    assert [a["seq"] for a in alerts] == [1, 2, 3, 7]
    assert {a["code"] for a in alerts} == {"mqtt_dead_letter"}
    assert journal.pending() == []
    assert health["counters"]["dead_lettered"] == 8
    assert health["counters"]["delivery_retries"] == 0
    journal.close()


def test_the_daemon_refuses_a_broker_it_cannot_verify(
    tls_broker: MosquittoBroker, pki: Path, tmp_path: Path
) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "t1.sqlite3"), "T1")
    # Trusting only an unrelated CA: the real broker's certificate must not be accepted.
    settings = tls_settings(tls_broker.port, pki, "T1", ca=pki / "rogue" / "ca.crt")
    publisher = Publisher(settings, "T1", journal)
    publisher.start()
    try:
        wait_until(lambda: publisher.counters.connection_failures >= 1, what="a refused connection")
        assert not publisher.connected
        assert "CERTIFICATE_VERIFY_FAILED" in (publisher.health()["last_error"] or "")
    finally:
        publisher.stop()
        journal.close()


def test_tls_verification_is_on_by_default() -> None:
    settings = BrokerSettings(host="broker.example")
    assert settings.tls.enabled
    assert settings.effective_port == 8883
    context = tls_context(settings.tls)  # what the publisher's connection uses
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_the_daemon_checks_the_broker_host_name(
    tls_broker: MosquittoBroker, pki: Path, tmp_path: Path
) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "t1.sqlite3"), "T1")
    # The broker certificate names only IP 127.0.0.1: reaching it as "localhost" must fail.
    settings = tls_settings(tls_broker.port, pki, "T1").model_copy(update={"host": "localhost"})
    publisher = Publisher(settings, "T1", journal)
    publisher.start()
    try:
        wait_until(lambda: publisher.counters.connection_failures >= 1, what="a refused connection")
        assert not publisher.connected
        assert "Hostname mismatch" in (publisher.health()["last_error"] or "")
    finally:
        publisher.stop()
        journal.close()
