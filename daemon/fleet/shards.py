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

:class:`ShardConsumer` is that member, the reference consumer
(:class:`~daemon.mqtt.ordered_consumer.OrderedConsumer`, as :mod:`daemon.mqtt.consumer_client`
runs it for one table) for every table of a shard over one connection: a persistent MQTT 5
session (clean start off, session expiry), QoS 1, one durable checkpoint per table, every
event in ``seq`` order, the signed acknowledgement of each table's committed position on its
``ack`` topic and a signed ``resend`` for each gap (``interval_s``). It also reads the
shard's retained ``state`` and ``health`` (their ``last_seq`` reveals events missing at the
end of a stream, e.g. lost by a broker that crashed).

How the application gets each event, and what a crash of the member at any instant does:

* ``on_event(table, envelope, db)`` — **exactly once**. Called inside the table checkpoint's
  open SQLite transaction (``db``, :attr:`~daemon.mqtt.checkpoint.Checkpoint.transaction`):
  whatever the application writes on ``db`` commits together with the checkpoint's position
  (every ``interval_s``), or not at all. A member killed before that commit loses the event's
  effect and its position together; nothing was acknowledged past the committed position, so
  the table (or the broker) sends the event again and it is applied then, once. The
  application must not commit ``db`` itself (a callback that ends the transaction stops the
  member) nor write anywhere else in this callback.
* ``on_processed(table, envelope)`` — **at least once**, for an application that keeps its
  own store. After a crash the events processed since the last commit come again, with the
  same ``table``, ``seq`` and ``event_id``, in order. Make the effect idempotent on
  ``(table, event_id)`` (not ``seq``: after a table's journal rollback, new events come at
  seqs already seen) and make it durable in ``before_commit()``, which runs before the
  checkpoints commit: the checkpoint then never gets ahead of the application, and the
  application skips what it already holds (:mod:`daemon.fleet.ledger` does exactly that for
  ``baccarat-edge consume``).

A callback (or ``before_commit``) that raises stops the member's commits for good
(:attr:`ShardConsumer.failure`): its effect may be half written, so no position after it
may become durable; restart the member, it resumes from the last commit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.envelope import encode
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.secrets import Secret
from daemon.mqtt.topics import PREFIX, TableTopics

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

log = logging.getLogger(__name__)

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


ProcessedHandler = Callable[[str, dict[str, Any]], None]
"""``(table, envelope)``: at least once, in ``seq`` order per table."""
EventHandler = Callable[[str, dict[str, Any], sqlite3.Connection], None]
"""``(table, envelope, db)``: exactly once, inside the table checkpoint's transaction."""


