"""Broker refusals of events: transient reason codes are retried with backoff (an alert open
while it fails, cleared when delivery resumes) at most ``delivery.refused_retries`` times, one
refused event at a time and nothing newer meanwhile; permanent ones are dead-lettered.

A real mosquitto behind :class:`tests.mqtt.puback_proxy.PubackProxy`, which changes the
reason code of chosen PUBACKs (mosquitto cannot be made to refuse transiently). The ACL
denial (0x87) from mosquitto itself is in ``test_tls_acl.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from daemon.alerts import AlertCode
from daemon.journal import Journal
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.secrets import Secret
from tests.mqtt.conftest import TABLE, card_event, make_settings
from tests.mqtt.puback_proxy import PubackProxy
from tests.mqtt.support import Subscriber, validate_payload
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

EVENTS = f"baccarat/v1/{TABLE}/events"


@pytest.fixture
def proxy(mosquitto: MosquittoBroker) -> Iterator[PubackProxy]:
    p = PubackProxy(mosquitto.port)
    yield p
    p.close()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def delivery_alerts(journal: Journal) -> list[tuple[str, str, str]]:
    """(kind, code, alert_id) of the delivery side's alerts, in order."""
    return [
        (e.kind, e.data.get("code", ""), e.data["alert_id"])
        for e in journal.events(origin=None)
        if e.kind.startswith("alert")
    ]


@pytest.mark.parametrize("code", [0x97, 0x80, 0x83, 0x91])
def test_a_transient_refusal_is_retried_and_alerted_until_delivery_resumes(
    code: int,
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    events_key: Secret,
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    sub = Subscriber(mosquitto.port, [EVENTS])
    proxy.fail_next(3, code, lambda topic: topic == EVENTS)
    publisher = make_publisher(make_settings(proxy.port, keys, inflight_window=1), TABLE, journal)
    journal.append([], [card_event(n) for n in range(6)])
    publisher.notify()
    wait_until(lambda: not journal.pending(), "every event and alert delivered")

    assert proxy.failed == 3
    assert publisher.counters.delivery_retries == 3
    assert publisher.counters.dead_lettered == 0
    assert journal.dead_letters() == []
    [raised, cleared] = delivery_alerts(journal)
    assert raised[:2] == ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING)
    assert cleared[0] == "alert_cleared"
    assert cleared[2] == raised[2]
    assert "delivery_failing" not in publisher.health()

    last = journal.last_seq()
    messages = sub.wait_for(lambda msgs: {m.json()["seq"] for m in msgs} >= set(range(1, last + 1)))
    sub.close()
    consumer = EventConsumer(TABLE, key=events_key)
    for message in messages:
        validate_payload(message.topic, message.payload)
        assert consumer.feed(message.payload).verdict in (Verdict.NEW, Verdict.DUPLICATE)
    assert consumer.unexplained_gaps == []
    assert consumer.highest_seq == last
    # The broker had each refused copy (only its PUBACK said otherwise): seq 1 went out
    # four times, three refused and one acknowledged, before anything newer (window of one).
    arrivals = [m.json()["seq"] for m in messages]
    assert arrivals[:4] == [1, 1, 1, 1]


def test_the_alert_stays_open_while_the_broker_keeps_refusing(
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    proxy.fail_next(1_000_000, 0x97, lambda topic: topic == EVENTS)
    settings = make_settings(proxy.port, keys, inflight_window=4, refused_retries=1000)
    publisher = make_publisher(settings, TABLE, journal)
    journal.append([], [card_event(n) for n in range(3)])
    publisher.notify()
    wait_until(lambda: publisher.counters.delivery_retries >= 8, "several retries")
    assert [(kind, code) for kind, code, _ in delivery_alerts(journal)] == [
        ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING)
    ]
    health = publisher.health()
    validate_payload("x/health", json.dumps({"schema_version": 1, **health}).encode())
    assert health["delivery_failing"]["events_waiting"] >= 1
    assert health["queue_depth"] == 4  # three cards and the alert, none lost, none dead-lettered
    assert journal.dead_letters() == []


