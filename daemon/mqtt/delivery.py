"""Carries out the delivery window's decisions: reads undelivered events from the journal,
publishes them, marks PUBACKs delivered, dead-letters and raises/clears the delivery alerts.
Drain thread only. What to do is decided by :class:`daemon.mqtt.window.DeliveryWindow`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from common.backoff import Backoff
from daemon.alerts import ALERT_EVENT_KINDS, AlertCode
from daemon.engine.events import ROUND_BOUNDARY_KINDS, EventKind
from daemon.journal.records import DeliveryEvent, JournaledEvent
from daemon.journal.store import Journal
from daemon.mqtt.acknowledgement import ServerAcknowledgement
from daemon.mqtt.alerts import (
    alert_cleared,
    alert_raised,
)
from daemon.mqtt.audit import audit_payload
from daemon.mqtt.connection import Connection
from daemon.mqtt.counters import Counters
from daemon.mqtt.envelope import event_payload
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.open_alerts import open_episode_alerts
from daemon.mqtt.packed_properties import FrozenProperties
from daemon.mqtt.resend import ResendQueue
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import DeliverySettings, Protocol
from daemon.mqtt.window import (
    Ack,
    ClearFailing,
    DeadLetter,
    Decision,
    Delivered,
    DeliveryWindow,
    RaiseFailing,
    Resend,
    RetryLater,
)

log = logging.getLogger(__name__)

RESEND_QUEUE_FACTOR = 4
"""``resend`` commands may queue this many times ``delivery.server_ack.resend_max_events``."""


class Delivery:
    """The journal -> broker event stream of one table (drain thread)."""

    def __init__(
        self,
        connection: Connection,
        journal: Journal,
        events_key: Secret | None,
        counters: Counters,
        *,
        clock: Callable[[], float],
        wake: Callable[[], None],
        on_boundary: Callable[[], None],
        keyring: Keyring,
        held_after: Callable[[], int | None] | None = None,
    ) -> None:
        """``held_after``: the highest seq that may be published now, None for all (the
        service's start-up checks and integrity hold: :mod:`daemon.service.startup_checks`)."""
        settings: DeliverySettings = connection.settings.delivery
        self._connection = connection
        self._journal = journal
        self._events_key = events_key
        self._counters = counters
        self._clock = clock
        self._wake = wake
        self._on_boundary = on_boundary
        self._held_after = held_after
        self._table_id = connection.table_id
        self._topics = connection.topics
        self.window = DeliveryWindow(
            settings.inflight_window,
            settings.refused_retries,
            Backoff(settings.backoff_initial_s, settings.backoff_max_s),
        )
        self.failing_alert: str | None = None
        """The id of the open ``mqtt_delivery_failing`` alert."""
        props = _event_properties(connection.settings.protocol, settings)
        self._event_props = props
        # Never changed after this: every event PUBLISH carries these packed bytes.
        self._event_props_bytes = 0 if props is None else len(props.pack())  # type: ignore[no-untyped-call]
        self._event_topic_bytes = len(self._topics.events.encode("utf-8"))
        self.resend = ResendQueue(RESEND_QUEUE_FACTOR * settings.server_ack.resend_max_events)
        """Events to publish again for the game server (reconnects, ``resend`` commands)."""
        self.server_ack = ServerAcknowledgement(
            settings.server_ack,
            journal,
            keyring,
            self._table_id,
            self.resend,
            counters,
            clock,
            self._journal_event,
        )
        self._reconnected = threading.Event()

    def resume_open_alerts(self) -> None:
        """Go on with the episode alerts a previous publisher left open (restart, SIGHUP
        swap): read from the journal, so an episode has one raise and one clear. Called before
        the drain thread starts."""
        open_ids = open_episode_alerts(self._journal)
        failing = open_ids.get(AlertCode.MQTT_DELIVERY_FAILING)
        if failing is not None:
            self.failing_alert = failing
            self.window.failing = True  # cleared at the next PUBACK with nothing refused waiting
            log.info(
                "mqtt_delivery_failing alert %s is still open: it is cleared when events are acknowledged",
                failing,
            )
        lagging = open_ids.get(AlertCode.SERVER_ACK_LAGGING)
        if lagging is not None:
            self.server_ack.lagging_alert = lagging
            log.info(
                "server_ack_lagging alert %s is still open: it is cleared when the server catches up", lagging
            )

    def connected(self) -> None:
        """A connection came up (network thread): with the server acknowledgement on, what
        the server has not acknowledged goes out again before anything newer."""
        self._reconnected.set()

    def server_acks(self, payloads: list[bytes]) -> None:
        """Apply the game server's acknowledgements received; keep the lag alert."""
        if payloads:
            self.server_ack.receive(payloads)
        self.server_ack.check_lag()

    def settle(self, acks: list[Ack]) -> None:
        """Carry out what the PUBACKs mean (delivered, dead letters, retries, alerts)."""
        if acks:
            self._carry_out(self.window.acknowledged(acks, time.monotonic()))

    def fill(self) -> None:
        """Publish what the window has room for: one due refused event, or new events."""
        plan = self.window.next_send(time.monotonic())
        if plan is None:
            return
        if isinstance(plan, Resend):
            self._publish(plan.event)
            return
        room = plan.limit
        if self._reconnected.is_set():
            self._reconnected.clear()
            if self.server_ack.enabled:
                self.resend.request(self.server_ack.seq + 1, self._journal.last_seq(), bounded=False)
        if self.resend.waiting:
            again = self.resend.take(self._journal, room)
            for event in again:
                if not self._connection.connected.is_set():
                    return
                self._publish(event, again=True)
            room -= len(again)
            if room <= 0 or self.resend.waiting:
                return  # nothing newer before the range sent again is out, so it stays in order
        held_after = None if self._held_after is None else self._held_after()
        for event in self._journal.pending(after_seq=plan.after_seq, limit=room):
            if not self._connection.connected.is_set() or (held_after is not None and event.seq > held_after):
                break
            self._publish(event)

    def failing_report(self) -> dict[str, Any] | None:
        """The ``delivery_failing`` block of ``health`` while the alert is open."""
        if self.failing_alert is None:
            return None
        return {"alert_id": self.failing_alert, "events_waiting": self.window.refused_waiting}

    def _publish(self, event: JournaledEvent, *, again: bool = False) -> None:
        """Publish ``event``; ``again``: one the broker acknowledged before, sent again for the
        game server (a refusal to send it again is logged: its first copy went out)."""
        mid: int | None = None
        try:
            payload = event_payload(event, self._table_id, self._clock(), self._events_key)
            problem = self._too_large(len(payload))
            if problem is None:
                mid = self._connection.publish(self._topics.events, payload, properties=self._event_props)
        except ValueError as exc:  # not encodable, or paho refuses it: it can never go out
            problem = f"cannot be published: {exc}"
        if mid is None:
            if again:
                log.error("event seq=%d cannot be sent again: %s", event.seq, problem)
            else:
                self._carry_out(self.window.unsendable(event, problem or "cannot be published"))
            return
        if again:
            self.window.republished(event, mid)
            self._counters.resent += 1
            return
        self.window.published(event, mid)
        self._counters.published += 1
        if event.kind in ROUND_BOUNDARY_KINDS:
            self._on_boundary()
        if event.kind in ALERT_EVENT_KINDS:
            self._connection.publish(self._topics.alerts, payload, properties=self._event_props)
        elif event.kind == EventKind.SHOE_CERTIFICATE:
            self._connection.publish(
                self._topics.shoe_certificate, payload, retain=True, properties=self._event_props
            )
        audit = audit_payload(event, self._table_id, self._events_key)
        if audit is not None:  # a squeeze round voided before its reveal: its cards, to the auditors
            self._connection.publish(self._topics.audit, audit, properties=self._event_props)

    def _too_large(self, payload_bytes: int) -> str | None:
        """Why an event PUBLISH exceeds the broker's Maximum Packet Size (0x95), else None."""
        limit = self._connection.max_packet_size
        if limit is None:
            return None
        remaining = 2 + self._event_topic_bytes + 2 + self._event_props_bytes + payload_bytes
        size = 1 + _varint_length(remaining) + remaining
        if size <= limit:
            return None
        return f"packet too large (0x95): {size} bytes, the broker accepts at most {limit}"

    def _carry_out(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Delivered):
                self._journal.mark_delivered(decision.seqs)
                self._counters.acknowledged += len(decision.seqs)
            elif isinstance(decision, DeadLetter):
                self._dead_letter(decision)
            elif isinstance(decision, RetryLater):
                self._counters.delivery_retries += 1
                log.warning(
                    "event seq=%d refused by the broker (%s, %d/%d retries); retrying in %.1fs",
                    decision.event.seq,
                    decision.reason,
                    decision.refusals,
                    self.window.refused_retries,
                    decision.delay,
                )
            elif isinstance(decision, RaiseFailing):
                self.failing_alert = self._raise(
                    AlertCode.MQTT_DELIVERY_FAILING,
                    f"the broker refuses events for now ({decision.reason}); they stay in the journal "
                    "and are published again with backoff",
                    {
                        "seq": decision.event.seq,
                        "event_id": decision.event.event_id,
                        "reason": decision.reason,
                    },
                )
            elif isinstance(decision, ClearFailing) and self.failing_alert is not None:
                self._journal_event(
                    alert_cleared(
                        self.failing_alert,
                        AlertCode.MQTT_DELIVERY_FAILING,
                        "the broker acknowledges events again",
                        self._clock(),
                    )
                )
                self.failing_alert = None

    def _dead_letter(self, decision: DeadLetter) -> None:
        event = decision.event
        self._journal.mark_dead_letter(event.seq, decision.reason)
        self._counters.dead_lettered += 1
        log.error("event seq=%d (%s) dead-lettered: %s", event.seq, event.kind, decision.reason)
        if decision.alert:
            self._raise(
                AlertCode.MQTT_DEAD_LETTER,
                f"event seq {event.seq} ({event.kind}) was not delivered: {decision.reason}",
                {"seq": event.seq, "event_id": event.event_id, "event_kind": event.kind},
            )

    def _raise(self, code: AlertCode, message: str, extra: dict[str, Any]) -> str:
        alert_id, event = alert_raised(code, message, extra, self._clock())
        self._journal_event(event)
        return alert_id

    def _journal_event(self, event: DeliveryEvent) -> None:
        self._journal.append_delivery_event(event)
        self._wake()


def _event_properties(protocol: Protocol, settings: DeliverySettings) -> Properties | None:
    """The properties of every event PUBLISH (None with MQTT 3.1.1), built once."""
    if protocol is not Protocol.MQTT5:
        return None
    values: dict[str, Any] = {
        "ContentType": "application/json",
        "PayloadFormatIndicator": 1,
        "UserProperty": [("contract", "baccarat/v1"), ("schema_version", "1")],
    }
    if settings.message_expiry_s is not None:
        values["MessageExpiryInterval"] = settings.message_expiry_s
    return FrozenProperties(PacketTypes.PUBLISH, values)


def _varint_length(value: int) -> int:
    """Bytes of an MQTT variable byte integer."""
    length = 1
    while value >= 128:
        value //= 128
        length += 1
    return length
