"""The reference consumer on the wire: :class:`~daemon.mqtt.ordered_consumer.OrderedConsumer`
behind a paho client. What ``baccarat-edge tail --checkpoint`` runs; the tests' game server.

* A **persistent session** (MQTT 5 session expiry, clean start off; a stable client id), so the
  broker queues events while the consumer is away. It subscribes to ``events`` and the
  retained ``state`` and ``health`` (their ``last_seq`` shows events missing at the end of the
  stream, e.g. lost by a broker that crashed while the consumer was away).
* Every ``interval_s`` (its own thread): commit the checkpoint, then publish the signed
  acknowledgement of the committed position on ``ack`` (retained, QoS 1) when it moved, and a
  signed ``resend`` command for each gap :meth:`OrderedConsumer.gaps` names.

Everything received is handled under one lock; ``on_processed`` gets each event once, in
``seq`` order, on paho's thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt

from daemon.mqtt.envelope import encode
from daemon.mqtt.ordered_consumer import Fed, OrderedConsumer
from daemon.mqtt.secrets import Secret
from daemon.mqtt.ticking_session import TickingSession
from daemon.mqtt.topics import TableTopics

log = logging.getLogger(__name__)

SESSION_EXPIRY_S = 7 * 86400


class ConsumerClient:
    """Feeds one table's events to an :class:`OrderedConsumer`; acknowledges and asks for gaps."""

    def __init__(
        self,
        client: mqtt.Client,
        consumer: OrderedConsumer,
        ack_key_id: str | None,
        ack_key: Secret,
        *,
        on_processed: Callable[[dict[str, Any]], None] | None = None,
        on_fed: Callable[[Fed], None] | None = None,
        interval_s: float = 0.2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.consumer = consumer
        self.topics = TableTopics(consumer.table_id)
        self._ack_key_id = ack_key_id
        self._ack_key = ack_key
        self._on_processed = on_processed
        self._on_fed = on_fed
        self._clock = clock
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.acked_seq = 0
        """The last ``seq`` acknowledged to the table."""
        self.resends_asked: list[tuple[int, int]] = []
        self._acked: tuple[int, str | None] = (0, None)  # (seq, event_id) last acknowledged
        self._session = TickingSession(client, self.tick, interval_s, "consumer-ack")
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = self._on_disconnect

    def connect(self, host: str, port: int) -> None:
        """Connect with a persistent session and start paho's loop and the ack thread."""
        self.client.reconnect_delay_set(1, 2)
        self._session.open(host, port, keepalive=30, session_expiry_s=SESSION_EXPIRY_S)

    def stop(self) -> None:
        """Commit, acknowledge once more, disconnect."""
        self._session.close()

    def tick(self) -> None:
        """Commit; publish the acknowledgement if it moved and a resend for each open gap."""
        now = self._clock()
        with self.lock:
            self.consumer.commit()
            position = self.consumer.checkpoint.committed
            moved = (position.seq, position.event_id) != self._acked  # a rollback moves it back
            ack = self.consumer.ack_message(self._ack_key_id, self._ack_key, now) if moved else None
            gaps = self.consumer.gaps(now)
        if not self.client.is_connected():
            return
        if ack is not None:
            self.client.publish(self.topics.ack, encode(ack), qos=1, retain=True)
            self._acked = (position.seq, position.event_id)
            self.acked_seq = position.seq
        for first, last in gaps:
            command = self.consumer.resend_command(first, last, self._ack_key_id, self._ack_key, now)
            log.info("asking table %s for seq %d..%d", self.consumer.table_id, first, last)
            self.resends_asked.append((first, last))
            self.client.publish(self.topics.cmd, encode(command), qos=1)

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            log.error("broker refused the consumer: %s", reason)
            return
        client.subscribe([(self.topics.events, 1), (self.topics.state, 1), (self.topics.health, 1)])
        self._acked = (0, None)  # acknowledge again on every connection (the broker may have lost it)

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
        self.subscribed.set()

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self.subscribed.clear()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        now = self._clock()
        if message.topic in (self.topics.state, self.topics.health):
            last_seq = _last_seq(bytes(message.payload))
            if last_seq is not None:
                with self.lock:
                    self.consumer.note_last_seq(last_seq, now)
            return
        if message.topic != self.topics.events:
            return
        with self.lock:
            fed = self.consumer.feed(bytes(message.payload), now)
            if self._on_fed is not None:
                self._on_fed(fed)
            if self._on_processed is not None:
                for envelope in fed.processed:
                    self._on_processed(envelope)


def _last_seq(payload: bytes) -> int | None:
    """``last_seq`` of a ``state`` or ``health`` payload (the signature is not checked: it only makes the
    consumer ask for events sooner; what comes back is verified)."""
    try:
        value = json.loads(payload).get("last_seq")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
