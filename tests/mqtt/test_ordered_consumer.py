"""The reference consumer with its durable checkpoint: once, in order, gap fills, acks, rollbacks."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.alerts import AlertCode
from daemon.mqtt.canonical import canonical_json
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer import Verdict
from daemon.mqtt.keyring import CommandKey, Keyring
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import Secret
from daemon.mqtt.server_ack import AckClaim, check_ack
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign
from tests.mqtt.support import validate_payload

KEY = Secret(b"table-events-key-0123", "test")
GS = Secret(b"game-server-key-0123", "test")


def envelope(
    seq: int, epoch: str = "e1", kind: str = "card_dealt", data: dict[str, Any] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "schema_version": 1,
        "event_id": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{epoch}/T1/{seq}")),
        "seq": seq,
        "table_id": "T1",
        "shoe_id": "S1",
        "hand": 1,
        "kind": kind,
        "ts": 1000.0 + seq,
        "published_at": 2000.0,
        "source": "system" if kind.startswith("alert") else "reader",
        "data": data if data is not None else {"card": "8s", "slot": "P1"},
    }
    message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
    return message


def consumer(path: Path) -> OrderedConsumer:
    return OrderedConsumer("T1", Checkpoint(path, "T1"), KEY)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_every_event_once_in_order_whatever_the_arrival(tmp_path_factory: Any, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 40))
    arrivals = data.draw(st.lists(st.integers(1, n), max_size=3 * n))
    order = data.draw(st.permutations([*range(1, n + 1), *arrivals]))
    restart_at = data.draw(st.integers(0, len(order)))
    path = tmp_path_factory.mktemp("c") / "checkpoint.sqlite3"
    c = consumer(path)
    processed: list[int] = []
    queue = list(order)
    i = 0
    while queue:
        if i == restart_at:
            # a crash after a commit: the table sends again what was not acknowledged
            committed = c.commit()
            c.checkpoint.close()
            c = consumer(path)
            queue.extend(range(committed + 1, n + 1))
        fed = c.feed(envelope(queue.pop(0)), now=float(i))
        assert fed.verdict in (Verdict.NEW, Verdict.DUPLICATE)
        processed.extend(e["seq"] for e in fed.processed)
        i += 1
    assert processed == list(range(1, n + 1))
    assert c.position == n
    assert c.missing == []
    assert [s for s, _ in c.checkpoint.processed_seqs()] == list(range(1, n + 1))
    c.checkpoint.close()


def test_a_conflict_is_reported_and_never_processed(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    c.feed(envelope(1), 0.0)
    c.feed(envelope(3), 0.0)
    for payload, why in (
        (envelope(1, epoch="other"), "processed as event"),
        (envelope(3, epoch="other"), "arrived as"),
        ({**envelope(1), "data": {"card": "9s", "slot": "P1"}}, "signature"),
    ):
        fed = c.feed(payload, 0.0)
        assert fed.verdict in (Verdict.CONFLICT, Verdict.REJECTED)
        assert fed.processed == ()
        assert why in (fed.reason or "")
    assert c.stats.conflicts == 2
    changed = envelope(1)
    changed["data"] = {"card": "9s", "slot": "P1"}
    del changed["sig"]
    changed["sig"] = sign(changed, KEY, UNSIGNED_EVENT_FIELDS)
    fed = c.feed(changed, 0.0)
    assert fed.verdict is Verdict.CONFLICT
    assert "other content" in (fed.reason or "")


def test_gaps_are_asked_for_after_a_grace_and_again_while_open(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    c.feed(envelope(1), 0.0)
    c.feed(envelope(5), 0.0)
    assert c.gaps(0.5) == []  # may only be late
    assert c.gaps(1.0) == [(2, 4)]
    assert c.gaps(2.0) == []
    assert c.gaps(6.0) == [(2, 4)]
    c.note_last_seq(9, 6.0)
    for seq in (2, 3, 4):
        c.feed(envelope(seq), 7.0)
    assert c.position == 5
    assert c.missing == [6, 7, 8, 9]
    assert c.gaps(8.5) == [(6, 9)]


def test_a_dead_lettered_seq_is_skipped_on_its_alerts_word(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    c.feed(envelope(1), 0.0)
    lost_id = envelope(2)["event_id"]
    alert = envelope(
        3,
        kind="alert_raised",
        data={
            "alert_id": "delivery-0123456789ab",
            "code": AlertCode.MQTT_DEAD_LETTER.value,
            "seq": 2,
            "event_id": lost_id,
            "event_kind": "card_dealt",
            "message": "refused",
            "severity": "critical",
        },
    )
    fed = c.feed(alert, 0.0)
    assert [e["seq"] for e in fed.processed] == [3]
    assert c.position == 3
    assert c.checkpoint.processed(2) is not None


def test_a_rolled_back_journal_is_reported_and_followed(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    for seq in range(1, 11):
        c.feed(envelope(seq), 0.0)
    c.commit()
    # the table was restored to seq 6 and goes on in a new epoch: its alert comes first
    rolled = envelope(
        7,
        epoch="e2",
        kind="alert_raised",
        data={
            "alert_id": "journal-0123456789ab",
            "code": AlertCode.JOURNAL_ROLLED_BACK.value,
            "severity": "critical",
            "message": "restored",
            "continuity": "rollback",
            "journal_seq": 6,
            "marker_seq": 10,
            "acknowledged_seq": None,
            "old_epoch": 1,
            "new_epoch": 2,
            "old_journal_id": "e1",
            "new_journal_id": "e2-id",
        },
    )
    fed = c.feed(envelope(8, epoch="e2"), 0.0)
    assert fed.verdict is Verdict.CONFLICT  # before the alert: reported
    fed = c.feed(rolled, 0.0)
    assert [e["seq"] for e in fed.processed] == [7]
    assert len(c.rollbacks) == 1
    assert "rolled back to seq 6" in c.rollbacks[0]
    assert "seq 7..10 (4 events)" in c.rollbacks[0]
    assert [s for s, _, _ in c.checkpoint.lost()] == [7, 8, 9, 10]
    fed = c.feed(envelope(8, epoch="e2"), 0.0)  # sent again on the gap fill
    assert [e["seq"] for e in fed.processed] == [8]
    assert c.feed(rolled, 0.0).verdict is Verdict.DUPLICATE  # a copy changes nothing
    assert c.checkpoint.position.epoch_id == "e2-id"
    # a later rollback (epoch 3), then an old copy of the first alert (a resend of that range):
    # a copy of a processed event, never a second fall-back
    c.feed(envelope(9, epoch="e2"), 0.0)
    rolled_again = envelope(
        10,
        epoch="e3",
        kind="alert_raised",
        data={**rolled["data"], "journal_seq": 9, "new_epoch": 3, "new_journal_id": "e3-id"},
    )
    assert [e["seq"] for e in c.feed(rolled_again, 0.0).processed] == [10]
    assert c.feed(rolled, 0.0).verdict is Verdict.DUPLICATE
    assert c.position == 10
    assert len(c.rollbacks) == 2
    assert c.checkpoint.position.epoch_id == "e3-id"


def test_the_ack_names_the_committed_position_and_the_table_believes_it(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    assert c.ack_message("gs-1", GS, 1.0) is None
    for seq in (1, 2, 4):
        c.feed(envelope(seq), 0.0)
    assert c.ack_message("gs-1", GS, 1.0) is None  # nothing committed yet
    c.commit()
    ack = c.ack_message("gs-1", GS, 1.0)
    assert ack is not None
    validate_payload("x/ack", json.dumps(ack).encode())
    keyring = Keyring([CommandKey("gs-1", frozenset({Role.GAME_SERVER}), GS)])
    assert check_ack(json.dumps(ack).encode(), "T1", keyring) == AckClaim(2, envelope(2)["event_id"], "gs-1")
    command = c.resend_command(3, 3, "gs-1", GS, 1.0)
    validate_payload("x/cmd", json.dumps(command).encode())


def test_the_wire_shortcut_believes_only_the_signed_bytes() -> None:
    from daemon.journal.records import JournaledEvent
    from daemon.mqtt.consumer import parse_signed_event
    from daemon.mqtt.envelope import event_payload

    event = JournaledEvent(
        seq=4, event_id=str(uuid.uuid4()), kind="card_dealt", at=1.5e9, shoe_id="S1", hand=1,
        source="reader", data={"card": "8s", "slot": "P1"}, origin="engine", journaled_at=1.5e9,
    )  # fmt: skip
    wire = event_payload(event, "T1", 1.5e9 + 1, KEY)
    fast, problem, signed = parse_signed_event(wire, "T1", KEY, True)
    general, _, canonical = parse_signed_event(json.loads(wire), "T1", KEY, True)
    assert fast is not None, problem
    assert fast == general
    assert signed == canonical
    # a member smuggled after the signature (JSON keeps the last duplicate) is not believed
    smuggled = wire[:-1] + b',"kind":"round_voided"}'
    envelope, problem, _ = parse_signed_event(smuggled, "T1", KEY, True)
    assert envelope is None
    assert "signature" in problem
    tampered = wire.replace(b'"8s"', b'"9s"')
    assert parse_signed_event(tampered, "T1", KEY, True)[0] is None


def test_events_waiting_above_a_gap_are_bounded_and_asked_for_again(tmp_path: Path) -> None:
    c = OrderedConsumer("T1", Checkpoint(tmp_path / "c.sqlite3", "T1"), KEY, max_waiting=3)
    for seq in (2, 3, 4):
        assert c.feed(envelope(seq), now=0.0).processed == ()
    assert c.waiting_dropped == 0
    assert c.feed(envelope(5), now=0.0).processed == ()  # a 4th waiting: all four dropped
    assert c.waiting_dropped == 4
    assert c.missing == [1, 2, 3, 4, 5]
    assert c.gaps(now=2.0) == [(1, 5)]  # the whole range, at once after the grace
    processed: list[int] = []
    for seq in range(1, 6):  # the table's resend
        fed = c.feed(envelope(seq), now=2.1)
        assert fed.verdict is Verdict.NEW
        processed.extend(e["seq"] for e in fed.processed)
    assert processed == [1, 2, 3, 4, 5]
    assert c.missing == []
    c.checkpoint.close()


def test_max_waiting_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_waiting"):
        OrderedConsumer("T1", Checkpoint(tmp_path / "c.sqlite3", "T1"), KEY, max_waiting=0)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_bounded_waiting_with_resend_delivers_every_event_once_in_order(
    tmp_path_factory: Any, data: st.DataObject
) -> None:
    n = data.draw(st.integers(1, 30))
    bound = data.draw(st.integers(1, 4))
    queue = list(data.draw(st.permutations(range(1, n + 1))))
    c = OrderedConsumer(
        "T1", Checkpoint(tmp_path_factory.mktemp("c") / "c.sqlite3", "T1"), KEY, max_waiting=bound
    )
    processed: list[int] = []
    now = 0.0
    for _ in range(50 * n):
        if not queue:
            if c.position == n:
                break
            now += 10.0  # past grace and retry: the consumer asks, the table resends
            c.note_last_seq(n, now)
            queue = [s for first, last in c.gaps(now) for s in range(first, last + 1)]
            continue
        fed = c.feed(envelope(queue.pop(0)), now=now)
        assert fed.verdict in (Verdict.NEW, Verdict.DUPLICATE)
        processed.extend(e["seq"] for e in fed.processed)
    assert processed == list(range(1, n + 1))
    c.checkpoint.close()


# -- the event chain: stop, resume, recover ---------------------------------------------------

GENESIS = hashlib.sha256(b"baccarat-edge event chain genesis\nT1").hexdigest()


def chained(
    history: list[tuple[str, str, dict[str, Any] | None]], base: str = GENESIS
) -> list[dict[str, Any]]:
    """Signed envelopes of ``(epoch, kind, data)`` from seq 1, each chained to the one before
    (the first to ``base``), as a table publishes them."""
    out: list[dict[str, Any]] = []
    prev = base
    for seq, (epoch, kind, data) in enumerate(history, start=1):
        message = envelope(seq, epoch=epoch, kind=kind, data=data)
        del message["sig"], message["published_at"]
        message["epoch"] = str(uuid.uuid5(uuid.NAMESPACE_OID, epoch))
        message["prev_hash"] = prev
        message["hash"] = prev = hashlib.sha256(canonical_json(message)).hexdigest()
        message["published_at"] = 2000.0
        message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
        out.append(message)
    return out


def rollback_data(restore: int, lost_epoch: str | None, continuity: str = "rollback") -> dict[str, Any]:
    return {
        "alert_id": "journal-0123456789ab",
        "code": AlertCode.JOURNAL_ROLLED_BACK.value,
        "severity": "critical",
        "message": "rolled back",
        "continuity": continuity,
        "detected_by": "server_ack",
        "journal_seq": 9,
        "marker_seq": None,
        "acknowledged_seq": 6,
        "restore_seq": restore,
        "first_lost_seq": restore + 1,
        "lost_through_seq": 6,
        "lost_epoch": None if lost_epoch is None else str(uuid.uuid5(uuid.NAMESPACE_OID, lost_epoch)),
        "old_epoch": 2,
        "new_epoch": 2,
        "old_journal_id": "b-id",
        "new_journal_id": "b-id",
    }


def test_a_chain_break_stops_until_the_rollback_alert_and_nothing_is_settled_twice(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    card = ("a", "card_dealt", None)
    history_a = chained([card] * 6)
    emitted = [e["seq"] for m in history_a for e in c.feed(m, 0.0).processed]
    assert emitted == [1, 2, 3, 4, 5, 6]
    ack = c.ack_message("gs-1", GS, 1.0) if c.commit() else None
    assert ack is not None
    assert (ack["hash"], ack["epoch"]) == (history_a[5]["hash"], history_a[5]["epoch"])
    validate_payload("x/ack", json.dumps(ack).encode())
    # the table went back to seq 3 and deals on in epoch b (seq 4-6 again, other cards); its
    # alert names a cautious restore point, seq 2 (the server acknowledged no epoch)
    history_b = chained([card] * 3 + [("b", "card_dealt", {"card": "9h", "slot": "B1"})] * 3)
    history_b.append(
        chained(
            [
                *[card] * 3,
                *[("b", "card_dealt", {"card": "9h", "slot": "B1"})] * 3,
                ("b", "alert_raised", rollback_data(2, None)),
            ]
        )[6]
    )
    fed = c.feed(history_b[3], 0.0)
    assert fed.verdict is Verdict.CONFLICT
    assert c.stopped is not None
    assert "conflict" in c.stopped
    # the table's seq 7 does not chain to the seq 6 processed here: dropped, asked for again
    later = chained([card] * 3 + [("b", "card_dealt", {"card": "9h", "slot": "B1"})] * 4)[6]
    assert c.feed(later, 0.0).processed == ()
    assert c.chain_breaks == 1
    assert c.stopped is not None
    assert "chain break" in c.stopped
    fed = c.feed(history_b[6], 5.0)  # the alert, acted upon as it arrives
    assert c.stopped is None
    assert c.position == 2
    assert [s for s, _, _ in c.checkpoint.lost()] == [3, 4, 5, 6]
    assert c.gaps(10.0) == [(3, 6)]
    # the gap fill: seq 3 comes again unchanged (it was not lost), then the new 4-6 and the alert
    emitted = [
        e["seq"]
        for m in (history_b[2], history_b[3], history_b[4], history_b[5])
        for e in c.feed(m, 10.0).processed
    ]
    assert emitted == [4, 5, 6, 7]  # seq 3 recovered, not settled twice
    assert c.recovered == 1
    assert [s for s, _, _ in c.checkpoint.lost()] == [4, 5, 6]
    # a late copy of the lost history (a broker redelivery) is never processed, and the
    # table's own event goes on when it comes
    late = chained([card] * 8)[7]  # epoch a, seq 8: it chains to the lost seq 7
    assert c.feed(late, 11.0).processed == ()
    assert c.chain_breaks == 2
    assert c.feed(history_a[4], 11.0).verdict is Verdict.CONFLICT
    table_8 = chained(
        [card] * 3
        + [("b", "card_dealt", {"card": "9h", "slot": "B1"})] * 3
        + [("b", "alert_raised", rollback_data(2, None)), ("b", "card_dealt", None)]
    )[7]
    assert [e["seq"] for e in c.feed(table_8, 12.0).processed] == [8]
    assert c.stopped is None


def test_a_late_event_of_the_lost_epoch_is_never_processed(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    card = ("a", "card_dealt", None)
    for message in chained([card] * 3):
        c.feed(message, 0.0)
    alert = chained([card] * 3 + [("b", "alert_raised", rollback_data(3, "a"))])[3]
    assert [e["seq"] for e in c.feed(alert, 0.0).processed] == [4]
    fed = c.feed(chained([card] * 5)[4], 0.0)  # epoch a, seq 5: the lost history
    assert fed.verdict is Verdict.LOST
    assert c.stats.lost_history == 1


def test_a_chain_break_above_the_position_stops_too(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    history_a = chained([("a", "card_dealt", None)] * 3)
    for message in history_a:
        c.feed(message, 0.0)
    other = chained(
        [
            ("a", "card_dealt", None),
            ("a", "card_dealt", {"card": "2c", "slot": "P1"}),
            ("b", "card_dealt", None),
            ("b", "card_dealt", None),
        ]
    )
    fed = c.feed(other[3], 0.0)  # seq 4 chained to another seq 3
    assert fed.processed == ()
    assert c.stopped is not None
    assert "chain break" in c.stopped


def test_a_replaced_journal_goes_on_from_its_restore_point_with_a_new_chain(tmp_path: Path) -> None:
    c = consumer(tmp_path / "c.sqlite3")
    for message in chained([("a", "card_dealt", None)] * 3):
        c.feed(message, 0.0)
    # the new file goes on after the old marker's seq 5: seq 4-5 never reached this server
    new_file = chained([("c", "alert_raised", rollback_data(5, "a", "replaced")), ("c", "card_dealt", None)])
    renumbered = []
    for offset, message in enumerate(new_file, start=6):
        message = {k: v for k, v in message.items() if k != "sig"}
        message["seq"] = offset
        message["event_id"] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"c/T1/{offset}"))
        renumbered.append(message)
    prev = GENESIS
    for message in renumbered:
        del message["published_at"], message["hash"]
        message["prev_hash"] = prev
        message["hash"] = prev = hashlib.sha256(canonical_json(message)).hexdigest()
        message["published_at"] = 2000.0
        message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
    emitted = [e["seq"] for m in renumbered for e in c.feed(m, 0.0).processed]
    assert emitted == [6, 7]
    assert [(s, e) for s, e, _ in c.checkpoint.lost()] == [(4, "unknown"), (5, "unknown")]
    assert c.stopped is None
    assert len(c.rollbacks) == 1
    assert "replaced to seq 5" in c.rollbacks[0]
