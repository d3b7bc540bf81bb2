"""Gathering every table's retained topics from one broker.

One MQTT client subscribes to ``baccarat/v1/+/status``, ``+/health`` and ``+/state``. The
broker answers the subscription with every retained message at once, so a snapshot of the
floor is: subscribe, wait for the SUBACK, then take messages until none arrived for
``quiet_s`` (the retained burst is over) or ``timeout_s`` passed, whichever comes first. The
collection time is bounded whatever the broker does: 500 tables (1,500 retained messages)
take well under a second on loopback; a broker that keeps sending live updates stops being
read at ``timeout_s``. :class:`LiveFleet` keeps the client running for the exporter: the
store follows every update, and paho reconnects (the broker then resends the retained set).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from daemon.fleet.tables import SUBSCRIPTIONS, Fleet

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

    from daemon.mqtt.client_options import ClientOptions


class CollectError(Exception):
    """The broker could not be reached, refused the connection or the subscription."""


class _Subscriber:
    """Feeds one paho client's messages into a :class:`Fleet` and tracks the last arrival."""

    def __init__(self, options: ClientOptions, fleet: Fleet) -> None:
        from daemon.mqtt.client_options import build_client

        self.options = options
        self.fleet = fleet
        self.subscribed = threading.Event()
        self.failed: list[str] = []
        self.last_message = time.monotonic()
        self.messages = 0
        self.client = build_client(options, "fleet")
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, reason: Any, _p: object) -> None:
        if reason.is_failure:
            self.failed.append(f"broker refused the connection: {reason}")
            self.subscribed.set()
            return
        client.subscribe([(topic, 0) for topic in SUBSCRIPTIONS])

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, reasons: Any, _p: object) -> None:
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            self.failed.append(f"broker refused the subscription: {', '.join(refused)}")
        self.last_message = time.monotonic()
        self.subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        self.fleet.receive(message.topic, bytes(message.payload))
        self.messages += 1
        self.last_message = time.monotonic()

    def connect(self) -> None:
        try:
            self.client.connect(self.options.host, self.options.port, keepalive=30)
        except (OSError, ValueError) as exc:
            raise CollectError(f"cannot connect to {self.options.host}:{self.options.port}: {exc}") from None
        self.client.loop_start()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def collect(options: ClientOptions, quiet_s: float = 0.5, timeout_s: float = 10.0) -> tuple[Fleet, int]:
    """Every table's retained topics: (the store, messages received). Raises CollectError."""
    fleet = Fleet()
    sub = _Subscriber(options, fleet)
    deadline = time.monotonic() + timeout_s
    sub.connect()
    try:
        if not sub.subscribed.wait(max(0.0, deadline - time.monotonic())):
            raise CollectError(f"no answer from {options.host}:{options.port} within {timeout_s:g} s")
        if sub.failed:
            raise CollectError(sub.failed[0])
        while (now := time.monotonic()) < deadline and now - sub.last_message < quiet_s:
            time.sleep(min(0.05, quiet_s / 4))
    finally:
        sub.close()
    return fleet, sub.messages


class LiveFleet:
    """A running subscription keeping a :class:`Fleet` current (the exporter's source)."""

    def __init__(self, options: ClientOptions) -> None:
        self.fleet = Fleet()
        self._sub = _Subscriber(options, self.fleet)

    def start(self, timeout_s: float = 10.0) -> None:
        """Connect and subscribe; raises CollectError when that fails within ``timeout_s``."""
        self._sub.connect()
        if not self._sub.subscribed.wait(timeout_s):
            self._sub.close()
            raise CollectError(f"no answer from {self._sub.options.host}:{self._sub.options.port}")
        if self._sub.failed:
            self._sub.close()
            raise CollectError(self._sub.failed[0])

    @property
    def connected(self) -> bool:
        return self._sub.client.is_connected()

    @property
    def messages(self) -> int:
        return self._sub.messages

    def stop(self) -> None:
        self._sub.close()
