"""The delivery window: which journaled events go to the broker next and what each PUBACK
means. Pure: no I/O, no threads, no clock (``now`` is passed in, ``time.monotonic()``
seconds); the publisher's drain thread feeds it and carries out what it decides.

Inputs: :meth:`DeliveryWindow.next_send` (what to send now), :meth:`~DeliveryWindow.published`
(an event went out with a paho ``mid``), :meth:`~DeliveryWindow.unsendable` (an event can
never go out), :meth:`~DeliveryWindow.acknowledged` (PUBACKs). Outputs: :data:`Decision` lists,
to be carried out in order (the alerts they raise take the next ``seq`` numbers in that order).

Rules (the delivery guarantees of :mod:`daemon.mqtt.publisher`):

* at most ``size`` events are unacknowledged; new events go out in ``seq`` order;
* a PUBACK with no failure: delivered;
* a failure code in :data:`PERMANENT_REASON_CODES`: dead-lettered;
* any other failure code: published again after a backoff, at most ``refused_retries`` times;
  refused once more, dead-lettered;
* while a refused event waits, the window falls to one event: refused events go out again one
  at a time, lowest ``seq`` first, each only after the previous one was acknowledged or
  dead-lettered, and nothing newer is published until none is left;
* the ``mqtt_delivery_failing`` alert is raised at the first transient refusal and cleared by
  the first acknowledgement that leaves no refused event waiting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from common.backoff import Backoff
from daemon.alerts import AlertCode
from daemon.journal.records import ORIGIN_DELIVERY, JournaledEvent

PERMANENT_REASON_CODES: frozenset[int] = frozenset({0x87, 0x90, 0x95, 0x99})
"""PUBACK reason codes after which publishing the same event again cannot succeed: not
authorized (ACL), topic name invalid, packet too large, payload format invalid. Every other
failure code is retried."""


@dataclass(frozen=True, slots=True)
class Ack:
    """One PUBACK: the ``mid`` it answers, its reason code, and the code's name when failed."""

    mid: int
    code: int
    failed: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Resend:
    """Publish this refused event again now."""

    event: JournaledEvent


@dataclass(frozen=True, slots=True)
class Fetch:
    """Publish up to ``limit`` undelivered events with ``seq`` above ``after_seq``, in order."""

    after_seq: int
    limit: int


@dataclass(frozen=True, slots=True)
class Delivered:
    """Mark these events delivered (acknowledged by the broker)."""

    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """The event can never be delivered: dead-letter it, with a ``mqtt_dead_letter`` alert
    unless ``alert`` is False (the event is itself such an alert: no loop)."""

    event: JournaledEvent
    reason: str
    alert: bool


@dataclass(frozen=True, slots=True)
class RetryLater:
    """The broker refused the event transiently (``refusals`` times so far); it goes out again
    after ``delay`` seconds."""

    event: JournaledEvent
    reason: str
    refusals: int
    delay: float


@dataclass(frozen=True, slots=True)
class RaiseFailing:
    """Open the ``mqtt_delivery_failing`` alert (first transient refusal of a spell)."""

    event: JournaledEvent
    reason: str


@dataclass(frozen=True, slots=True)
class ClearFailing:
    """Close the ``mqtt_delivery_failing`` alert: the broker acknowledges events again."""


Decision = Delivered | DeadLetter | RetryLater | RaiseFailing | ClearFailing


