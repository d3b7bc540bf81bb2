"""The generated tables of the fleet tests and the scale benchmark speak the real contract:
every payload validates against its schema and every event verifies at the reference consumer."""

from __future__ import annotations

from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.secrets import Secret
from tests.fleet.synthetic import SyntheticTable, table_messages
from tests.mqtt.support import validate_payload


def test_generated_payloads_match_the_contract() -> None:
    key = Secret(b"bench-key-T01", "test")
    table = SyntheticTable("T01", key=key, alerts=["no_shoe"], disconnected=["reader"], last_read_at=5.0)
    consumer = EventConsumer("T01", key=key)
    sent = []
    for topic, payload in table_messages(table, 10.0):
        validate_payload(topic, payload)
    for n in range(12):
        for topic, payload, retain in table.deal_card(100.0 + n):
            message = validate_payload(topic, payload)
            if topic.endswith("/events"):
                assert not retain
                assert consumer.feed(payload).verdict is Verdict.NEW
                sent.append(message["kind"])
            else:
                assert retain
    assert sent.count("card_dealt") == 12
    assert sent.count("round_completed") == 3
    assert consumer.highest_seq == table.seq == 24
    assert consumer.unexplained_gaps == []