def event_arrivals(sub: Subscriber, last: int) -> list[int]:
    """The ``seq`` of every copy the subscriber got, once every seq up to ``last`` arrived."""
    messages = sub.wait_for(lambda msgs: {m.json()["seq"] for m in msgs} >= set(range(1, last + 1)))
    sub.close()
    for message in messages:
        validate_payload(message.topic, message.payload)
    return [m.json()["seq"] for m in messages]


@pytest.mark.parametrize(("code", "window"), [(0x80, 1), (0x83, 4), (0x97, 4)])
def test_an_event_refused_past_refused_retries_is_dead_lettered_and_nothing_newer_overtakes_it(
    code: int,
    window: int,
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    sub = Subscriber(mosquitto.port, [EVENTS])
    proxy.refuse_seq(2, code, times=1_000_000)
    settings = make_settings(proxy.port, keys, inflight_window=window, refused_retries=2)
    journal.append([], [card_event(n) for n in range(6)])
    publisher = make_publisher(settings, TABLE, journal)
    wait_until(lambda: not journal.pending(), "everything but seq 2 delivered")

    [dead] = journal.dead_letters()
    assert dead.seq == 2
    assert "refused by the broker 3 times, last: " in (dead.dead_letter or "")
    assert f"(0x{code:02x})" in (dead.dead_letter or "")
    assert proxy.failed == 3  # the first copy and two retries
    assert publisher.counters.delivery_retries == 2
    assert publisher.counters.dead_lettered == 1
    alerts = delivery_alerts(journal)
    assert [(kind, alert_code) for kind, alert_code, _ in alerts] == [
        ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING),  # seq 7, at the first refusal
        ("alert_raised", AlertCode.MQTT_DEAD_LETTER),  # seq 8, names seq 2
        ("alert_cleared", AlertCode.MQTT_DELIVERY_FAILING),  # seq 9, once seq 5 was acknowledged
    ]
    assert alerts[2][2] == alerts[0][2]
    dead_alert = next(
        e for e in journal.events(origin=None) if e.data.get("code") == AlertCode.MQTT_DEAD_LETTER
    )
    assert (dead_alert.data["seq"], dead_alert.data["event_id"]) == (2, dead.event_id)
    assert "delivery_failing" not in publisher.health()
    arrivals = event_arrivals(sub, 9)
    if window == 1:
        assert arrivals == [1, 2, 2, 2, 3, 4, 5, 6, 7, 8, 9]
    first_retry = arrivals.index(2, arrivals.index(2) + 1)
    last_copy = len(arrivals) - 1 - arrivals[::-1].index(2)
    # Before its first retry only what was already in flight with seq 2 when the refusal
    # came back (at most window - 1 newer events); from then on only seq 2 until it was
    # dead-lettered; then the rest in order, each once.
    assert all(seq < 2 + window for seq in arrivals[:first_retry])
    assert arrivals[first_retry : last_copy + 1] == [2, 2]
    others = [seq for seq in arrivals if seq != 2]
    assert others == [1, *range(3, 10)]


def test_refused_events_are_retried_one_at_a_time_lowest_seq_first(
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    sub = Subscriber(mosquitto.port, [EVENTS])
    proxy.refuse_seq(1, 0x97, times=2)
    proxy.refuse_seq(3, 0x80, times=1)
    settings = make_settings(proxy.port, keys, inflight_window=4, refused_retries=5)
    journal.append([], [card_event(n) for n in range(6)])
    publisher = make_publisher(settings, TABLE, journal)
    wait_until(lambda: not journal.pending(), "every event and alert delivered")

    assert journal.dead_letters() == []
    assert publisher.counters.delivery_retries == 3
    assert [(kind, code) for kind, code, _ in delivery_alerts(journal)] == [
        ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING),
        ("alert_cleared", AlertCode.MQTT_DELIVERY_FAILING),
    ]
    # 1-4 were in flight together; then 1 again (refused), 1 (acknowledged), 3, and only
    # then anything newer: 5, 6 and the two alerts.
    assert event_arrivals(sub, 8) == [1, 2, 3, 4, 1, 1, 3, 5, 6, 7, 8]


