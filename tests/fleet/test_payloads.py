"""Retained payloads are untrusted: validation never raises, and an invalid payload is never
read (its table shows it as invalid)."""

from __future__ import annotations

import json
import time

from hypothesis import given
from hypothesis import strategies as st

from daemon.fleet.payloads import ServerAck, check, server_ack
from daemon.fleet.tables import Fleet, Thresholds, summarize
from tests.fleet.synthetic import SyntheticTable

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.sampled_from(["status", "health", "state"]), st.binary(max_size=300))
def test_any_bytes_are_judged_never_raised(kind: str, payload: bytes) -> None:
    verdict = check(kind, "T1", payload)
    assert (verdict.message is None) != (verdict.problem is None)


@given(st.sampled_from(["status", "health", "state"]), JSON)
def test_any_json_is_judged_never_raised(kind: str, value: object) -> None:
    verdict = check(kind, "T1", json.dumps(value).encode())
    assert verdict.message is None
    assert verdict.problem


@given(st.text(max_size=60), st.binary(max_size=100))
def test_any_topic_is_stored_or_ignored_and_summaries_never_raise(topic: str, payload: bytes) -> None:
    fleet = Fleet()
    fleet.receive(topic, payload)
    fleet.receive("baccarat/v1/T1/status", payload)
    for record in fleet.records():
        summary = summarize(record, time.time(), Thresholds())
        assert summary.level in ("critical", "warning", "ok")


def test_valid_payloads_are_read_and_extra_members_listed() -> None:
    table = SyntheticTable("T1", server_ack={"enabled": True, "seq": 5, "lag_events": 2, "lag_s": 1.5})
    verdict = check("health", "T1", table.health(100.0))
    assert verdict.problem is None
    assert verdict.message is not None
    assert server_ack(verdict.message) == ServerAck(True, 5, 2, 1.5)
    status = json.loads(table.status(100.0))
    status["added_by_a_newer_table"] = {"x": 1}
    verdict = check("status", "T1", json.dumps(status).encode())
    assert verdict.problem is None
    assert verdict.ignored == ("added_by_a_newer_table",)


def test_known_members_stay_validated() -> None:
    status = json.loads(SyntheticTable("T1").status(1.0))
    status["config_digest"] = "not hex"
    verdict = check("status", "T1", json.dumps(status).encode())
    assert verdict.message is None
    assert verdict.problem is not None
    assert verdict.problem.startswith("config_digest:")


def test_malformed_server_ack_is_a_problem_not_a_crash() -> None:
    assert server_ack({}) is None
    assert server_ack({"delivery": {}}) is None
    assert server_ack({"delivery": 3}) == "delivery is not an object"
    for bad in (
        {"enabled": "yes", "seq": 1, "lag_events": 0, "lag_s": 0},
        {"enabled": True, "seq": -1, "lag_events": 0, "lag_s": 0},
        {"enabled": True, "seq": 1, "lag_events": True, "lag_s": 0},
        {"enabled": True, "seq": 1, "lag_events": 0, "lag_s": "1"},
        {"enabled": True, "seq": 1.5, "lag_events": 0, "lag_s": None},
    ):
        result = server_ack({"delivery": {"server_ack": bad}})
        assert isinstance(result, str), bad
    fleet = Fleet()
    table = SyntheticTable("T1", server_ack={"enabled": True, "seq": 1, "lag_events": -4, "lag_s": 1})
    fleet.receive("baccarat/v1/T1/health", table.health(time.time()))
    (record,) = fleet.records()
    summary = summarize(record, time.time())
    assert summary.ack is None
    # a problem either way: the health shape check, or the schema once it names server_ack
    assert any("server_ack" in text and "lag_events" in text for _level, text in summary.problems)


def test_an_empty_retained_payload_clears_the_topic() -> None:
    fleet = Fleet()
    fleet.receive("baccarat/v1/T1/status", SyntheticTable("T1").status(1.0))
    assert len(fleet) == 1
    fleet.receive("baccarat/v1/T1/status", b"")
    assert len(fleet) == 0


def test_invalid_table_ids_in_topics_are_ignored() -> None:
    fleet = Fleet()
    for topic in (
        "baccarat/v1/+/status",
        "baccarat/v1/-x/status",
        "baccarat/v1/T1/other",
        "other/v1/T1/status",
    ):
        fleet.receive(topic, b"{}")
    assert len(fleet) == 0
    assert fleet.ignored_topics == 4


def test_numbers_out_of_range_are_refused() -> None:
    base = json.loads(SyntheticTable("T1").status(1.0))
    for raw in ("1e999", "-1e999", str(2**60), "9" * 400):
        text = json.dumps(base).replace('"ts": 1.0', f'"ts": {raw}')
        assert raw in text
        verdict = check("status", "T1", text.encode())
        assert verdict.message is None, raw
        assert verdict.problem is not None
        assert "out of range" in verdict.problem