class DeliveryWindow:
    """The in-flight map (paho ``mid`` -> event) and the refused events waiting for a retry."""

    def __init__(self, size: int, refused_retries: int, backoff: Backoff) -> None:
        self.size = size
        self.refused_retries = refused_retries
        self._backoff = backoff
        self._inflight: dict[int, JournaledEvent] = {}
        self._sent_through = 0
        self._waiting: dict[int, JournaledEvent] = {}  # refused, by seq, until _retry_at
        self._refusals: dict[int, int] = {}
        self._retry_at = 0.0
        self._resent: set[int] = set()  # refused events published again, not yet answered
        self.failing = False
        """The ``mqtt_delivery_failing`` alert is open."""

    @property
    def inflight(self) -> int:
        """Events published and not yet answered by a PUBACK."""
        return len(self._inflight)

    @property
    def refused_waiting(self) -> int:
        """Refused events not yet delivered or dead-lettered (waiting or resent)."""
        return len(self._waiting) + len(self._resent)

    def next_send(self, now: float) -> Resend | Fetch | None:
        """What may be published at ``now``, if anything."""
        room = self.size - len(self._inflight)
        if room <= 0:
            return None
        if self._waiting or self._resent:
            if self._resent or not self._waiting or now < self._retry_at:
                return None
            return Resend(self._waiting[min(self._waiting)])
        return Fetch(self._sent_through, room)

    def retry_wait(self, now: float) -> float | None:
        """Seconds until a waiting refused event may go out again; None when none waits."""
        if not self._waiting:
            return None
        return max(0.0, self._retry_at - now)

    def published(self, event: JournaledEvent, mid: int) -> None:
        """``event`` was handed to paho as message ``mid``."""
        self._inflight[mid] = event
        if self._waiting.pop(event.seq, None) is not None:
            self._resent.add(event.seq)
        else:
            self._sent_through = max(self._sent_through, event.seq)

    def republished(self, event: JournaledEvent, mid: int) -> None:
        """``event``, already acknowledged by the broker, went out again for the game server
        (:mod:`daemon.mqtt.resend`) as message ``mid``: it takes a place in the window until its
        PUBACK, but new events go on from where they were."""
        self._inflight[mid] = event

    def unsendable(self, event: JournaledEvent, reason: str) -> list[Decision]:
        """``event`` cannot be published at all (e.g. larger than the broker accepts)."""
        self._sent_through = max(self._sent_through, event.seq)
        self._waiting.pop(event.seq, None)
        self._refusals.pop(event.seq, None)
        return [_dead_letter(event, reason)]

    def acknowledged(self, acks: Iterable[Ack], now: float) -> list[Decision]:
        """PUBACKs, in arrival order. Acks of messages that are not events are ignored."""
        decisions: list[Decision] = []
        delivered: list[int] = []
        for ack in acks:
            event = self._inflight.pop(ack.mid, None)
            if event is None:
                continue  # status, state, health, a reply or an alerts-topic copy
            self._resent.discard(event.seq)
            if not ack.failed:
                self._refusals.pop(event.seq, None)
                delivered.append(event.seq)
            elif ack.code in PERMANENT_REASON_CODES:
                self._refusals.pop(event.seq, None)
                decisions.append(_dead_letter(event, f"rejected by the broker: {ack.reason}"))
            else:
                decisions.extend(self._refused(event, ack.reason, now))
        if delivered:
            decisions.append(Delivered(tuple(delivered)))
            if self.failing and not self._waiting and not self._resent:
                self._backoff.reset()
                self.failing = False
                decisions.append(ClearFailing())
        return decisions

    def _refused(self, event: JournaledEvent, reason: str, now: float) -> list[Decision]:
        refusals = self._refusals.pop(event.seq, 0) + 1
        if refusals > self.refused_retries:
            why = (
                f"refused by the broker {refusals} times, last: {reason} "
                f"(delivery.refused_retries = {self.refused_retries})"
            )
            return [_dead_letter(event, why)]
        self._refusals[event.seq] = refusals
        self._waiting[event.seq] = event
        delay = self._backoff.next_delay()
        self._retry_at = now + delay
        decisions: list[Decision] = [RetryLater(event, reason, refusals, delay)]
        if not self.failing:
            self.failing = True
            decisions.append(RaiseFailing(event, reason))
        return decisions


def _dead_letter(event: JournaledEvent, reason: str) -> DeadLetter:
    # Never alert about a failed dead-letter alert: that would loop when the topic is closed.
    is_dead_letter_alert = (
        event.origin == ORIGIN_DELIVERY and event.data.get("code") == AlertCode.MQTT_DEAD_LETTER
    )
    return DeadLetter(event, reason, alert=not is_dead_letter_alert)