class ShardConsumer:
    """One shard's member of the consumer group (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        tables: Iterable[str],
        shard: int,
        shards: int,
        keys: Mapping[str, Secret],
        checkpoint_dir: Path,
        ack_key_id: str | None,
        ack_key: Secret,
        on_processed: ProcessedHandler | None = None,
        interval_s: float = 0.2,
        session_expiry_s: int = 86_400,
        client_id: str | None = None,
        clock: Callable[[], float] = time.time,
        *,
        on_event: EventHandler | None = None,
        before_commit: Callable[[], None] | None = None,
        client: mqtt.Client | None = None,
    ) -> None:
        """``client``: a paho MQTT 5 client with TLS and login already set (e.g.
        :func:`daemon.mqtt.client_options.build_client`); by default a plain one with
        ``client_id`` (``baccarat-consumer-<group>``)."""
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from daemon.mqtt.ticking_session import TickingSession

        self.host, self.port = host, port
        self.filters = shard_filters(tables, shard, shards)
        self.consumers: dict[str, OrderedConsumer] = {}
        for topic in self.filters:
            table = topic.split("/")[-2]
            checkpoint = Checkpoint(checkpoint_dir / f"{table}.sqlite3", table)
            self.consumers[table] = OrderedConsumer(table, checkpoint, keys.get(table))
        self.on_processed = on_processed
        self.on_event = on_event
        self.before_commit = before_commit
        self.failure: str | None = None
        """Why the member stopped committing (a callback raised); None while it runs."""
        self.session_expiry_s = session_expiry_s
        self._ack_key_id, self._ack_key = ack_key_id, ack_key
        self._clock = clock
        self._acked: dict[str, tuple[int, str | None]] = {}
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.resends_asked: list[tuple[str, int, int]] = []
        self.client = client or mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"baccarat-consumer-{group_name(shard, shards)}",
            protocol=mqtt.MQTTv5,
        )
        self.client.max_inflight_messages_set(100)
        self.client.reconnect_delay_set(1, 2)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self._session = TickingSession(self.client, self.tick, interval_s, "shard-ack")

    def start(self) -> None:
        """Connect (persistent session), subscribe, start acknowledging; paho reconnects."""
        self._session.open(self.host, self.port, keepalive=15, session_expiry_s=self.session_expiry_s)

    def stop(self) -> None:
        """Commit and acknowledge once more, disconnect, close the checkpoints. After a
        failed callback nothing is committed: the process should end, which rolls the open
        transactions back."""
        self._session.close()
        if self.failure is not None:
            return
        for consumer in self.consumers.values():
            consumer.checkpoint.close()

    def tick(self) -> None:
        """``before_commit``, then per table: commit; publish the acknowledgement if it moved
        and a resend per gap. Nothing is committed once a callback failed."""
        now = self._clock()
        outgoing: list[tuple[str, dict[str, Any], bool]] = []
        with self.lock:
            if self.failure is not None:
                return
            if self.before_commit is not None:
                try:
                    self.before_commit()
                except Exception as exc:  # the application could not make its effects durable
                    self.failure = f"the application's before_commit failed: {exc!r}"
                    log.exception("shard member stops committing: %s", self.failure)
                    return
            for table, consumer in self.consumers.items():
                consumer.commit()
                position = consumer.checkpoint.committed
                if (position.seq, position.event_id) != self._acked.get(table, (0, None)):
                    ack = consumer.ack_message(self._ack_key_id, self._ack_key, now)
                    if ack is not None:
                        outgoing.append((TableTopics(table).ack, ack, True))
                        self._acked[table] = (position.seq, position.event_id)
                for first, last in consumer.gaps(now):
                    command = consumer.resend_command(first, last, self._ack_key_id, self._ack_key, now)
                    outgoing.append((TableTopics(table).cmd, command, False))
                    self.resends_asked.append((table, first, last))
        if not self.client.is_connected():
            with self.lock:
                self._acked.clear()  # acknowledge again once connected
            return
        for topic, message, retain in outgoing:
            self.client.publish(topic, encode(message), qos=1, retain=retain)

    def _on_connect(self, client: mqtt.Client, _u: object, flags: Any, reason: Any, _p: object) -> None:
        if reason.is_failure or not self.filters:
            return
        tables = sorted(self.consumers)
        retained = [(f"{PREFIX}/{t}/{kind}", 1) for t in tables for kind in ("state", "health")]
        # Subscribing again on a resumed session is harmless (same filters, same QoS).
        client.subscribe([(topic, 1) for topic in self.filters] + retained)
        with self.lock:
            self._acked.clear()  # acknowledge again on every connection (the broker may have lost it)

    def _on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, _r: Any, _p: object) -> None:
        self.subscribed.set()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        parts = message.topic.split("/")
        if len(parts) != 4 or not message.topic.startswith(PREFIX + "/"):
            return
        table, kind = parts[2], parts[3]
        now = self._clock()
        with self.lock:
            consumer = self.consumers.get(table)
            if consumer is None:
                return  # not a table of this shard: nothing to verify it with
            if kind in ("state", "health"):
                last_seq = _last_seq(bytes(message.payload))
                if last_seq is not None:
                    consumer.note_last_seq(last_seq, now)
                return
            if self.failure is not None:
                return  # nothing more is processed: the position must stay where it failed
            fed = consumer.feed(bytes(message.payload), now)
            try:
                for envelope in fed.processed:
                    if self.on_event is not None:
                        db = consumer.checkpoint.transaction
                        self.on_event(table, envelope, db)
                        if not db.in_transaction:  # its effect went out without the position
                            raise RuntimeError("on_event ended the checkpoint's transaction")
                    if self.on_processed is not None:
                        self.on_processed(table, envelope)
            except Exception as exc:  # the application's: its effect may be half written
                self.failure = f"{table}: the application's callback failed: {exc!r}"
                log.exception("shard member stops committing: %s", self.failure)


def _last_seq(payload: bytes) -> int | None:
    """``last_seq`` of a ``state`` or ``health`` payload. Its signature is not checked, as in
    :mod:`daemon.mqtt.consumer_client`: it only makes the consumer ask for events sooner, and
    what comes back is verified."""
    try:
        value = json.loads(payload).get("last_seq")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
