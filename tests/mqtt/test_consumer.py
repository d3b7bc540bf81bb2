"""The reference consumer: dedup by event_id, seq gaps, signatures."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.secrets import Secret
from daemon.mqtt.signing import UNSIGNED_EVENT_FIELDS, sign

KEY = Secret(b"table-key", "test")


def envelope(seq: int, signed: bool = True, **changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "schema_version": 1,
        "event_id": str(uuid.uuid5(uuid.NAMESPACE_OID, f"T1/{seq}")),
        "seq": seq,
        "table_id": "T1",
        "shoe_id": "S1",
        "hand": 1,
        "kind": "card_dealt",
        "ts": 1000.0 + seq,
        "published_at": 2000.0,
        "source": "reader",
        "data": {"card": "8s"},
        **changes,
    }
    if signed:
        message["sig"] = sign(message, KEY, UNSIGNED_EVENT_FIELDS)
    return message


def test_duplicates_gaps_and_late_fills() -> None:
    consumer = EventConsumer("T1", key=KEY, require_signature=True)
    assert consumer.feed(envelope(1)).verdict is Verdict.NEW
    assert consumer.feed(json.dumps(envelope(1)).encode()).verdict is Verdict.DUPLICATE
    result = consumer.feed(envelope(4))
    assert result.new_gaps == (2, 3)
    assert consumer.unexplained_gaps == [2, 3]
    late = consumer.feed(envelope(3))
    assert late.filled_gap
    assert consumer.unexplained_gaps == [2]
    assert consumer.stats.out_of_order == 1


def test_dead_letter_alert_explains_its_gap() -> None:
    consumer = EventConsumer("T1")
    consumer.feed(envelope(1, signed=False))
    consumer.feed(
        envelope(
            3,
            signed=False,
            kind="alert_raised",
            data={"alert_id": "delivery-1", "code": "mqtt_dead_letter", "seq": 2, "message": "refused"},
        )
    )
    assert consumer.missing == {2}
    assert consumer.unexplained_gaps == []


def test_rejections_name_the_problem() -> None:
    consumer = EventConsumer("T1", key=KEY, require_signature=True)
    cases: dict[str, Any] = {
        "not JSON": b"{nope",
        "not a JSON object": b"[1]",
        "'seq' missing": {k: v for k, v in envelope(1).items() if k != "seq"},
        "of table 'T2'": envelope(1, table_id="T2"),
        "schema_version 2": envelope(1, schema_version=2),
        "unsigned": envelope(1, signed=False),
        "does not verify": {**envelope(1), "data": {"card": "9s"}},
        "seq must be >= 1": envelope(0),
        "all three or none": envelope(1, epoch="e", prev_hash="p"),
        "must be strings": envelope(1, epoch="e", prev_hash="p", hash=7),
    }
    for expected, payload in cases.items():
        result = consumer.feed(payload)
        assert result.verdict is Verdict.REJECTED, expected
        assert expected in (result.reason or ""), (expected, result.reason)
    assert consumer.highest_seq == 0


def test_same_seq_with_another_id_is_a_conflict() -> None:
    consumer = EventConsumer("T1")
    consumer.feed(envelope(1, signed=False))
    clash = envelope(1, signed=False, event_id=str(uuid.uuid4()))
    result = consumer.feed(clash)
    assert result.verdict is Verdict.CONFLICT
    assert "seq 1 already arrived" in (result.reason or "")


def test_a_republished_copy_is_a_duplicate_even_with_another_published_at() -> None:
    consumer = EventConsumer("T1", key=KEY)
    assert consumer.feed(envelope(1)).verdict is Verdict.NEW
    again = envelope(1, published_at=2999.0)  # a later copy: only the unsigned field differs
    assert consumer.feed(again).verdict is Verdict.DUPLICATE


def test_the_same_event_id_with_other_content_is_a_conflict_not_a_duplicate() -> None:
    # What a journal restored without a new epoch would send: an old id for a new event.
    consumer = EventConsumer("T1", key=KEY)
    first = envelope(7)
    assert consumer.feed(first).verdict is Verdict.NEW
    reissued = envelope(7, data={"card": "Kd"}, ts=5000.0)
    assert reissued["event_id"] == first["event_id"]
    result = consumer.feed(reissued)
    assert result.verdict is Verdict.CONFLICT
    assert result.reason == f"event_id {first['event_id']} already arrived (seq 7) with other content"
    assert (consumer.stats.conflicts, consumer.stats.duplicates) == (1, 0)


@settings(max_examples=60)
@given(st.integers(1, 60), st.randoms(use_true_random=False), st.integers(0, 40))
def test_any_redelivery_order_ends_complete(n: int, rng: random.Random, extra: int) -> None:
    stream = [envelope(s, signed=False) for s in range(1, n + 1)]
    stream += [rng.choice(stream) for _ in range(extra)]  # at-least-once: duplicates
    rng.shuffle(stream)
    consumer = EventConsumer("T1")
    verdicts = [consumer.feed(m).verdict for m in stream]
    assert verdicts.count(Verdict.NEW) == n
    assert verdicts.count(Verdict.DUPLICATE) == extra
    assert consumer.unexplained_gaps == []
    assert consumer.highest_seq == n


def test_chained_events_are_taken_with_all_three_members() -> None:
    consumer = EventConsumer("T1", key=KEY, require_signature=True)
    chained = envelope(1, epoch="e1", prev_hash="0" * 64, hash="1" * 64)
    wire = json.dumps(chained).encode()
    assert consumer.feed(wire).verdict is Verdict.NEW
    assert consumer.feed(wire).verdict is Verdict.DUPLICATE
