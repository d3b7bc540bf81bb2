"""The publisher: drains the journal to the broker in ``seq`` order, QoS 1, and runs the
command channel.

Threads
-------
* **network** (ours, not paho's ``loop_start``): connects with our own exponential backoff
  with jitter, then runs ``client.loop()``; paho callbacks run here.
* **drain**: the only owner of the in-flight map (paho ``mid`` -> ``seq``). It publishes
  undelivered events while fewer than ``inflight_window`` are unacknowledged, turns PUBACKs
  into :meth:`Journal.mark_delivered`, dead-letters permanent broker rejections, retries
  transient ones with backoff, publishes state and health, compacts the journal and
  raises/clears the journal-full and delivery-failing alerts.

Callbacks only append to a deque and set an event, so no lock of ours is ever taken while
paho holds its own (paho calls ``on_publish`` under its message mutex).

Delivery guarantees
-------------------
An event is marked delivered only when its PUBACK arrives. While the connection is down,
paho keeps the (at most ``inflight_window``) unacknowledged events and resends them first,
in order, after the reconnect; everything else stays in the journal until there is room.
After a restart the drain starts again at the first undelivered event. Delivery is
therefore at-least-once, in ``seq`` order; consumers deduplicate by ``event_id``.

A PUBACK with a failure reason code is either **permanent** (:data:`PERMANENT_REASON_CODES`:
not authorized, topic name invalid, payload format invalid, packet too large): the event is
dead-lettered (kept in the journal for audit, an ``mqtt_dead_letter`` alert names it); or
**transient** (any other failure, e.g. 0x80 unspecified, 0x83 implementation specific, 0x91
packet id in use, 0x97 quota exceeded): the event stays undelivered and is published again
after a backoff, at most ``delivery.refused_retries`` times; refused once more after that, it
is dead-lettered like a permanent refusal. An ``mqtt_delivery_failing`` alert is open from the
first transient failure until an acknowledgement arrives with no refused event waiting.

While a refused event waits for its retry, the window falls to that one event: refused events
go out again one at a time, lowest ``seq`` first, each only after the previous one was
acknowledged or dead-lettered, and nothing newer is published until none is left. The broker
therefore receives events in ``seq`` order, except the (at most ``inflight_window - 1``) newer
events that were already in flight when the first refusal arrived: those may be acknowledged
before the refused one, a gap its retry fills.

On every (re)connect, in this order: ``status`` = online (retained), subscribe to ``cmd``,
republish the retained ``state``, then resume draining. :attr:`Publisher.subscribed` is set
when the broker acknowledged the ``cmd`` subscription. The retained ``state`` is published
at most every ``delivery.state_interval_s``, at once after a round or shoe boundary event was
published, on every connect, and by :meth:`Publisher.stop` before ``status`` = offline (the
Last Will only covers unclean exits).
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from common.backoff import Backoff
from common.inputs import SupervisorCommand
from daemon.engine.events import ROUND_BOUNDARY_KINDS
from daemon.journal.records import ORIGIN_DELIVERY, DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.commands import CommandVerifier, Refusal, Verified
from daemon.mqtt.envelope import encode, event_payload, signed_message
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import BrokerSettings, Protocol
from daemon.mqtt.tls import tls_context
from daemon.mqtt.topics import TableTopics

log = logging.getLogger(__name__)

ReplyFn = Callable[..., None]
"""Answers one command, from any thread, once. Either ``reply(accepted, reason=None)`` or
``reply({"accepted": bool, "reason": str | None, "event_id": str, "seq": int})`` where
``event_id``/``seq`` name the journaled ``command_accepted``/``command_refused`` event."""

CommandHandler = Callable[[SupervisorCommand, ReplyFn], None]
"""Receives a verified engine command and the function to answer it with. Must return
quickly (hand the command to the engine's queue); reply when the engine has decided."""

DEAD_LETTER_ALERT = "mqtt_dead_letter"
DELIVERY_FAILING_ALERT = "mqtt_delivery_failing"
JOURNAL_FULL_ALERT = "journal_full"
ALERT_KIND_PREFIX = "alert"
COMMAND_REFUSED_KIND = "command_refused"

PERMANENT_REASON_CODES: frozenset[int] = frozenset({0x87, 0x90, 0x95, 0x99})
"""PUBACK reason codes after which publishing the same event again cannot succeed: not
authorized (ACL), topic name invalid, packet too large, payload format invalid. Every other
failure code is retried."""


@dataclass
class Counters:
    """Monotonic counters reported in ``health``."""

    published: int = 0
    acknowledged: int = 0
    dead_lettered: int = 0
    connects: int = 0
    connection_failures: int = 0
    delivery_retries: int = 0
    commands_accepted: int = 0
    commands_refused: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class _Ack:
    mid: int
    code: int
    failed: bool
    reason: str


def _reason_text(reason: ReasonCode | int) -> str:
    if isinstance(reason, ReasonCode):
        return f"{reason.getName()} (0x{reason.value:02x})"
    return f"code {reason}"


class Publisher:
    """Publishes one table's journal and serves its command channel."""

    def __init__(
        self,
        settings: BrokerSettings,
        table_id: str,
        journal: Journal,
        on_command: CommandHandler | None = None,
        snapshot: Callable[[], dict[str, Any] | None] | None = None,
        health_extra: Callable[[], dict[str, Any]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.table_id = table_id
        self.topics = TableTopics(table_id)
        self.journal = journal
        self.on_command = on_command
        self._health_extra = health_extra
        self._snapshot = snapshot
        self._clock = clock
        self.counters = Counters()
        self._last_error: str | None = None
        signing = settings.signing
        self._events_key: Secret | None = signing.events_key.load() if signing.events_key else None
        command_key = signing.command_key.load() if signing.command_key else None
        self._verifier = CommandVerifier(table_id, command_key, signing, journal, clock)
        self._password: Secret | None = (
            settings.auth.password.load() if settings.auth and settings.auth.password else None
        )
        self._backoff = Backoff(settings.delivery.backoff_initial_s, settings.delivery.backoff_max_s)
        self._retry_backoff = Backoff(settings.delivery.backoff_initial_s, settings.delivery.backoff_max_s)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._connected = threading.Event()
        self.subscribed = threading.Event()
        """Set once the broker acknowledged the ``cmd`` subscription (SUBACK) on the current
        connection; cleared on disconnect. Commands sent before it may be lost."""
        self._cmd_sub_mid: int | None = None
        self._acks: deque[_Ack] = deque()
        self._inflight: dict[int, JournaledEvent] = {}
        self._sent_through = 0
        # Transiently refused events (seq -> event), published again once _retry_at passed,
        # and how many times each was refused so far (bounded by delivery.refused_retries).
        self._retry: dict[int, JournaledEvent] = {}
        self._refusals: dict[int, int] = {}
        self._retry_at = 0.0
        self._retried_in_flight: set[int] = set()
        self._failing_alert: str | None = None
        self._journal_full_alert: str | None = None
        # Drain thread only: the last snapshot object published, and when the next may go.
        self._state_due = threading.Event()
        self._last_state: object = None
        self._next_state_at = 0.0
        self._offline_mid: int | None = None
        self._refusal: str | None = None
        self._broker_max_packet: int | None = None
        self._event_topic_bytes = len(self.topics.events.encode("utf-8"))
        self._offline_acked = threading.Event()
        self._progress: float | None = None
        self._threads: list[threading.Thread] = []
        self._client = self._build_client()
        self._event_props = self._event_properties()
        self._event_props_bytes = len(self._event_props.pack()) if self._event_props is not None else 0

    # -- public runtime contract ------------------------------------------------------------

    def start(self) -> None:
        """Start the network and drain threads; returns at once (connection happens in the
        background, with backoff, for as long as it takes)."""
        if self._threads:
            return
        self._client.connect_async(
            self.settings.host,
            self.settings.effective_port,
            keepalive=self.settings.keepalive_s,
            clean_start=True
            if self.settings.protocol is Protocol.MQTT5
            else mqtt.MQTT_CLEAN_START_FIRST_ONLY,
        )
        for name, target in (("mqtt-network", self._network_loop), ("mqtt-drain", self._drain_loop)):
            thread = threading.Thread(target=target, name=f"{name}-{self.table_id}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def notify(self) -> None:
        """New rows were appended to the journal: drain them now."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Publish the latest state and ``offline`` (both retained), flush delivery marks and
        disconnect cleanly."""
        if not self._threads:
            return
        deadline = time.monotonic() + timeout
        if self._connected.is_set():
            # The final snapshot (the drain thread may publish one at the same moment: a
            # duplicate retained message is harmless). Never let it prevent the clean stop.
            try:
                self._publish_state(force=True)
            except Exception:
                log.exception("final state could not be published")
            info = self._client.publish(
                self.topics.status,
                encode(self._status_payload("offline")),
                qos=1,
                retain=True,
                properties=self._json_properties(),
            )
            self._offline_mid = info.mid
            self._offline_acked.wait(max(0.0, deadline - time.monotonic()))
        self._stopping.set()
        self._wake.set()
        self._client.disconnect()
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        self._threads.clear()
        self._process_acks()

    def health(self) -> dict[str, Any]:
        """Connection, queue depth, oldest undelivered age, counters, journal capacity."""
        now = self._clock()
        capacity = self.journal.capacity()
        oldest_age = None if capacity.oldest_undelivered_at is None else now - capacity.oldest_undelivered_at
        report: dict[str, Any] = {
            "table_id": self.table_id,
            "ts": now,
            "running": self.running,
            "connected": self._connected.is_set(),
            "last_error": self._last_error,
            "queue_depth": capacity.undelivered,
            "inflight": len(self._inflight),
            "oldest_undelivered_age_s": oldest_age,
            "last_seq": self.journal.last_seq(),
            "counters": self.counters.as_dict(),
            "journal": {
                "size_bytes": capacity.size_bytes,
                "max_bytes": capacity.max_bytes,
                "full": capacity.full,
                "reason": capacity.reason,
                "admits_new_round": self.journal.admits_new_round(),
            },
        }
        if self._failing_alert is not None:
            report["delivery_failing"] = {
                "alert_id": self._failing_alert,
                "events_waiting": len(self._retry) + len(self._retried_in_flight),
            }
        if self._health_extra is not None:
            try:
                report["devices"] = self._health_extra()
            except Exception as exc:  # a broken provider must not stop health reports
                report["devices"] = {"error": f"health provider failed: {exc}"}
        return report

    @property
    def running(self) -> bool:
        """Both threads alive and no stop requested (what a watchdog probe should check)."""
        return (
            bool(self._threads) and all(t.is_alive() for t in self._threads) and not self._stopping.is_set()
        )

    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the drain loop's last turn, None when not running.

        The loop turns at least every half second whether the broker is reachable or not,
        so a value that stops advancing means delivery is stuck (e.g. blocked in the journal
        or in paho), not merely disconnected: what a watchdog probe should look at."""
        if not self.running:
            return None
        return self._progress

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

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
            properties=self._json_properties(PacketTypes.WILLMESSAGE),
        )
        if s.tls.enabled:
            client.tls_set_context(self._tls_context())
        if s.auth is not None:
            client.username_pw_set(s.auth.username, self._password.reveal_text() if self._password else None)
        # Without this, paho's publish() writes to the socket itself from the calling thread
        # whenever no paho-owned thread runs, racing the network thread's loop(): both pop
        # packets off paho's queue and can put them on the wire out of order (the crash test
        # caught seq N+1 arriving before N). Registered, publish() only queues and wakes
        # loop(), so every byte is written by the network thread, in queue order.
        client.on_socket_register_write = _writes_happen_in_loop
        # A failing callback of ours is logged by paho instead of unwinding its loop.
        client.suppress_exceptions = True
        client.enable_logger(logging.getLogger("baccarat_edge.paho"))
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    def _tls_context(self) -> ssl.SSLContext:
        return tls_context(self.settings.tls)

    def _json_properties(self, packet_type: int = PacketTypes.PUBLISH) -> Properties | None:
        if self.settings.protocol is not Protocol.MQTT5:
            return None
        props = Properties(packet_type)  # type: ignore[no-untyped-call]
        props.ContentType = "application/json"
        props.PayloadFormatIndicator = 1
        return props

    def _event_properties(self) -> _PackedProperties | None:
        """The properties of every event PUBLISH, built and packed once (paho packs a
        message's properties on every send: about a sixth of the drain's time per event)."""
        if self.settings.protocol is not Protocol.MQTT5:
            return None
        props = _PackedProperties(PacketTypes.PUBLISH)
        props.ContentType = "application/json"
        props.PayloadFormatIndicator = 1
        props.UserProperty = [("contract", "baccarat/v1"), ("schema_version", "1")]
        if self.settings.delivery.message_expiry_s is not None:
            props.MessageExpiryInterval = self.settings.delivery.message_expiry_s
        props.freeze()
        return props

    def _status_payload(self, status: str) -> dict[str, Any]:
        return signed_message(
            {"table_id": self.table_id, "status": status, "ts": self._clock()}, self._events_key
        )

    # -- network thread -----------------------------------------------------------------------

    def _network_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                rc = self._client.reconnect()
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
                while not self._stopping.is_set() or self._client.want_write():
                    rc = self._client.loop(timeout=0.5)
                    if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                        problem = f"connection lost: {mqtt.error_string(rc)}"
                        break
            except Exception as exc:
                # Never let one bad packet or callback end delivery: drop the connection and
                # reconnect (paho resends what was in flight).
                log.exception("MQTT network loop failed")
                problem = f"network loop failed: {exc}"
                with contextlib.suppress(Exception):
                    self._client.disconnect()
            self._connected.clear()
            if self._stopping.is_set():
                return
            if self._refusal is not None:
                problem = self._refusal  # say why (e.g. bad credentials), not "connection lost"
            if problem is not None:
                self._connection_failed(problem)

    def _connection_failed(self, message: str) -> None:
        self._connected.clear()
        self.subscribed.clear()
        self._last_error = message
        self.counters.connection_failures += 1
        delay = self._backoff.next_delay()
        log.warning("broker unavailable (%s); retrying in %.1fs", message, delay)
        self._stopping.wait(delay)

    # -- paho callbacks (network thread) --------------------------------------------------------

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.ConnectFlags,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if reason_code.is_failure:
            self._refusal = f"broker refused the connection: {_reason_text(reason_code)}"
            log.error("%s", self._refusal)
            client.disconnect()
            return
        self._refusal = None
        # The broker's limit (MQTT 5 CONNACK): paho does not check it, and the broker answers
        # an oversized PUBLISH by dropping the connection, so it is checked before sending.
        limit = getattr(properties, "MaximumPacketSize", None) if properties is not None else None
        self._broker_max_packet = limit if isinstance(limit, int) and limit > 0 else None
        self._backoff.reset()
        self.counters.connects += 1
        self._last_error = None
        props = self._json_properties()
        client.publish(
            self.topics.status, encode(self._status_payload("online")), qos=1, retain=True, properties=props
        )
        _, self._cmd_sub_mid = client.subscribe(self.topics.cmd, qos=1)
        # The drain thread republishes the state before it resumes draining.
        self._state_due.set()
        self._connected.set()
        self._wake.set()

    def _on_subscribe(
        self,
        client: mqtt.Client,
        userdata: Any,
        mid: int,
        reason_codes: list[ReasonCode],
        properties: Properties | None,
    ) -> None:
        if mid != self._cmd_sub_mid:
            return
        if any(code.is_failure for code in reason_codes):
            self._last_error = "broker refused the cmd subscription: " + ", ".join(
                _reason_text(code) for code in reason_codes
            )
            log.error("%s", self._last_error)
            return
        self.subscribed.set()

    def _on_disconnect(
        self,
        client: mqtt.Client,
        userdata: Any,
        flags: mqtt.DisconnectFlags,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        self._connected.clear()
        self.subscribed.clear()
        if not self._stopping.is_set():
            self._last_error = f"disconnected: {_reason_text(reason_code)}"

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
        reason = _reason_text(reason_code) if failed else ""  # named only when someone reads it
        self._acks.append(_Ack(mid, reason_code.value, failed, reason))
        self._wake.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        if message.topic != self.topics.cmd:
            return
        response_topic: str | None = None
        correlation: bytes | None = None
        props = message.properties
        if props is not None:
            response_topic = getattr(props, "ResponseTopic", None)
            correlation = getattr(props, "CorrelationData", None)
        try:
            outcome = self._verifier.check(bytes(message.payload))
        except Exception as exc:  # e.g. the journal failing: refuse, never crash the loop
            log.exception("command verification failed")
            outcome = Refusal("internal_error", f"command could not be checked: {exc}")
        if isinstance(outcome, Refusal):
            self.counters.commands_refused += 1
            log.warning("command refused: %s (%s)", outcome.code, outcome.reason)
            self._send_reply(
                outcome.command_id,
                outcome.action,
                False,
                outcome.code,
                outcome.reason,
                response_topic,
                correlation,
                self._journal_refusal(outcome),
            )
            return
        self._dispatch(outcome, response_topic, correlation)

    # -- commands ---------------------------------------------------------------------------

    def _journal_refusal(self, refusal: Refusal) -> dict[str, Any]:
        """Record a command refused before the engine (bad signature, replay, stale, unknown
        action, malformed) as a ``command_refused`` event on the events stream: an auditor
        sees every attempt, not only the log. Returns the reply's ``event_id``/``seq``."""
        try:
            event = self.journal.append_delivery_event(
                DeliveryEvent(
                    kind=COMMAND_REFUSED_KIND,
                    at=self._clock(),
                    data={
                        "command_id": refusal.command_id,
                        "action": refusal.action,
                        "actor": refusal.actor,
                        "code": refusal.code,
                        "reason": refusal.reason,
                        "refused_by": "edge",
                    },
                )
            )
        except Exception:  # the reply still goes out; the failure is in the log
            log.exception("refused command could not be journaled")
            return {}
        self._wake.set()
        return {"event_id": event.event_id, "seq": event.seq}

    def _dispatch(self, verified: Verified, response_topic: str | None, correlation: bytes | None) -> None:
        command = verified.command
        answered = threading.Event()

        def reply(result: Mapping[str, Any] | bool, reason: str | None = None) -> None:
            if answered.is_set():
                return
            answered.set()
            extra: dict[str, Any] = {}
            if isinstance(result, Mapping):
                accepted = bool(result.get("accepted"))
                reason = result.get("reason") if isinstance(result.get("reason"), str) else None
                if isinstance(result.get("event_id"), str):
                    extra["event_id"] = result["event_id"]
                if isinstance(result.get("seq"), int):
                    extra["seq"] = result["seq"]
            else:
                accepted = bool(result)
            if accepted:
                self.counters.commands_accepted += 1
            else:
                self.counters.commands_refused += 1
            self._send_reply(
                command.command_id,
                command.action,
                accepted,
                None if accepted else "refused_by_table",
                reason,
                response_topic,
                correlation,
                extra,
            )

        try:
            if self.on_command is None:
                reply(False, f"no table engine is attached to handle {command.action!r}")
            else:
                self.on_command(command, reply)
        except Exception as exc:
            log.exception("command handler failed")
            reply(False, f"command handler failed: {exc}")

    def _send_reply(
        self,
        command_id: str | None,
        action: str | None,
        accepted: bool,
        code: str | None,
        reason: str | None,
        response_topic: str | None,
        correlation: bytes | None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        body: dict[str, Any] = {
            "table_id": self.table_id,
            "command_id": command_id,
            "action": action,
            "status": "accepted" if accepted else "refused",
            "code": code,
            "reason": reason,
            "ts": self._clock(),
            **(extra or {}),
        }
        payload = encode(signed_message(body, self._events_key))
        props = self._json_properties()
        if props is not None and correlation is not None:
            props.CorrelationData = correlation
        self._client.publish(self.topics.cmd_reply, payload, qos=1, properties=props)
        if (
            response_topic
            and response_topic != self.topics.cmd_reply
            and _valid_publish_topic(response_topic)
        ):
            self._client.publish(response_topic, payload, qos=1, properties=props)

    # -- drain thread ---------------------------------------------------------------------------

    def _drain_loop(self) -> None:
        interval = self.settings.delivery.health_interval_s
        next_health = 0.0
        next_compact = time.monotonic() + 5.0
        while not self._stopping.is_set():
            self._progress = time.monotonic()
            self._wake.wait(timeout=self._drain_wait())
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                self._process_acks()
                if self._connected.is_set():
                    if self._state_due.is_set():
                        self._publish_state(force=True)
                    self._fill_window()
                    if time.monotonic() >= self._next_state_at:
                        self._publish_state()
                now = time.monotonic()
                if now >= next_health:
                    next_health = now + interval
                    self._check_capacity()
                    if self._connected.is_set():
                        self._publish_health()
                if now >= next_compact:
                    next_compact = now + self.settings.delivery.compact_interval_s
                    self.journal.compact()
            except Exception:
                # A failing journal or broker call must not kill delivery: log and go again.
                log.exception("publisher drain step failed")
                self._stopping.wait(0.5)

    def _drain_wait(self) -> float:
        """How long the drain thread may sleep: until a retry or the state is due."""
        wait = 0.5
        if not self._connected.is_set():
            return wait  # nothing is published until the connect wakes this thread
        now = time.monotonic()
        if self._retry:
            wait = min(wait, max(0.0, self._retry_at - now))
        if self._snapshot is not None:
            try:
                changed = self._snapshot() is not self._last_state
            except Exception:  # logged when the state is published, not on every wait
                changed = False
            if changed:
                wait = min(wait, max(0.0, self._next_state_at - now))
        return max(wait, 0.005)

    def _process_acks(self) -> None:
        delivered: list[int] = []
        while self._acks:
            ack = self._acks.popleft()
            event = self._inflight.pop(ack.mid, None)
            if event is None:
                continue  # status, state, health, a reply or an alerts-topic copy
            self._retried_in_flight.discard(event.seq)
            if not ack.failed:
                self._refusals.pop(event.seq, None)
                delivered.append(event.seq)
            elif ack.code in PERMANENT_REASON_CODES:
                self._refusals.pop(event.seq, None)
                self._dead_letter(event, f"rejected by the broker: {ack.reason}")
            else:
                refusals = self._refusals.get(event.seq, 0) + 1
                if refusals > self.settings.delivery.refused_retries:
                    self._refusals.pop(event.seq, None)
                    self._dead_letter(
                        event,
                        f"refused by the broker {refusals} times, last: {ack.reason} "
                        f"(delivery.refused_retries = {self.settings.delivery.refused_retries})",
                    )
                else:
                    self._refusals[event.seq] = refusals
                    self._retry_later(event, ack.reason)
        if delivered:
            self.journal.mark_delivered(delivered)
            self.counters.acknowledged += len(delivered)
            if self._failing_alert is not None and not self._retry and not self._retried_in_flight:
                self._retry_backoff.reset()
                self._clear_delivery_alert(
                    self._failing_alert, DELIVERY_FAILING_ALERT, "the broker acknowledges events again"
                )
                self._failing_alert = None

    def _retry_later(self, event: JournaledEvent, reason: str) -> None:
        """A transient broker failure: keep the event undelivered and publish it again later."""
        self._retry[event.seq] = event
        delay = self._retry_backoff.next_delay()
        self._retry_at = time.monotonic() + delay
        self.counters.delivery_retries += 1
        log.warning(
            "event seq=%d refused by the broker (%s, %d/%d retries); retrying in %.1fs",
            event.seq,
            reason,
            self._refusals.get(event.seq, 0),
            self.settings.delivery.refused_retries,
            delay,
        )
        if self._failing_alert is None:
            self._failing_alert = self._raise_delivery_alert(
                DELIVERY_FAILING_ALERT,
                "critical",
                f"the broker refuses events for now ({reason}); they stay in the journal and are "
                "published again with backoff",
                {"seq": event.seq, "event_id": event.event_id, "reason": reason},
            )

    def _fill_window(self) -> bool:
        """Publish pending events while the window has room; True if any went out.

        While refused events wait, the window is one refused event: the lowest ``seq`` goes
        out again once the backoff passed and the previous retry was settled, and nothing
        newer is published until none is left, so the broker gets them in ``seq`` order."""
        room = self.settings.delivery.inflight_window - len(self._inflight)
        if room <= 0:
            return False
        if self._retry or self._retried_in_flight:
            if self._retried_in_flight or not self._retry or time.monotonic() < self._retry_at:
                return False
            seq = min(self._retry)
            if self._publish_event(self._retry.pop(seq)):
                self._retried_in_flight.add(seq)
            return True
        sent = False
        for event in self.journal.pending(after_seq=self._sent_through, limit=room):
            if not self._connected.is_set():
                break
            self._publish_event(event)
            sent = True
        return sent

    def _publish_event(self, event: JournaledEvent) -> bool:
        """Publish one event; False when it was dead-lettered instead (it can never go out)."""
        try:
            payload = event_payload(event, self.table_id, self._clock(), self._events_key)
            props = self._event_props
            too_large = self._too_large(len(payload))
            if too_large is not None:
                self._sent_through = max(self._sent_through, event.seq)
                self._dead_letter(event, too_large)
                return False
            info = self._client.publish(self.topics.events, payload, qos=1, properties=props)
        except ValueError as exc:  # payload too large or not encodable: it can never go out
            self._sent_through = max(self._sent_through, event.seq)
            self._dead_letter(event, f"cannot be published: {exc}")
            return False
        self._inflight[info.mid] = event
        self._sent_through = max(self._sent_through, event.seq)
        self.counters.published += 1
        if event.kind in ROUND_BOUNDARY_KINDS:
            self._next_state_at = 0.0
        if event.kind.startswith(ALERT_KIND_PREFIX):
            self._client.publish(self.topics.alerts, payload, qos=1, properties=props)
        return True

    def _too_large(self, payload_bytes: int) -> str | None:
        """Why an event PUBLISH exceeds the broker's Maximum Packet Size (0x95), else None."""
        limit = self._broker_max_packet
        if limit is None:
            return None
        remaining = 2 + self._event_topic_bytes + 2 + self._event_props_bytes + payload_bytes
        size = 1 + _varint_length(remaining) + remaining
        if size <= limit:
            return None
        return f"packet too large (0x95): {size} bytes, the broker accepts at most {limit}"

    def _dead_letter(self, event: JournaledEvent, reason: str) -> None:
        self.journal.mark_dead_letter(event.seq, reason)
        self.counters.dead_lettered += 1
        log.error("event seq=%d (%s) dead-lettered: %s", event.seq, event.kind, reason)
        if event.origin == ORIGIN_DELIVERY and event.data.get("code") == DEAD_LETTER_ALERT:
            return  # never alert about a failed alert: that would loop when the topic is closed
        self._raise_delivery_alert(
            DEAD_LETTER_ALERT,
            "critical",
            f"event seq {event.seq} ({event.kind}) was not delivered: {reason}",
            {"seq": event.seq, "event_id": event.event_id, "event_kind": event.kind},
        )

    def _raise_delivery_alert(self, code: str, severity: str, message: str, extra: dict[str, Any]) -> str:
        alert_id = f"delivery-{uuid.uuid4().hex[:12]}"
        self.journal.append_delivery_event(
            DeliveryEvent(
                kind="alert_raised",
                at=self._clock(),
                data={"alert_id": alert_id, "code": code, "severity": severity, "message": message, **extra},
            )
        )
        self._wake.set()
        return alert_id

    def _clear_delivery_alert(self, alert_id: str, code: str, message: str) -> None:
        self.journal.append_delivery_event(
            DeliveryEvent(
                kind="alert_cleared",
                at=self._clock(),
                data={"alert_id": alert_id, "code": code, "message": message},
            )
        )
        self._wake.set()

    def _check_capacity(self) -> None:
        capacity = self.journal.capacity()
        if capacity.full and self._journal_full_alert is None:
            self._journal_full_alert = self._raise_delivery_alert(
                JOURNAL_FULL_ALERT,
                "critical",
                f"{capacity.reason}; policy {self.journal.settings.on_full.value}",
                {"admits_new_round": self.journal.admits_new_round()},
            )
        elif not capacity.full and self._journal_full_alert is not None:
            self._clear_delivery_alert(
                self._journal_full_alert, JOURNAL_FULL_ALERT, "journal below its limits again"
            )
            self._journal_full_alert = None

    def _peek_state(self) -> object:
        if self._snapshot is None:
            return None
        try:
            return self._snapshot()
        except Exception:
            log.exception("state snapshot provider failed")
            return None

    def _publish_state(self, force: bool = False) -> None:
        """Publish the retained state: on connect and stop (``force``), else only when the
        provider hands a new snapshot object and the interval passed. The provider returns a
        new object when the state changes (the runner does), so no deep comparison is needed."""
        self._state_due.clear()
        state = self._peek_state()
        if state is None or (not force and state is self._last_state):
            return
        self._last_state = state
        self._next_state_at = time.monotonic() + self.settings.delivery.state_interval_s
        body = {
            "table_id": self.table_id,
            "ts": self._clock(),
            "last_seq": self.journal.last_seq(),
            "state": state,
        }
        try:
            payload = encode(signed_message(body, self._events_key))
        except ValueError as exc:  # e.g. NaN in a snapshot: keep the last good retained state
            log.error("state snapshot cannot be published: %s", exc)
            return
        self._client.publish(
            self.topics.state, payload, qos=1, retain=True, properties=self._json_properties()
        )

    def _publish_health(self) -> None:
        payload = encode(signed_message(self.health(), self._events_key))
        self._client.publish(
            self.topics.health, payload, qos=1, retain=True, properties=self._json_properties()
        )


class _PackedProperties(Properties):
    """MQTT 5 properties that are packed once, by :meth:`freeze`, and never change after."""

    _packed: bytes | None

    def __init__(self, packet_type: int) -> None:
        super().__init__(packet_type)  # type: ignore[no-untyped-call]
        object.__setattr__(self, "_packed", None)  # Properties.__setattr__ takes property names only

    def freeze(self) -> None:
        """Pack the properties set so far; :meth:`pack` returns these bytes from now on."""
        object.__setattr__(self, "_packed", None)
        object.__setattr__(self, "_packed", self.pack())

    def pack(self) -> bytes:
        if self._packed is not None:
            return self._packed
        packed: bytes = super().pack()  # type: ignore[no-untyped-call]
        return packed


def _writes_happen_in_loop(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """Marker callback: see :meth:`Publisher._build_client`."""


def _varint_length(value: int) -> int:
    """Bytes of an MQTT variable byte integer."""
    length = 1
    while value >= 128:
        value //= 128
        length += 1
    return length


def _valid_publish_topic(topic: str) -> bool:
    return (
        0 < len(topic.encode("utf-8")) <= 65535
        and "+" not in topic
        and "#" not in topic
        and "\0" not in topic
    )
