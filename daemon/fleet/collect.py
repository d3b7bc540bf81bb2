"""Gathering every table's retained topics from one broker.

One MQTT client subscribes to ``baccarat/v1/+/status``, ``+/health`` and ``+/state``. The
broker answers the subscription with every retained message at once. The end of that burst
is found two ways: after the SUBACK the client publishes an empty marker to a private topic
it also subscribed to, which a broker that queues the retained burst at SUBSCRIBE (mosquitto)
delivers right after the burst; where the marker never comes back (another broker, an ACL
that refuses it), no message for ``quiet_s`` ends it. ``timeout_s`` bounds it whatever the
broker does (a cut gathering is reported as not ``complete``). :class:`LiveFleet` keeps the
client running for the exporter: it connects in the background and retries until the broker
answers, the store follows every update, and paho reconnects (the broker then resends the
retained set).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daemon.fleet.tables import SUBSCRIPTIONS, Fleet

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

    from daemon.mqtt.client_options import ClientOptions


MARKER_PREFIX = "baccarat-edge/fleet-sync"
"""Our own end-of-burst marker topic: ``<prefix>/<random>``, empty payload, QoS 0, not retained."""


class CollectError(Exception):
    """The broker could not be reached, refused the connection or the subscription."""


class _Subscriber:
    """Feeds one paho client's messages into a :class:`Fleet` and tracks the last arrival."""

    def __init__(self, options: ClientOptions, fleet: Fleet) -> None:
        from daemon.mqtt.client_options import build_client

        self.options = options
        self.fleet = fleet
        self.subscribed = threading.Event()
        self.synced = threading.Event()
        """Set when our own end-of-burst marker came back (see :func:`collect`)."""
        self.marker_expected = threading.Event()
        """Set while the marker may still come: its subscription was granted, and its PUBACK
        has not arrived without the marker before it (see :meth:`_on_publish`)."""
        self._marker_mid: int | None = None
        self.marker_topic = f"{MARKER_PREFIX}/{secrets.token_hex(8)}"
        self.failed: list[str] = []
        self.last_message = time.monotonic()
        self.messages = 0
        self.client = build_client(options, "fleet")
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.on_publish = self._on_publish

    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        self.failed.clear()  # a live client retries: only the latest refusal counts
        if reason.is_failure:
            self.failed.append(f"broker refused the connection: {reason}")
            self.subscribed.set()
            return
        client.subscribe([(topic, 0) for topic in (*SUBSCRIPTIONS, self.marker_topic)])

    def _on_subscribe(self, client: mqtt.Client, _u: object, _mid: int, reasons: Any, _p: object) -> None:
        codes = list(reasons)
        refused = [str(r) for r in codes[: len(SUBSCRIPTIONS)] if r.is_failure]
        if refused:
            self.failed.append(f"broker refused the subscription: {', '.join(refused)}")
        if len(codes) > len(SUBSCRIPTIONS) and not codes[-1].is_failure:
            self.marker_expected.set()
        self.last_message = time.monotonic()
        self.subscribed.set()
        # Queued behind the retained burst by brokers that queue it at SUBSCRIBE (mosquitto);
        # an ACL that refuses it only costs the quiet period.
        self._marker_mid = client.publish(self.marker_topic, b"", qos=1).mid

    def _on_publish(self, _c: mqtt.Client, _u: object, mid: int, reason: Any, _p: object) -> None:
        # mosquitto routes a publish to its subscribers before it sends the PUBACK: a marker
        # not here by its PUBACK (refused, or not readable to us) will not come.
        if mid == self._marker_mid and not self.synced.is_set():
            self.marker_expected.clear()
            self.last_message = time.monotonic()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        if message.topic == self.marker_topic:
            self.synced.set()
            return
        self.fleet.receive(message.topic, bytes(message.payload))
        self.messages += 1
        self.last_message = time.monotonic()

    def connect(self) -> None:
        try:
            self.client.connect(self.options.host, self.options.port, keepalive=30)
        except (OSError, ValueError) as exc:
            raise CollectError(f"cannot connect to {self.options.host}:{self.options.port}: {exc}") from None
        self.client.loop_start()

    def connect_in_background(self) -> None:
        """Connect from paho's thread, retrying every 1..30 s until the broker answers (and
        again after every loss): nothing here fails on an unreachable broker."""
        self.client.reconnect_delay_set(1, 30)
        self.client.connect_async(self.options.host, self.options.port, keepalive=30)
        self.client.loop_start()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@dataclass(frozen=True, slots=True)
class Collected:
    """One gathering: the store, the messages received, and whether it ended on quiet
    (``complete``) or was cut by the timeout while messages were still arriving."""

    fleet: Fleet
    messages: int
    complete: bool
    seconds: float


def collect(options: ClientOptions, quiet_s: float = 0.5, timeout_s: float = 30.0) -> Collected:
    """Every table's retained topics. Raises CollectError."""
    fleet = Fleet()
    sub = _Subscriber(options, fleet)
    started = time.monotonic()
    deadline = started + timeout_s
    sub.connect()
    try:
        if not sub.subscribed.wait(max(0.0, deadline - time.monotonic())):
            raise CollectError(f"no answer from {options.host}:{options.port} within {timeout_s:g} s")
        if sub.failed:
            raise CollectError(sub.failed[0])
        # The quiet period ends it only while no marker is expected (a loaded machine can pause
        # longer than quiet_s inside a burst); the marker, or the timeout, ends it otherwise.
        while (now := time.monotonic()) < deadline and (
            sub.marker_expected.is_set() or now - sub.last_message < quiet_s
        ):
            if sub.synced.wait(min(0.05, quiet_s / 4)):
                break
        complete = sub.synced.is_set() or time.monotonic() - sub.last_message >= quiet_s
    finally:
        sub.close()
    return Collected(fleet, sub.messages, complete, time.monotonic() - started)


class LiveFleet:
    """A running subscription keeping a :class:`Fleet` current (the exporter's source)."""

    def __init__(self, options: ClientOptions) -> None:
        self.fleet = Fleet()
        self._sub = _Subscriber(options, self.fleet)

    def start(self, timeout_s: float = 10.0) -> str | None:
        """Connect and subscribe in the background; wait up to ``timeout_s`` for the first
        subscription. None once subscribed; otherwise why not yet (unreachable, refused):
        the client keeps retrying and :attr:`connected` says when it is up."""
        self._sub.connect_in_background()
        if not self._sub.subscribed.wait(timeout_s):
            options = self._sub.options
            return f"no answer from {options.host}:{options.port} within {timeout_s:g} s; retrying"
        if self._sub.failed:
            return f"{self._sub.failed[0]}; retrying"
        return None

    @property
    def connected(self) -> bool:
        return self._sub.client.is_connected()

    @property
    def messages(self) -> int:
        return self._sub.messages

    def stop(self) -> None:
        self._sub.close()
