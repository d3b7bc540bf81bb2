"""The broker connection: the paho client, the network thread, and paho's callbacks.

The network thread (ours, not paho's ``loop_start``) connects with our own exponential
backoff with jitter (:class:`common.backoff.Backoff`), then runs ``client.loop()`` until the
connection drops, and starts over until :meth:`Connection.stop`. paho calls its callbacks
on this thread, some of them while holding its own mutexes (``on_publish`` under its
message mutex), so the callbacks take no lock of ours: they append to a deque, set a
``threading.Event`` or call paho itself. PUBACKs are queued for the drain thread
(:meth:`Connection.take_acks`); ``cmd`` messages are queued and handed to ``on_commands`` by
the network thread after each ``loop()`` call, when paho holds none of its locks (that is
where they were always served: a command never waits behind the drain).

Two things happen inside ``on_connect`` because paho resends the unacknowledged messages
of the previous connection as soon as ``on_connect`` returns: ``status`` = online (retained)
and the ``cmd`` subscription are queued there, so they come before any event on the wire.
The retained state follows from the drain thread (``on_connected``), then the drain resumes.

All socket writes happen on the network thread. paho's ``publish()`` otherwise writes to
the socket itself from the calling thread whenever no paho-owned thread runs, racing the
network thread's ``loop()``: both take packets off paho's queue and can put them on the wire
out of order (the crash test caught seq N+1 arriving before N). paho skips that direct write
when an ``on_socket_register_write`` callback is set (its public hook for external event
loops); ours has nothing to do, because ``loop()`` selects for writing whenever paho has
queued packets and paho's queue wakes it.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from common.backoff import Backoff
from daemon.mqtt.counters import Counters
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import BrokerSettings, Protocol
from daemon.mqtt.tls import tls_context
from daemon.mqtt.topics import TableTopics
from daemon.mqtt.window import Ack

log = logging.getLogger(__name__)

_T = TypeVar("_T")

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class CommandMessage:
    """A message received on the ``cmd`` topic, with its MQTT 5 request/response properties."""

    payload: bytes
    response_topic: str | None
    correlation: bytes | None


class Connection:
    """One table's MQTT connection. ``on_connected`` is called (network thread, inside
    paho's callback) after each successful connect; ``wake`` whenever a PUBACK was queued or
    the connection came up; ``on_commands`` (network thread, outside paho's callbacks) with
    the ``cmd`` messages received."""

    def __init__(
        self,
        settings: BrokerSettings,
        table_id: str,
        events_key: Secret | None,
        counters: Counters,
        *,
        clock: Clock,
        wake: Callable[[], None],
        on_connected: Callable[[], None],
        on_commands: Callable[[list[CommandMessage]], None],
        identity: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.table_id = table_id
        self.topics = TableTopics(table_id)
        self._events_key = events_key
        self._counters = counters
        self._clock = clock
        self._wake = wake
        self._on_connected = on_connected
        self._on_commands = on_commands
        self._identity = dict(identity or {})
        """``version`` and ``config_digest`` carried by every status (the fleet view's columns)."""
        self._password: Secret | None = (
            settings.auth.password.load() if settings.auth and settings.auth.password else None
        )
        self._backoff = Backoff(settings.delivery.backoff_initial_s, settings.delivery.backoff_max_s)
        self.stopping = threading.Event()
        """Set by :meth:`stop`: the network thread ends and never reconnects."""
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        """Set once the broker acknowledged the ``cmd`` subscription (SUBACK) on the current
        connection; cleared on disconnect. Commands sent before it may be lost."""
        self.last_error: str | None = None
        self.max_packet_size: int | None = None
        """The broker's Maximum Packet Size (MQTT 5 CONNACK), None when it gave none."""
        self._refusal: str | None = None
        self._cmd_sub_mid: int | None = None
        self._ack_sub_mid: int | None = None
        self.ack_subscribed = threading.Event()
        """Set once the broker acknowledged the ``ack`` subscription (server acknowledgement on)."""
        self._server_acks: deque[bytes] = deque()
        self._offline_mid: int | None = None
        self._offline_acked = threading.Event()
        self._acks: deque[Ack] = deque()
        self._messages: deque[CommandMessage] = deque()
        self._thread: threading.Thread | None = None
        self.client = self._build_client()
        """The paho client. Publish through :meth:`publish`; never call ``loop*`` on it."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> threading.Thread:
        """Start the network thread (it connects in the background, with backoff)."""
        self.client.connect_async(
            self.settings.host,
            self.settings.effective_port,
            keepalive=self.settings.keepalive_s,
            clean_start=True
            if self.settings.protocol is Protocol.MQTT5
            else mqtt.MQTT_CLEAN_START_FIRST_ONLY,
        )
        self._thread = threading.Thread(
            target=self._network_loop, name=f"mqtt-network-{self.table_id}", daemon=True
        )
        self._thread.start()
        return self._thread

    def say_offline(self, timeout: float) -> None:
        """Publish the retained ``status`` = offline and wait up to ``timeout`` for its PUBACK."""
        info = self.client.publish(
            self.topics.status,
            encode(self._status_payload("offline")),
            qos=1,
            retain=True,
            properties=self.json_properties(),
        )
        self._offline_mid = info.mid
        self._offline_acked.wait(max(0.0, timeout))

    def stop(self) -> None:
        """End the network thread after it wrote what paho still has queued; disconnect."""
        self.stopping.set()
        self.client.disconnect()

    # -- publishing (any thread) ------------------------------------------------------------

    def publish(
        self, topic: str, payload: bytes, *, retain: bool = False, properties: Properties | None = None
    ) -> int:
        """Queue a QoS 1 message (the network thread writes it); returns its paho ``mid``.
        ``properties``: the MQTT 5 properties; JSON content properties when None."""
        props = properties if properties is not None else self.json_properties()
        return self.client.publish(topic, payload, qos=1, retain=retain, properties=props).mid

    def json_properties(self, packet_type: int = PacketTypes.PUBLISH) -> Properties | None:
        """Fresh MQTT 5 properties of a JSON payload (None with MQTT 3.1.1)."""
        if self.settings.protocol is not Protocol.MQTT5:
            return None
        props = Properties(packet_type)  # type: ignore[no-untyped-call]
        props.ContentType = "application/json"
        props.PayloadFormatIndicator = 1
        return props

    # -- what the callbacks queued ---------------------------------------------------------

    def take_acks(self) -> list[Ack]:
        """The PUBACKs received since the last call, in arrival order."""
        return _drain(self._acks)

    def take_server_acks(self) -> list[bytes]:
        """The game server's ``ack`` payloads received since the last call."""
        return _drain(self._server_acks)

    # -- client set-up ----------------------------------------------------------------------

    def _build_client(self) -> mqtt.Client:
        s = self.settings
        protocol = mqtt.MQTTv5 if s.protocol is Protocol.MQTT5 else mqtt.MQTTv311
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=s.effective_client_id(self.table_id),
            protocol=protocol,
            clean_session=True if protocol == mqtt.MQTTv311 else None,
            reconnect_on_failure=False,
        )
        # Room for status/state/health/replies beside the event window, so paho never queues
        # an event behind them.
        client.max_inflight_messages_set(s.delivery.inflight_window + 16)
        client.will_set(
            self.topics.status,
            encode(self._status_payload("offline")),
            qos=1,
            retain=True,
            properties=self.json_properties(PacketTypes.WILLMESSAGE),
        )
        if s.tls.enabled:
            client.tls_set_context(tls_context(s.tls))
        if s.auth is not None:
            client.username_pw_set(s.auth.username, self._password.reveal_text() if self._password else None)
        client.on_socket_register_write = _written_by_the_network_thread  # see the module docstring
        # A failing callback of ours is logged by paho instead of unwinding its loop.
        client.suppress_exceptions = True
        client.enable_logger(logging.getLogger("baccarat_edge.paho"))
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    def _status_payload(self, status: str) -> dict[str, Any]:
        return signed_message(
            {"table_id": self.table_id, "status": status, "ts": self._clock(), **self._identity},
            self._events_key,
        )

    # -- network thread ---------------------------------------------------------------------

    def _network_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                rc = self.client.reconnect()
            except (OSError, ssl.SSLError, ValueError) as exc:
                self._connection_failed(
                    f"connect to {self.settings.host}:{self.settings.effective_port}: {exc}"
                )
                continue
            if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                self._connection_failed(f"connect failed: {mqtt.error_string(rc)}")
                continue
            problem: str | None = None
            try:
                while not self.stopping.is_set() or self.client.want_write():
                    rc = self.client.loop(timeout=0.5)
                    self._serve_commands()
                    if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                        problem = f"connection lost: {mqtt.error_string(rc)}"
                        break
            except Exception as exc:
                # Never let one bad packet or callback end delivery: drop the connection and
                # reconnect (paho resends what was in flight).
                log.exception("MQTT network loop failed")
                problem = f"network loop failed: {exc}"
                with contextlib.suppress(Exception):
                    self.client.disconnect()
            self.connected.clear()
            if self.stopping.is_set():
                return
            if self._refusal is not None:
                problem = self._refusal  # say why (e.g. bad credentials), not "connection lost"
            if problem is not None:
                self._connection_failed(problem)

    def _serve_commands(self) -> None:
        messages = _drain(self._messages)  # possibly none: the channel also has timed work
        try:
            self._on_commands(messages)
        except Exception:  # a command must never cost the connection
            log.exception("command handling failed")

    def _connection_failed(self, message: str) -> None:
        self.connected.clear()
        self.subscribed.clear()
        self.ack_subscribed.clear()
        self.last_error = message
        self._counters.connection_failures += 1
        delay = self._backoff.next_delay()
        log.warning("broker unavailable (%s); retrying in %.1fs", message, delay)
        self.stopping.wait(delay)

    # -- paho callbacks (network thread) ----------------------------------------------------

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.ConnectFlags,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if reason_code.is_failure:
            self._refusal = f"broker refused the connection: {reason_text(reason_code)}"
            log.error("%s", self._refusal)
            client.disconnect()
            return
        self._refusal = None
        # The broker's limit (MQTT 5 CONNACK): paho does not check it, and the broker answers
        # an oversized PUBLISH by dropping the connection, so it is checked before sending.
        limit = getattr(properties, "MaximumPacketSize", None) if properties is not None else None
        self.max_packet_size = limit if isinstance(limit, int) and limit > 0 else None
        self._backoff.reset()
        self._counters.connects += 1
        self.last_error = None
        client.publish(
            self.topics.status,
            encode(self._status_payload("online")),
            qos=1,
            retain=True,
            properties=self.json_properties(),
        )
        _, self._cmd_sub_mid = client.subscribe(self.topics.cmd, qos=1)
        if self.settings.delivery.server_ack.enabled:
            # Retained: the server's latest acknowledgement arrives at once on every connect.
            _, self._ack_sub_mid = client.subscribe(self.topics.ack, qos=1)
        self._on_connected()
        self.connected.set()
        self._wake()

    def _on_subscribe(
        self,
        client: mqtt.Client,
        userdata: Any,
        mid: int,
        reason_codes: list[ReasonCode],
        properties: Properties | None,
    ) -> None:
        if mid not in (self._cmd_sub_mid, self._ack_sub_mid):
            return
        name = "cmd" if mid == self._cmd_sub_mid else "ack"
        if any(code.is_failure for code in reason_codes):
            self.last_error = f"broker refused the {name} subscription: " + ", ".join(
                reason_text(code) for code in reason_codes
            )
            log.error("%s", self.last_error)
            return
        (self.subscribed if name == "cmd" else self.ack_subscribed).set()

    def _on_disconnect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.DisconnectFlags,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        self.connected.clear()
        self.subscribed.clear()
        self.ack_subscribed.clear()
        if not self.stopping.is_set():
            self.last_error = f"disconnected: {reason_text(reason_code)}"

    def _on_publish(
        self,
        client: mqtt.Client,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if mid == self._offline_mid:
            self._offline_acked.set()
        failed = reason_code.is_failure
        reason = reason_text(reason_code) if failed else ""  # named only when someone reads it
        self._acks.append(Ack(mid, reason_code.value, failed, reason))
        self._wake()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        if message.topic == self.topics.ack:
            self._server_acks.append(bytes(message.payload))
            self._wake()
            return
        if message.topic != self.topics.cmd:
            return
        props = message.properties
        response_topic = getattr(props, "ResponseTopic", None) if props is not None else None
        correlation = getattr(props, "CorrelationData", None) if props is not None else None
        self._messages.append(CommandMessage(bytes(message.payload), response_topic, correlation))


def reason_text(reason: ReasonCode | int) -> str:
    """A reason code as ``Name (0xNN)``."""
    if isinstance(reason, ReasonCode):
        return f"{reason.getName()} (0x{reason.value:02x})"
    return f"code {reason}"


def _drain(queue: deque[_T]) -> list[_T]:
    items: list[_T] = []
    while queue:
        items.append(queue.popleft())
    return items


def _written_by_the_network_thread(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """paho's external-loop write hook: its presence keeps ``publish()`` off the socket."""
