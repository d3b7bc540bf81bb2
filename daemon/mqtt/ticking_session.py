"""A paho client on a persistent MQTT 5 session with a thread that ticks it.

What the two consumers of the event stream share: the reference consumer
(:class:`daemon.mqtt.consumer_client.ConsumerClient`, one table) and the fleet's shard member
(:class:`daemon.fleet.shards.ShardConsumer`, the tables of one shard). Each ``tick`` commits
their checkpoints and acknowledges; the session opens with clean start off and a session
expiry, so the broker queues events while the consumer is away, and closes with one last
``tick`` so nothing committed goes unacknowledged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

log = logging.getLogger(__name__)


class TickingSession:
    """``client`` on a persistent session; ``tick`` every ``interval_s`` on a thread named ``name``."""

    def __init__(self, client: mqtt.Client, tick: Callable[[], None], interval_s: float, name: str) -> None:
        self.client = client
        self._tick = tick
        self._interval_s = interval_s
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self, host: str, port: int, *, keepalive: int, session_expiry_s: int) -> None:
        """Connect (clean start off, ``session_expiry_s``), start paho's loop and the tick thread."""
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = session_expiry_s
        self.client.connect(host, port, keepalive=keepalive, clean_start=False, properties=props)
        self.client.loop_start()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the tick thread, tick once more, disconnect, stop paho's loop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._tick()
        self.client.disconnect()
        self.client.loop_stop()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._tick()
            except Exception:  # one failing tick (e.g. a locked checkpoint) must not end the thread
                log.exception("%s: tick failed", self._name)
