"""TickingSession on a real mosquitto: it ticks, outlives a failing tick, ticks once more on
close, and its session is kept by the broker while the consumer is away."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.mqtt.ticking_session import TickingSession
from tests.support.broker import MosquittoBroker


def client(client_id: str) -> mqtt.Client:
    return mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)


def until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_it_ticks_outlives_a_failing_tick_and_ticks_once_more_on_close(mosquitto: MosquittoBroker) -> None:
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 2:
            raise RuntimeError("checkpoint locked")  # logged; the thread goes on

    paho = client("ticking-test")
    session = TickingSession(paho, tick, 0.02, "test-ack")
    session.open("127.0.0.1", mosquitto.port, keepalive=15, session_expiry_s=600)
    assert until(paho.is_connected)
    assert until(lambda: len(ticks) >= 4), ticks  # ticks after the failing second one
    session.close()
    closed_with = len(ticks)
    assert not paho.is_connected()
    time.sleep(0.1)
    assert len(ticks) == closed_with  # the thread has stopped


def test_the_broker_keeps_the_session_while_the_consumer_is_away(mosquitto: MosquittoBroker) -> None:
    subscribed = threading.Event()
    received: list[bytes] = []
    first = client("ticking-persistent")
    first.on_connect = lambda c, *_a: c.subscribe("away/t", qos=1)
    first.on_subscribe = lambda *_a: subscribed.set()
    session = TickingSession(first, lambda: None, 0.05, "test-ack")
    session.open("127.0.0.1", mosquitto.port, keepalive=15, session_expiry_s=600)
    assert subscribed.wait(10)
    session.close()

    publisher = client("ticking-publisher")
    publisher.connect("127.0.0.1", mosquitto.port)
    publisher.loop_start()
    try:
        info = publisher.publish("away/t", b"queued while away", qos=1)
        info.wait_for_publish(10)
        assert info.is_published()
    finally:
        publisher.disconnect()
        publisher.loop_stop()

    again = client("ticking-persistent")  # same client id, no new subscription
    again.on_message = lambda _c, _u, message: received.append(bytes(message.payload))
    resumed = TickingSession(again, lambda: None, 0.05, "test-ack")
    resumed.open("127.0.0.1", mosquitto.port, keepalive=15, session_expiry_s=600)
    try:
        assert until(lambda: received == [b"queued while away"]), received
    finally:
        resumed.close()
