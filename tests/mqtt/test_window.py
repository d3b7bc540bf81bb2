"""The delivery window on its own (no broker): what goes out next and what each PUBACK means.

Scenario tables drive :class:`DeliveryWindow` step by step; a hypothesis property drives it
with arbitrary broker answers, acknowledgement orders and clock steps. The same rules run
against a real mosquitto (behind a PUBACK-rewriting proxy) in ``test_delivery_failures.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.backoff import Backoff
from daemon.alerts import AlertCode
from daemon.journal.records import ORIGIN_DELIVERY, ORIGIN_ENGINE, JournaledEvent
from daemon.mqtt.window import (
    PERMANENT_REASON_CODES,
    Ack,
    ClearFailing,
    DeadLetter,
    Decision,
    Delivered,
    DeliveryWindow,
    Fetch,
    RaiseFailing,
    Resend,
    RetryLater,
)

OK = 0x00


def event(seq: int, origin: str = ORIGIN_ENGINE, code: str | None = None) -> JournaledEvent:
    data = {} if code is None else {"code": code}
    return JournaledEvent(
        seq=seq,
        event_id=f"id-{seq}",
        kind="card_dealt" if code is None else "alert_raised",
        at=0.0,
        shoe_id=None,
        hand=None,
        source="reader",
        data=data,
        origin=origin,
        journaled_at=0.0,
    )


def ack(mid: int, code: int) -> Ack:
    return Ack(mid, code, code >= 0x80, "" if code < 0x80 else f"X (0x{code:02x})")


def window(size: int, retries: int) -> DeliveryWindow:
    # Delays without jitter: 1, 2, 4, 4, ... seconds.
    return DeliveryWindow(size, retries, Backoff(1.0, 4.0, low=1.0, high=1.0))


def describe(decision: Decision) -> str:
    match decision:
        case Delivered(seqs):
            return "delivered " + ",".join(map(str, seqs))
        case DeadLetter(ev, reason, alert):
            return f"dead {ev.seq}" + ("" if alert else " silently") + f": {reason}"
        case RetryLater(ev, _reason, refusals, delay):
            return f"retry {ev.seq} #{refusals} in {delay:g}"
        case RaiseFailing(ev, _reason):
            return f"raise failing at {ev.seq}"
        case ClearFailing():
            return "clear failing"
    raise AssertionError(decision)


def plan(value: Resend | Fetch | None) -> str | None:
    match value:
        case Resend(ev):
            return f"resend {ev.seq}"
        case Fetch(after, limit):
            return f"fetch after {after} up to {limit}"
    return None


# Steps: ("send", now) -> what next_send says; ("pub", seq, mid) publishes seq as mid (no
# output); ("acks", now, [(mid, code), ...]) -> the decisions, described.
Step = tuple[object, ...]

SCENARIOS: dict[str, tuple[int, int, list[tuple[Step, object]]]] = {
    "an empty window fetches as many as it has room for": (
        4,
        3,
        [
            (("send", 0.0), "fetch after 0 up to 4"),
            (("pub", 1, 11), None),
            (("pub", 2, 12), None),
            (("send", 0.0), "fetch after 2 up to 2"),
            (("pub", 3, 13), None),
            (("pub", 4, 14), None),
            (("send", 0.0), None),  # full
            (("acks", 0.0, [(11, OK), (12, OK)]), ["delivered 1,2"]),
            (("send", 0.0), "fetch after 4 up to 2"),
        ],
    ),
    "acknowledgements of other messages are ignored": (
        2,
        3,
        [
            (("pub", 1, 11), None),
            (("acks", 0.0, [(99, OK), (98, 0x87)]), []),
            (("send", 0.0), "fetch after 1 up to 1"),
        ],
    ),
    "a transient refusal waits for its backoff, alone, then goes out again": (
        4,
        3,
        [
            (("pub", 1, 11), None),
            (("pub", 2, 12), None),
            (("acks", 10.0, [(11, 0x97)]), ["retry 1 #1 in 1", "raise failing at 1"]),
            (("send", 10.5), None),  # backoff not over
            (("acks", 10.5, [(12, OK)]), ["delivered 2"]),  # 2 was already in flight
            (("send", 11.0), "resend 1"),
            (("pub", 1, 13), None),
            (("send", 11.0), None),  # nothing newer while 1 is out again
            (("acks", 11.0, [(13, OK)]), ["delivered 1", "clear failing"]),
            (("send", 11.0), "fetch after 2 up to 4"),
        ],
    ),
    "refused events go out again one at a time, lowest seq first": (
        4,
        5,
        [
            (("pub", 1, 11), None),
            (("pub", 2, 12), None),
            (("pub", 3, 13), None),
            (
                ("acks", 0.0, [(13, 0x80), (11, 0x97), (12, OK)]),
                ["retry 3 #1 in 1", "raise failing at 3", "retry 1 #1 in 2", "delivered 2"],
            ),
            (("send", 1.0), None),  # the second refusal moved the retry to 0 + 2 s
            (("send", 2.0), "resend 1"),
            (("pub", 1, 14), None),
            (("send", 2.0), None),
            (("acks", 2.0, [(14, 0x97)]), ["retry 1 #2 in 4"]),
            (("send", 5.9), None),
            (("send", 6.0), "resend 1"),
            (("pub", 1, 15), None),
            (("acks", 6.0, [(15, OK)]), ["delivered 1"]),  # 3 still waits: the alert stays
            (("send", 6.0), "resend 3"),
            (("pub", 3, 16), None),
            (("acks", 6.0, [(16, OK)]), ["delivered 3", "clear failing"]),
            (("send", 6.0), "fetch after 3 up to 4"),
        ],
    ),
    "refused once more than refused_retries: dead-lettered": (
        1,
        1,
        [
            (("pub", 1, 11), None),
            (("acks", 0.0, [(11, 0x83)]), ["retry 1 #1 in 1", "raise failing at 1"]),
            (("send", 1.0), "resend 1"),
            (("pub", 1, 12), None),
            (
                ("acks", 1.0, [(12, 0x83)]),
                ["dead 1: refused by the broker 2 times, last: X (0x83) (delivery.refused_retries = 1)"],
            ),
            (("send", 1.0), "fetch after 1 up to 1"),
            (("pub", 2, 13), None),
            (("acks", 1.0, [(13, OK)]), ["delivered 2", "clear failing"]),
        ],
    ),
    "refused_retries 0: the first transient refusal dead-letters": (
        2,
        0,
        [
            (("pub", 1, 11), None),
            (
                ("acks", 0.0, [(11, 0x97)]),
                ["dead 1: refused by the broker 1 times, last: X (0x97) (delivery.refused_retries = 0)"],
            ),
            (("send", 0.0), "fetch after 1 up to 2"),
        ],
    ),
    "a failed dead-letter alert is dead-lettered without a new alert": (
        2,
        3,
        [
            (("pub", 7, 11), None),  # seq 7: an mqtt_dead_letter alert itself (see below)
            (("acks", 0.0, [(11, 0x87)]), ["dead 7 silently: rejected by the broker: X (0x87)"]),
        ],
    ),
    "the failing alert clears only with an acknowledgement and nothing waiting": (
        2,
        3,
        [
            (("pub", 1, 11), None),
            (("pub", 2, 12), None),
            (("acks", 0.0, [(11, 0x97)]), ["retry 1 #1 in 1", "raise failing at 1"]),
            (("acks", 0.0, [(12, 0x87)]), ["dead 2: rejected by the broker: X (0x87)"]),
            (("send", 1.0), "resend 1"),
            (("pub", 1, 13), None),
            (("acks", 1.0, [(13, OK)]), ["delivered 1", "clear failing"]),
        ],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str) -> None:
    size, retries, steps = SCENARIOS[name]
    w = window(size, retries)
    for step, expected in steps:
        match step:
            case ("send", now):
                assert isinstance(now, float)
                assert plan(w.next_send(now)) == expected, step
            case ("pub", seq, mid):
                assert isinstance(seq, int)
                assert isinstance(mid, int)
                dead_letter_alert = event(seq, ORIGIN_DELIVERY, AlertCode.MQTT_DEAD_LETTER)
                w.published(dead_letter_alert if seq == 7 else event(seq), mid)
            case ("acks", now, answers):
                assert isinstance(now, float)
                assert isinstance(answers, list)
                decisions = w.acknowledged([ack(mid, code) for mid, code in answers], now)
                assert [describe(d) for d in decisions] == expected, step
            case _:
                raise AssertionError(step)


@pytest.mark.parametrize(
    ("code", "permanent"),
    [
        *[(code, True) for code in (0x87, 0x90, 0x95, 0x99)],
        *[(code, False) for code in (0x80, 0x83, 0x91, 0x97)],
    ],
)
def test_which_refusals_are_permanent(code: int, permanent: bool) -> None:
    assert (code in PERMANENT_REASON_CODES) is permanent
    w = window(1, 3)
    w.published(event(1), 11)
    [first, *_] = w.acknowledged([ack(11, code)], 0.0)
    assert isinstance(first, DeadLetter if permanent else RetryLater)
    assert w.refused_waiting == (0 if permanent else 1)


@pytest.mark.parametrize("waiting", [False, True])
def test_an_unsendable_event_is_dead_lettered_and_never_fetched_again(waiting: bool) -> None:
    w = window(2, 3)
    w.published(event(1), 11)
    if waiting:
        w.acknowledged([ack(11, 0x97)], 0.0)
        resend = w.next_send(5.0)
        assert isinstance(resend, Resend)
    decisions = w.unsendable(event(1), "packet too large")
    assert [describe(d) for d in decisions] == ["dead 1: packet too large"]
    assert w.refused_waiting == 0
    assert plan(w.next_send(5.0)) == ("fetch after 1 up to 1" if not waiting else "fetch after 1 up to 2")


def test_retry_wait_says_when_the_waiting_event_is_due() -> None:
    w = window(2, 3)
    assert w.retry_wait(0.0) is None
    w.published(event(1), 11)
    w.acknowledged([ack(11, 0x97)], 10.0)
    assert w.retry_wait(10.25) == 0.75
    assert w.retry_wait(12.0) == 0.0


# -- property ---------------------------------------------------------------------------------


@dataclass
class Broker:
    """A journal of ``n`` events and a broker answering with drawn reason codes."""

    n: int
    settled: dict[int, str] = field(default_factory=dict)  # seq -> "delivered" / "dead"
    unanswered: list[tuple[int, int]] = field(default_factory=list)  # (mid, seq) in flight
    refused: set[int] = field(default_factory=set)  # transiently refused, not yet settled
    fresh: list[int] = field(default_factory=list)  # seqs published for the first time
    retries: dict[int, int] = field(default_factory=dict)
    alert_open: bool = False
    next_mid: int = 1

    def send(self, w: DeliveryWindow, now: float) -> None:
        due = w.next_send(now)
        if isinstance(due, Resend):
            # one at a time, lowest seq first, only refused events
            assert not any(seq in self.refused for _, seq in self.unanswered)
            assert due.event.seq == min(self.refused)
            self._publish(w, due.event)
        elif isinstance(due, Fetch):
            assert not self.refused  # nothing newer while a refused event waits
            pending = [s for s in range(due.after_seq + 1, self.n + 1) if s not in self.settled]
            for seq in pending[: due.limit]:
                assert not self.fresh or seq > self.fresh[-1]  # new events in seq order, once
                self.fresh.append(seq)
                self._publish(w, event(seq))

    def _publish(self, w: DeliveryWindow, ev: JournaledEvent) -> None:
        w.published(ev, self.next_mid)
        self.unanswered.append((self.next_mid, ev.seq))
        self.next_mid += 1

    def answer(self, w: DeliveryWindow, index: int, code: int, now: float) -> None:
        mid, _seq = self.unanswered.pop(index % len(self.unanswered))
        for decision in w.acknowledged([ack(mid, code)], now):
            self.apply(decision)

    def apply(self, decision: Decision) -> None:
        match decision:
            case Delivered(seqs):
                for seq in seqs:
                    self._settle(seq, "delivered")
            case DeadLetter(ev, _reason, _alert):
                self._settle(ev.seq, "dead")
            case RetryLater(ev, _reason, refusals, _delay):
                self.refused.add(ev.seq)
                self.retries[ev.seq] = refusals
            case RaiseFailing():
                assert not self.alert_open
                self.alert_open = True
            case ClearFailing():
                assert self.alert_open
                assert not self.refused
                self.alert_open = False

    def _settle(self, seq: int, how: str) -> None:
        assert seq not in self.settled, f"seq {seq} settled twice"
        self.settled[seq] = how
        self.refused.discard(seq)


CODES = st.sampled_from([OK, OK, OK, 0x80, 0x83, 0x91, 0x97, 0x87, 0x90, 0x95, 0x99])


@given(
    n=st.integers(1, 12),
    size=st.integers(1, 4),
    refused_retries=st.integers(0, 3),
    script=st.lists(
        st.one_of(
            st.just(("send", 0, 0)),
            st.tuples(st.just("ack"), st.integers(0, 7), CODES),
            st.tuples(st.just("tick"), st.integers(0, 5), st.just(0)),
        ),
        max_size=80,
    ),
)
def test_every_event_ends_delivered_or_dead_lettered_exactly_once_in_order(
    n: int, size: int, refused_retries: int, script: list[tuple[str, int, int]]
) -> None:
    w = window(size, refused_retries)
    broker = Broker(n)
    now = 0.0
    for action, a, b in script:
        if action == "send":
            broker.send(w, now)
        elif action == "ack" and broker.unanswered:
            broker.answer(w, a, b, now)
        elif action == "tick":
            now += a
        assert w.inflight == len(broker.unanswered) <= size
    # Then a broker that acknowledges everything, in order: the rest goes through.
    for _ in range(4 * n + 8):
        if len(broker.settled) == n:
            break
        now += 10.0
        broker.send(w, now)
        while broker.unanswered:
            broker.answer(w, 0, OK, now)
    assert sorted(broker.settled) == list(range(1, n + 1))
    assert all(count <= refused_retries for count in broker.retries.values())
    assert w.inflight == 0
    assert w.refused_waiting == 0
    assert broker.alert_open == w.failing
