"""The embedded amqtt broker of the demo, with paho speaking MQTT 3.1.1 to it."""

from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.service.demo_broker import EmbeddedBroker


def test_embedded_broker_delivers_qos1_and_retained_messages() -> None:
    received: list[tuple[str, bytes, bool]] = []
    got_two = threading.Event()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        received.append((msg.topic, bytes(msg.payload), bool(msg.retain)))
        if len(received) == 2:
            got_two.set()

    with EmbeddedBroker() as broker:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        client.on_message = on_message
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        try:
            client.publish("baccarat/v1/T1/status", b"online", qos=1, retain=True).wait_for_publish(5)
            subscribed = client.subscribe("baccarat/v1/T1/#", qos=1)
            assert subscribed[0] == mqtt.MQTT_ERR_SUCCESS
            client.publish("baccarat/v1/T1/events", b'{"seq": 1}', qos=1).wait_for_publish(5)
            assert got_two.wait(10)
        finally:
            client.loop_stop()
            client.disconnect()
    assert ("baccarat/v1/T1/status", b"online", True) in received
    assert ("baccarat/v1/T1/events", b'{"seq": 1}', False) in received


def test_stop_releases_the_port() -> None:
    broker = EmbeddedBroker().start()
    port = broker.port
    broker.stop()
    again = EmbeddedBroker(port=port).start()
    again.stop()
