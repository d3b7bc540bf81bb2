"""The game server's acknowledgement at the table (issue #13): verified, stored, resent after a
reconnect, the resend command, the rollback sign, the lag alert, health, compaction."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from daemon.alerts import AlertCode
from daemon.journal import ContinuityKind, Journal, JournalSettings
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.resend import ResendQueue
from daemon.mqtt.server_ack import AckClaim, Lag, LagRule, check_ack
from daemon.mqtt.settings import BrokerSettings, ServerAckSettings
from daemon.mqtt.topics import TableTopics
from tests.mqtt.ack_support import ack_settings, key_files, load_key, publish, signed_ack, wait_until
from tests.mqtt.conftest import TABLE, card_event
from tests.mqtt.support import Subscriber, signed_command, validate_payload
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

TOPICS = TableTopics(TABLE)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return key_files(tmp_path)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "broker") as b:
        yield b


def _events_seqs(sub: Subscriber) -> list[int]:
    return [m.json()["seq"] for m in sub.on("events")]


def _alerts(sub: Subscriber, code: AlertCode, kind: str = "alert_raised") -> list[dict[str, Any]]:
    return [
        m.json()["data"]
        for m in sub.on("events")
        if m.json()["kind"] == kind and m.json()["data"].get("code") == code
    ]


def _start(
    make_publisher: Callable[..., Publisher],
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    **server_ack: Any,
) -> Publisher:
    publisher = make_publisher(ack_settings(broker.port, files, **server_ack), TABLE, journal)
    assert publisher.connection.ack_subscribed.wait(10), "the table did not subscribe to ack"
    return publisher


# -- verification (no broker) ----------------------------------------------------------------


def test_only_a_signed_game_server_ack_for_this_table_is_believed(files: dict[str, Path]) -> None:
    keyring = Keyring.load(ack_settings(1883, files).signing)
    gs, sup = load_key(files, "gs-1"), load_key(files, "sup-anna")
    event_id = str(uuid.uuid4())
    good = signed_ack(gs, "gs-1", 7, event_id)
    validate_payload("x/ack", json.dumps(good).encode())
    assert check_ack(json.dumps(good).encode(), TABLE, keyring) == AckClaim(7, event_id, "gs-1")
    # a server whose JSON library writes every number as a double: 37.0 is the integer 37
    chained = signed_ack(gs, "gs-1", 37.0, event_id, chain=("ab" * 32, event_id))
    validate_payload("x/ack", json.dumps(chained).encode())
    assert b"37.0" in json.dumps(chained).encode()
    assert check_ack(json.dumps(chained).encode(), TABLE, keyring) == AckClaim(
        37, event_id, "gs-1", "ab" * 32, event_id
    )
    tampered = {**good, "seq": 8}
    cases: dict[str, bytes] = {
        "signature does not match": json.dumps(tampered).encode(),
        "lacks the game_server role": json.dumps(signed_ack(sup, "sup-anna", 7, event_id)).encode(),
        "unknown key_id": json.dumps(signed_ack(gs, "gs-9", 7, event_id)).encode(),
        "for table 'T2'": json.dumps(signed_ack(gs, "gs-1", 7, event_id, table="T2")).encode(),
        "malformed": json.dumps({**good, "seq": 0}).encode(),
        "seq: ": json.dumps(signed_ack(gs, "gs-1", 37.5, event_id)).encode(),
        "not UTF-8 JSON": b"\xff{",
        "must be a JSON object": b"[1]",
        "bytes, the limit": b" " * 5000,
    }
    for why, payload in cases.items():
        outcome = check_ack(payload, TABLE, keyring)
        assert isinstance(outcome, str), why
        assert why in outcome, (why, outcome)


def test_the_server_ack_needs_a_game_server_key(files: dict[str, Path]) -> None:
    settings = ack_settings(1883, files)
    without = settings.signing.model_copy(
        update={"command_keys": tuple(k for k in settings.signing.command_keys if k.key_id != "gs-1")}
    )
    with pytest.raises(ValidationError, match="role game_server"):
        BrokerSettings.model_validate({**settings.model_dump(), "signing": without.model_dump()})
    off = settings.delivery.model_copy(update={"server_ack": ServerAckSettings(enabled=False)})
    BrokerSettings.model_validate(
        {**settings.model_dump(), "signing": without.model_dump(), "delivery": off.model_dump()}
    )


def test_lag_opens_past_a_limit_and_closes_at_half() -> None:
    rule = LagRule(ServerAckSettings(enabled=True, max_lag_events=10, max_lag_s=60))
    assert rule.exceeded(Lag(10, 59.0)) is None
    assert "11 events" in (rule.exceeded(Lag(11, 1.0)) or "")
    assert "61 s ago" in (rule.exceeded(Lag(1, 61.0)) or "")
    assert not rule.caught_up(Lag(6, 1.0))
    assert not rule.caught_up(Lag(1, 31.0))
    assert rule.caught_up(Lag(5, 30.0))
    assert rule.caught_up(Lag(0, None))


def test_the_resend_queue_merges_bounds_and_skips_what_the_broker_did_not_acknowledge(
    journal: Journal,
) -> None:
    events = journal.append([], [card_event(n) for n in range(1, 11)])
    journal.mark_delivered([e.seq for e in events if e.seq not in (4, 5)])
    journal.mark_dead_letter(5, "refused")
    queue = ResendQueue(max_events=8)
    assert queue.request(2, 3)
    assert queue.request(4, 6)
    assert not queue.request(1, 9), "more than max_events queued"
    assert queue.waiting == 5
    assert [e.seq for e in queue.take(journal, 2)] == [2, 3]
    assert [e.seq for e in queue.take(journal, 10)] == [6]  # 4 not acknowledged, 5 dead-lettered
    assert queue.waiting == 0
    assert queue.request(1, 10, bounded=False)
    queue.drop_through(8)
    assert [e.seq for e in queue.take(journal, 10)] == [9, 10]


def test_compaction_keeps_every_event_the_server_has_not_acknowledged(tmp_path: Path) -> None:
    def run(required: bool, acknowledged: int) -> list[int]:
        path = tmp_path / f"j-{required}-{acknowledged}.sqlite3"
        j = Journal(JournalSettings(path=path, audit_retention_days=0), TABLE)
        try:
            old = j.append([], [card_event(n, shoe="A") for n in range(1, 7)])
            j.append([], [card_event(n, shoe="B") for n in range(7, 9)])
            j.mark_delivered(range(1, 9))  # the broker acknowledged everything
            j.require_server_ack(required)
            j.record_server_ack(acknowledged, old[acknowledged - 1].event_id)
            j.compact(now=time.time() + 10)
            return [e.seq for e in j.events(origin=None)]
        finally:
            j.close()

    # shoes go whole (compaction's rule): shoe A only once the server acknowledged all of it
    assert run(required=True, acknowledged=3) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert run(required=True, acknowledged=6) == [7, 8]
    assert run(required=False, acknowledged=3) == [7, 8]  # PUBACK-based


# -- with a real broker ------------------------------------------------------------------------


def test_acks_are_stored_reported_and_the_unacknowledged_go_out_after_a_reconnect(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    events = journal.append([], [card_event(n) for n in range(1, 9)])
    sub = Subscriber(broker.port, [TOPICS.events, TOPICS.health])
    publisher = _start(make_publisher, broker, files, journal)
    sub.wait_for(lambda _: set(_events_seqs(sub)) >= set(range(1, 9)))
    wait_until(lambda: journal.undelivered_count() == 0, what="PUBACKs")
    report = publisher.health()
    validate_payload("x/health", json.dumps({"schema_version": 1, **report}).encode())
    assert report["delivery"]["server_ack"]["enabled"] is True
    assert report["delivery"]["server_ack"]["seq"] is None
    assert report["delivery"]["server_ack"]["lag_events"] == 8
    gs = load_key(files, "gs-1")
    publish(broker.port, TOPICS.ack, signed_ack(gs, "gs-1", 5, events[4].event_id), retain=True)
    wait_until(lambda: journal.server_ack().seq == 5, what="the stored acknowledgement")
    assert journal.server_ack().event_id == events[4].event_id
    server_ack = publisher.health()["delivery"]["server_ack"]
    assert server_ack["seq"] == 5
    assert server_ack["lag_events"] == 3
    assert server_ack["lag_s"] >= 0
    # the broker's word (PUBACK) is not the server's: after a reconnect 6-8 go out again, 1-5 not
    before = len(sub.on("events"))
    publisher.connection.client.disconnect()
    sub.wait_for(lambda msgs: len(sub.on("events")) >= before + 3)
    wait_until(lambda: publisher.counters.resent >= 3, what="the resend")
    assert sorted(_events_seqs(sub)[before:]) == [6, 7, 8]
    publish(broker.port, TOPICS.ack, signed_ack(gs, "gs-1", 8, events[7].event_id), retain=True)
    wait_until(lambda: publisher.health()["delivery"]["server_ack"]["lag_events"] == 0, what="lag 0")
    health = sub.wait_for(
        lambda _: any(m.json()["delivery"]["server_ack"]["seq"] == 8 for m in sub.on("health"))
    )
    for message in health:
        validate_payload(message.topic, message.payload)
    sub.close()


def test_the_resend_command_republishes_a_range_and_refuses_bad_ones(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    journal.append([], [card_event(n) for n in range(1, 9)])
    sub = Subscriber(broker.port, [TOPICS.events, TOPICS.cmd_reply])
    publisher = _start(make_publisher, broker, files, journal, resend_max_events=5)
    assert publisher.subscribed.wait(10)
    sub.wait_for(lambda _: set(_events_seqs(sub)) >= set(range(1, 9)))
    wait_until(lambda: journal.undelivered_count() == 0, what="PUBACKs")
    gs, sup = load_key(files, "gs-1"), load_key(files, "sup-anna")

    def send(key: Any, key_id: str, args: Any) -> dict[str, Any]:
        command = signed_command(key, TABLE, "resend", args, key_id=key_id)
        validate_payload("x/cmd", json.dumps(command).encode())
        publish(broker.port, TOPICS.cmd, command)
        replies = sub.wait_for(
            lambda _: any(m.json()["command_id"] == command["command_id"] for m in sub.on("cmd/reply"))
        )
        reply = next(
            m
            for m in replies
            if m.topic.endswith("cmd/reply") and m.json()["command_id"] == command["command_id"]
        )
        validate_payload(reply.topic, reply.payload)
        return reply.json()

    before = len(sub.on("events"))
    reply = send(gs, "gs-1", {"from_seq": 2, "to_seq": 4})
    assert reply["status"] == "accepted", reply
    sub.wait_for(lambda _: len(sub.on("events")) >= before + 3)
    assert _events_seqs(sub)[before : before + 3] == [2, 3, 4]
    # past the end (the server's idea of the end is stale): served to the end, answered with it
    reply = send(gs, "gs-1", {"from_seq": 7.0, "to_seq": 99})
    assert reply["status"] == "accepted", reply
    assert "the journal ends at seq 8" in reply["reason"]
    for _ in range(3):  # asked again and again: answered each time, never journaled
        reply = send(gs, "gs-1", {"from_seq": 50, "to_seq": 60})
        assert reply["status"] == "accepted", reply
        assert "nothing to send from seq 50: the journal ends at seq 8" in reply["reason"]
    refused = {
        "below from_seq": ({"from_seq": 4, "to_seq": 3}, "bad_range"),
        "must be an integer": ({"from_seq": 1.5, "to_seq": 3}, "bad_range"),
        "exactly from_seq and to_seq": ({"from_seq": 1}, "bad_range"),
        "at most 5 per command": ({"from_seq": 1, "to_seq": 8}, "range_too_large"),
    }
    for why, (args, code) in refused.items():
        reply = send(gs, "gs-1", args)
        assert (reply["status"], reply["code"]) == ("refused", code), (why, reply)
        assert why in reply["reason"]
    reply = send(sup, "sup-anna", {"from_seq": 1, "to_seq": 2})
    assert reply["code"] == "forbidden"
    refusals = [e for e in journal.events(origin=None) if e.kind == "command_refused"]
    assert {e.data["code"] for e in refusals} == {"bad_range", "range_too_large", "forbidden"}
    sub.close()


def test_an_ack_naming_another_event_or_ahead_of_the_journal_is_a_rollback(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    events = journal.append([], [card_event(n) for n in range(1, 6)])
    old_epoch = journal.journal_id
    sub = Subscriber(broker.port, [TOPICS.events])
    publisher = _start(make_publisher, broker, files, journal)
    sub.wait_for(lambda _: set(_events_seqs(sub)) >= set(range(1, 6)))
    gs = load_key(files, "gs-1")
    # the server processed seq 3 as an event this journal never issued: another epoch
    publish(broker.port, TOPICS.ack, signed_ack(gs, "gs-1", 3, str(uuid.uuid4())), retain=True)
    sub.wait_for(lambda _: bool(_alerts(sub, AlertCode.JOURNAL_ROLLED_BACK)))
    (alert,) = _alerts(sub, AlertCode.JOURNAL_ROLLED_BACK)
    assert alert["severity"] == "critical"
    assert alert["acknowledged_seq"] == 3
    # the current epoch's ids are fresh already (every open starts one): nothing to change
    assert alert["old_journal_id"] == old_epoch == journal.journal_id == alert["new_journal_id"]
    # nothing of this journal was ever acknowledged and it has one epoch: all of it is in doubt
    assert (alert["restore_seq"], alert["first_lost_seq"], alert["detected_by"]) == (0, 1, "server_ack")
    assert journal.continuity.kind is ContinuityKind.ROLLBACK
    assert journal.server_ack().seq == 0, "a rollback sign is never accepted"
    # known now: an acknowledgement of the lost epoch, even ahead, raises nothing more
    publish(broker.port, TOPICS.ack, signed_ack(gs, "gs-1", 50, str(uuid.uuid4())), retain=True)
    journal.append_delivery_event(card_event(6))
    publisher.notify()
    sub.wait_for(lambda _: 7 in _events_seqs(sub))
    publish(broker.port, TOPICS.ack, signed_ack(gs, "gs-1", 4, events[3].event_id), retain=True)
    wait_until(lambda: journal.server_ack().seq == 4, what="a good acknowledgement after the rollback")
    assert len(_alerts(sub, AlertCode.JOURNAL_ROLLED_BACK)) == 1
    sub.close()


def test_an_ack_ahead_of_the_journal_is_a_rollback(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    journal.append([], [card_event(n) for n in range(1, 4)])
    sub = Subscriber(broker.port, [TOPICS.events])
    # retained before the table connects: it is the first thing the table hears
    publish(broker.port, TOPICS.ack, signed_ack(load_key(files, "gs-1"), "gs-1", 40, str(uuid.uuid4())), True)
    _start(make_publisher, broker, files, journal)
    sub.wait_for(lambda _: bool(_alerts(sub, AlertCode.JOURNAL_ROLLED_BACK)))
    (alert,) = _alerts(sub, AlertCode.JOURNAL_ROLLED_BACK)
    assert (alert["acknowledged_seq"], alert["journal_seq"]) == (40, 3)
    assert "journal ends at seq 3" in alert["message"]
    sub.close()


def test_the_lag_alert_opens_and_closes(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    journal.append([], [card_event(n) for n in range(1, 13)])
    sub = Subscriber(broker.port, [TOPICS.events])
    publisher = _start(make_publisher, broker, files, journal, max_lag_events=10)
    sub.wait_for(lambda _: bool(_alerts(sub, AlertCode.SERVER_ACK_LAGGING)))
    (raised,) = _alerts(sub, AlertCode.SERVER_ACK_LAGGING)
    assert (raised["severity"], raised["acknowledged_seq"], raised["lag_events"]) == ("warning", 0, 12)
    wait_until(lambda: journal.last_seq() == 13 and journal.undelivered_count() == 0, what="the alert out")
    last = journal.get(13)
    assert last is not None
    publish(
        broker.port, TOPICS.ack, signed_ack(load_key(files, "gs-1"), "gs-1", 13, last.event_id), retain=True
    )
    sub.wait_for(lambda _: bool(_alerts(sub, AlertCode.SERVER_ACK_LAGGING, "alert_cleared")))
    (cleared,) = _alerts(sub, AlertCode.SERVER_ACK_LAGGING, "alert_cleared")
    assert cleared["alert_id"] == raised["alert_id"]
    assert publisher.health()["delivery"]["server_ack"]["seq"] == 13
    for message in sub.on("events"):
        validate_payload(message.topic, message.payload)
    sub.close()


def test_without_a_game_server_nothing_waits(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    journal.append([], [card_event(n) for n in range(1, 4)])
    publisher = make_publisher(ack_settings(broker.port, files, enabled=False), TABLE, journal)
    wait_until(lambda: journal.undelivered_count() == 0, what="PUBACKs")
    assert publisher.health()["delivery"]["server_ack"] == {
        "enabled": False,
        "seq": None,
        "lag_events": 0,
        "lag_s": None,
    }
    assert journal.server_ack().required is False
    assert not publisher.connection.ack_subscribed.is_set()


def _journaled_alerts(journal: Journal, code: AlertCode) -> list[tuple[str, str]]:
    return [
        (e.kind, e.data["alert_id"])
        for e in journal.events(origin=None)
        if e.kind.startswith("alert") and e.data.get("code") == code
    ]


def test_a_new_publisher_goes_on_with_the_open_lag_alert(
    broker: MosquittoBroker,
    files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    """A restart or a SIGHUP swap while the lag alert is open: one raise, one clear, same id."""
    journal.append([], [card_event(n) for n in range(1, 13)])
    first = _start(make_publisher, broker, files, journal, max_lag_events=10)
    wait_until(lambda: journal.last_seq() == 13 and journal.undelivered_count() == 0, what="the alert out")
    first.stop(timeout=2.0)
    [(kind, raised_id)] = _journaled_alerts(journal, AlertCode.SERVER_ACK_LAGGING)
    assert kind == "alert_raised"
    second = _start(make_publisher, broker, files, journal, max_lag_events=10)
    journal.append([], [card_event(13)])  # seq 14: the lag goes on under the new publisher
    wait_until(lambda: journal.undelivered_count() == 0, what="seq 14 out")
    last = journal.get(14)
    assert last is not None
    publish(
        broker.port, TOPICS.ack, signed_ack(load_key(files, "gs-1"), "gs-1", 14, last.event_id), retain=True
    )
    wait_until(lambda: len(_journaled_alerts(journal, AlertCode.SERVER_ACK_LAGGING)) == 2, what="the clear")
    assert _journaled_alerts(journal, AlertCode.SERVER_ACK_LAGGING) == [
        ("alert_raised", raised_id),
        ("alert_cleared", raised_id),
    ]
    assert second.health()["delivery"]["server_ack"]["seq"] == 14


@settings(max_examples=60, deadline=None)
@given(
    seq=st.integers(min_value=1, max_value=2**53),
    as_double=st.booleans(),
    fraction=st.sampled_from([0.0, 0.5, 0.25]),
)
def test_an_integral_number_is_the_integer_and_a_fraction_is_refused_by_name(
    tmp_path_factory: pytest.TempPathFactory, seq: int, as_double: bool, fraction: float
) -> None:
    files = key_files(tmp_path_factory.mktemp("keys"))
    keyring = Keyring.load(ack_settings(1883, files).signing)
    event_id = str(uuid.uuid4())
    value: float = float(seq) + fraction if (as_double or fraction) else seq
    payload = json.dumps(signed_ack(load_key(files, "gs-1"), "gs-1", value, event_id)).encode()
    outcome = check_ack(payload, TABLE, keyring)
    if float(value).is_integer():  # an integral number (a double may not hold the fraction)
        assert outcome == AckClaim(int(value), event_id, "gs-1")
    else:
        assert isinstance(outcome, str)
        assert "seq" in outcome
