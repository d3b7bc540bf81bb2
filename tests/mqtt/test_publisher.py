"""The publisher against a real mosquitto: order, acknowledgement, retained topics, schemas,
broker outage, clean stop."""

from __future__ import annotations

import getpass
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.journal import Journal
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import verify
from tests.mqtt.conftest import TABLE, card_event, make_settings
from tests.mqtt.support import (
    Subscriber,
    engine_snapshot_mid_round,
    engine_snapshots,
    topic_count,
    validate_payload,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("protocol", ["mqtt5", "mqtt311"])
def test_every_event_arrives_in_order_signed_and_schema_valid(
    protocol: str,
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    events_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    sub = Subscriber(
        mosquitto.port,
        [f"baccarat/v1/{TABLE}/#"],
        protocol=mqtt.MQTTv5 if protocol == "mqtt5" else mqtt.MQTTv311,
    )
    journal.append([], [card_event(n) for n in range(30)])  # journaled before the publisher runs
    snapshot = engine_snapshot_mid_round()
    publisher = make_publisher(
        make_settings(mosquitto.port, keys, protocol=protocol, inflight_window=4),
        TABLE,
        journal,
        snapshot=lambda: snapshot,
    )
    for n in range(30, 60):
        journal.append([], [card_event(n)])
        publisher.notify()
    messages = sub.wait_for(topic_count("events", 60))
    wait_until(lambda: not journal.pending(), what="every event marked delivered")
    sub.wait_for(
        lambda msgs: any(
            m.topic.endswith("/health") and m.json()["counters"]["acknowledged"] >= 60 for m in msgs
        )
    )
    publisher.stop()
    sub.wait_for(lambda msgs: any(m.topic.endswith("/status") and b'"offline"' in m.payload for m in msgs))
    messages = sub.wait_for(lambda msgs: True)
    sub.close()

    consumer = EventConsumer(TABLE, key=events_key, require_signature=True)
    for message in messages:
        validate_payload(message.topic, message.payload)
        if message.topic.endswith("/events"):
            assert consumer.feed(message.payload).verdict in (Verdict.NEW, Verdict.DUPLICATE)
    assert consumer.stats.new == 60
    assert consumer.stats.out_of_order == 0
    assert consumer.unexplained_gaps == []
    seqs = [m.json()["seq"] for m in messages if m.topic.endswith("/events")]
    assert sorted(set(seqs)) == list(range(1, 61))
    statuses = [m.json()["status"] for m in messages if m.topic.endswith("/status")]
    assert statuses[0] == "online"
    assert statuses[-1] == "offline"
    # The first thing on the wire after "online" is the retained state, before any event.
    topics = [m.topic.rsplit("/", 1)[1] for m in messages]
    assert topics.index("state") < topics.index("events")
    if protocol == "mqtt5":
        first_event = next(m for m in messages if m.topic.endswith("/events"))
        assert first_event.properties is not None
        assert first_event.properties.ContentType == "application/json"  # type: ignore[attr-defined]
        assert ("contract", "baccarat/v1") in first_event.properties.UserProperty  # type: ignore[attr-defined]
    state = next(m.json() for m in messages if m.topic.endswith("/state"))
    assert state["state"] == snapshot
    health = [m.json() for m in messages if m.topic.endswith("/health")]
    assert health[-1]["counters"]["published"] >= 60
    assert health[-1]["queue_depth"] == 0


@pytest.mark.restarts
def test_broker_outage_mid_shoe_loses_nothing(
    tmp_path: Path,
    keys: dict[str, Path],
    events_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    store = tmp_path / "persist"
    store.mkdir()
    # A production-like broker: persistent sessions survive its restart (see config/mosquitto/).
    broker = MosquittoBroker(
        tmp_path / "broker",
        # "user": mosquitto started as root would drop to the mosquitto user, which cannot
        # write the test's private temporary directory.
        extra_config=f"persistence true\npersistence_location {store}/\nuser {getpass.getuser()}\n",
    )
    broker.start()
    try:
        sub = Subscriber(broker.port, [f"baccarat/v1/{TABLE}/events"], client_id="game-server", clean=False)
        publisher = make_publisher(make_settings(broker.port, keys, inflight_window=8), TABLE, journal)

        stop_dealing = threading.Event()

        def deal() -> None:
            n = 0
            while not stop_dealing.is_set() and n < 400:
                journal.append([], [card_event(n)])
                publisher.notify()
                n += 1
                time.sleep(0.005)

        dealer = threading.Thread(target=deal)
        dealer.start()
        sub.wait_for(topic_count("events", 40))
        broker.stop()  # mid-shoe: the dealer keeps journaling while the broker is away
        wait_until(lambda: not publisher.connected, what="publisher to notice the outage")
        time.sleep(1.0)
        broker.start()
        dealer.join()
        total = journal.last_seq()
        wait_until(lambda: not journal.pending(), timeout=30, what="journal drained after the outage")
        sub.wait_for(lambda msgs: {m.json()["seq"] for m in msgs} >= set(range(1, total + 1)), timeout=30)
        sub.close()
        health = publisher.health()
    finally:
        broker.stop()

    consumer = EventConsumer(TABLE, key=events_key, require_signature=True)
    first_arrivals: list[int] = []
    for message in sub.messages:
        validate_payload(message.topic, message.payload)
        result = consumer.feed(message.payload)
        assert result.verdict in (Verdict.NEW, Verdict.DUPLICATE), result.reason
        if result.verdict is Verdict.NEW:
            first_arrivals.append(message.json()["seq"])
    assert first_arrivals == list(range(1, total + 1))  # in order, no gap
    assert consumer.unexplained_gaps == []
    assert health["counters"]["connects"] >= 2
    assert health["queue_depth"] == 0


def test_unreachable_broker_keeps_events_journaled_and_reports_it(
    keys: dict[str, Path], journal: Journal, make_publisher: Callable[..., Publisher]
) -> None:
    from tests.support.broker import free_port

    port = free_port()
    publisher = make_publisher(make_settings(port, keys), TABLE, journal)
    journal.append([], [card_event(n) for n in range(5)])
    publisher.notify()
    wait_until(lambda: publisher.counters.connection_failures >= 2, what="reconnect attempts")
    health = publisher.health()
    assert health["connected"] is False
    assert "connect to 127.0.0.1" in (health["last_error"] or "")
    assert health["queue_depth"] == 5
    assert health["oldest_undelivered_age_s"] is not None
    assert [e.seq for e in journal.pending()] == [1, 2, 3, 4, 5]


def test_last_will_says_offline_when_the_daemon_dies(
    mosquitto: MosquittoBroker, keys: dict[str, Path], journal: Journal
) -> None:
    sub = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/status"])
    publisher = Publisher(make_settings(mosquitto.port, keys, protocol="mqtt5"), TABLE, journal)
    publisher.start()
    sub.wait_for(lambda msgs: any(b'"online"' in m.payload for m in msgs))
    # Simulate a crash: the socket goes away without DISCONNECT.
    sock = publisher.connection.client.socket()
    assert sock is not None
    publisher.connection.stopping.set()  # no reconnect, and no DISCONNECT
    sock.close()
    messages = sub.wait_for(lambda msgs: any(b'"offline"' in m.payload for m in msgs))
    sub.close()
    for message in messages:
        validate_payload(message.topic, message.payload)


def test_a_broken_snapshot_or_command_handler_never_stops_delivery(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    command_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    from tests.mqtt.support import signed_command

    def bad_handler(command: Any, reply: Any) -> None:
        raise RuntimeError("engine queue exploded")

    sub = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/#"])
    publisher = make_publisher(
        make_settings(mosquitto.port, keys),
        TABLE,
        journal,
        snapshot=lambda: {"bad": float("nan")},  # not JSON: cannot be published
        on_command=bad_handler,
    )
    assert publisher.subscribed.wait(10), "cmd subscription not acknowledged"

    sender = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="sender")
    sender.connect("127.0.0.1", mosquitto.port)
    sender.loop_start()
    command = signed_command(command_key, TABLE, "rescan_ack", command_id="boom")
    sender.publish(f"baccarat/v1/{TABLE}/cmd", json.dumps(command), qos=1).wait_for_publish(5)
    sender.disconnect()
    sender.loop_stop()
    reply = sub.wait_for(topic_count("cmd/reply", 1))
    answer = next(m.json() for m in reply if m.topic.endswith("/cmd/reply"))
    assert answer["status"] == "refused"
    assert "engine queue exploded" in answer["reason"]
    journal.append([], [card_event(n) for n in range(5)])
    publisher.notify()
    sub.wait_for(topic_count("events", 5))
    wait_until(lambda: not journal.pending(), what="delivery despite the broken snapshot")
    sub.close()


def test_state_is_published_on_connect_at_round_boundaries_and_at_stop_only(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    events_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    from daemon.journal import DeliveryEvent

    real = engine_snapshots()
    snapshots = {"n": 0}

    def snapshot() -> dict[str, Any]:
        # A new object on every call: to the publisher the state changed every time.
        snapshots["n"] += 1
        return dict(real[snapshots["n"] % len(real)])

    sub = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/state", f"baccarat/v1/{TABLE}/status"])
    publisher = make_publisher(
        make_settings(mosquitto.port, keys, state_interval_s=60.0), TABLE, journal, snapshot=snapshot
    )
    sub.wait_for(topic_count("state", 1))  # on connect
    journal.append([], [card_event(n) for n in range(20)])  # no boundary: no state
    publisher.notify()
    wait_until(lambda: not journal.pending(), what="cards delivered")
    boundary = DeliveryEvent(kind="round_completed", at=1.0, data={}, shoe_id="S1", hand=4, source="system")
    journal.append([], [boundary])
    publisher.notify()
    sub.wait_for(topic_count("state", 2))  # at once after the boundary
    publisher.stop()
    messages = sub.wait_for(lambda msgs: any(b'"offline"' in m.payload for m in msgs))
    sub.close()
    states = [m for m in messages if m.topic.endswith("/state")]
    assert len(states) == 3  # connect, round boundary, stop: nothing for the 20 cards
    for message in states:
        validate_payload(message.topic, message.payload)
    last_state = states[-1].json()
    assert last_state["last_seq"] == 21
    assert verify(last_state, events_key)
    after_offline = [m.topic for m in messages[messages.index(states[-1]) :]]
    assert after_offline[-1].endswith("/status")  # the final state went out before offline


def test_every_event_carries_the_full_properties_built_once(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    # The event properties are built once at start-up and reused: every copy on the wire,
    # not only the first, must still carry all of them.
    sub = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/events"])
    journal.append([], [card_event(n) for n in range(12)])
    publisher = make_publisher(
        make_settings(mosquitto.port, keys, inflight_window=4, message_expiry_s=600), TABLE, journal
    )
    publisher.start()
    messages = sub.wait_for(topic_count("events", 12))
    sub.close()
    assert [m.json()["seq"] for m in messages] == list(range(1, 13))
    for message in messages:
        props = message.properties
        assert props is not None
        assert props.ContentType == "application/json"  # type: ignore[attr-defined]
        assert props.PayloadFormatIndicator == 1  # type: ignore[attr-defined]
        assert props.UserProperty == [("contract", "baccarat/v1"), ("schema_version", "1")]  # type: ignore[attr-defined]
        assert 0 < props.MessageExpiryInterval <= 600  # type: ignore[attr-defined]