def test_refused_retries_is_validated() -> None:
    from pydantic import ValidationError

    from daemon.mqtt.settings import DeliverySettings

    assert DeliverySettings().refused_retries == 10
    assert DeliverySettings(refused_retries=0).refused_retries == 0
    for bad in (-1, 1001, "many"):
        with pytest.raises(ValidationError, match="refused_retries"):
            DeliverySettings.model_validate({"refused_retries": bad})


@pytest.mark.parametrize("code", [0x90, 0x99])
def test_a_permanent_refusal_is_dead_lettered_once(
    code: int,
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    proxy.fail_next(1, code, lambda topic: topic == EVENTS)
    publisher = make_publisher(make_settings(proxy.port, keys), TABLE, journal)
    journal.append([], [card_event(n) for n in range(3)])
    publisher.notify()
    wait_until(lambda: not journal.pending(), "the rest delivered")
    [dead] = journal.dead_letters()
    assert f"0x{code:02x}" in (dead.dead_letter or "")
    assert publisher.counters.delivery_retries == 0
    [(kind, alert_code, _)] = delivery_alerts(journal)
    assert (kind, alert_code) == ("alert_raised", AlertCode.MQTT_DEAD_LETTER)


def test_an_event_above_the_brokers_packet_limit_is_dead_lettered_before_sending(
    tmp_path: Path,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    from daemon.journal import DeliveryEvent

    # mosquitto announces max_packet_size in its CONNACK and drops the connection of a client
    # that exceeds it (no PUBACK 0x95): the publisher must not send such an event at all.
    broker = MosquittoBroker(tmp_path / "broker", extra_config="max_packet_size 4096\n")
    broker.start()
    try:
        sub = Subscriber(broker.port, [EVENTS])
        huge = DeliveryEvent(kind="card_dealt", at=1.0, data={"pad": "x" * 6000}, source="reader")
        journal.append([], [card_event(0), huge, card_event(2)])
        publisher = make_publisher(make_settings(broker.port, keys), TABLE, journal)
        wait_until(lambda: not journal.pending(), "the others and the alert delivered")
        messages = sub.wait_for(lambda msgs: len(msgs) >= 3)
        sub.close()
        health = publisher.health()
    finally:
        broker.stop()
    [dead] = journal.dead_letters()
    assert dead.seq == 2
    assert "packet too large (0x95)" in (dead.dead_letter or "")
    assert "at most 4096" in (dead.dead_letter or "")
    assert [m.json()["seq"] for m in messages] == [1, 3, 4]  # the dead-letter alert is seq 4
    assert messages[2].json()["data"]["code"] == AlertCode.MQTT_DEAD_LETTER
    assert health["counters"]["connects"] == 1  # never disconnected by the broker


def test_a_new_publisher_clears_the_failing_alert_the_old_one_raised(
    mosquitto: MosquittoBroker,
    proxy: PubackProxy,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    """A SIGHUP swap (here to another broker address) or a restart while the broker refuses:
    the episode keeps its one alert, cleared by the publisher that sees delivery resume."""
    proxy.fail_next(10_000, 0x97, lambda topic: topic == EVENTS)
    first = make_publisher(make_settings(proxy.port, keys, inflight_window=1), TABLE, journal)
    journal.append([], [card_event(n) for n in range(3)])
    first.notify()
    wait_until(lambda: len(delivery_alerts(journal)) == 1, "the failing alert raised")
    first.stop(timeout=2.0)
    [(kind, code, raised_id)] = delivery_alerts(journal)
    assert (kind, code) == ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING)

    second = make_publisher(make_settings(mosquitto.port, keys, inflight_window=1), TABLE, journal)
    wait_until(lambda: not journal.pending(), "every event and the clear delivered")
    assert delivery_alerts(journal) == [
        ("alert_raised", AlertCode.MQTT_DELIVERY_FAILING, raised_id),
        ("alert_cleared", AlertCode.MQTT_DELIVERY_FAILING, raised_id),
    ]
    assert journal.dead_letters() == []
    assert "delivery_failing" not in second.health()
