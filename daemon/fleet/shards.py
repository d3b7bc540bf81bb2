"""A consumer group on the central broker that keeps each table's events in order.

MQTT 5 shared subscriptions (``$share/<group>/<filter>``) spread a group's messages over its
members; mosquitto picks the member per message (round robin), so two members of one group
would each get every other event of a table. Order per table is kept by sharding instead:
every table belongs to exactly one shard (:func:`shard_of`, a stable hash of its id), each
shard is one shared-subscription group (``baccarat-shard-<k>-of-<n>``) naming its tables'
``events`` topics, and one consumer instance is active per group. The group name makes the
shard's subscription one identity on the broker: a replacement instance joins the same
group with the same persistent session, so nothing queued for the shard is delivered twice
to two live consumers nor lost between them. Scale by adding shards, not members.

:class:`ShardConsumer` is that member: a persistent MQTT 5 session (clean start off, session
expiry ``session_expiry_s``), QoS 1, and one :class:`~daemon.mqtt.consumer.EventConsumer` per
table (signature, dedup by ``event_id``, ``seq`` gaps). ``on_event`` receives every new event
in arrival order; arrival order is ``seq`` order unless a gap was filled late.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from daemon.mqtt.consumer import EventConsumer, Received, Verdict
from daemon.mqtt.secrets import Secret
from daemon.mqtt.topics import PREFIX, TableTopics

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

SHARE_PREFIX = "$share"


def shard_of(table_id: str, shards: int) -> int:
    """The shard (0..shards-1) of a table: sha256 of its id, stable across processes and hosts."""
    if shards < 1:
        raise ValueError("shards must be at least 1")
    return int.from_bytes(hashlib.sha256(table_id.encode("utf-8")).digest()[:8], "big") % shards


def group_name(shard: int, shards: int) -> str:
    """The shared-subscription group of one shard."""
    return f"baccarat-shard-{shard}-of-{shards}"


def shard_filters(tables: Iterable[str], shard: int, shards: int) -> list[str]:
    """The shared-subscription filters of one shard: one per table of the shard."""
    group = group_name(shard, shards)
    return [
        f"{SHARE_PREFIX}/{group}/{TableTopics(t).events}"
        for t in sorted(tables)
        if shard_of(t, shards) == shard
    ]


EventHandler = Callable[[str, Received], None]


class ShardConsumer:
    """One shard's member of the consumer group (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        tables: Iterable[str],
        shard: int,
        shards: int,
        keys: Mapping[str, Secret] | None = None,
        on_event: EventHandler | None = None,
        session_expiry_s: int = 86_400,
        client_id: str | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.host, self.port = host, port
        self.filters = shard_filters(tables, shard, shards)
        self.consumers: dict[str, EventConsumer] = {}
        for topic in self.filters:
            table = topic.split("/")[-2]
            key = (keys or {}).get(table)
            self.consumers[table] = EventConsumer(table, key=key, require_signature=keys is not None)
        self.on_event = on_event
        self.session_expiry_s = session_expiry_s
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.received = 0
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"baccarat-consumer-{group_name(shard, shards)}",
            protocol=mqtt.MQTTv5,
        )
        self.client.max_inflight_messages_set(100)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    def start(self) -> None:
        """Connect (persistent session) and subscribe; paho reconnects after a broker restart."""
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = self.session_expiry_s
        self.client.connect(self.host, self.port, keepalive=15, clean_start=False, properties=props)
        self.client.loop_start()

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client: mqtt.Client, _u: object, flags: Any, reason: Any, _p: object) -> None:
        if reason.is_failure or not self.filters:
            return
        # Subscribing again on a resumed session is harmless (same filters, same QoS).
        client.subscribe([(topic, 1) for topic in self.filters])

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, _r: Any, _p: object) -> None:
        self.subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        parts = message.topic.split("/")
        table = parts[2] if len(parts) == 4 and message.topic.startswith(PREFIX + "/") else None
        with self.lock:
            self.received += 1
            consumer = self.consumers.get(table) if table is not None else None
            if consumer is None:
                return  # not a table of this shard: nothing to verify it with
            result = consumer.feed(bytes(message.payload))
        if self.on_event is not None and result.verdict is not Verdict.DUPLICATE:
            assert table is not None
            self.on_event(table, result)
