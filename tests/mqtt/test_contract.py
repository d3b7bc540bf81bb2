"""The contract files agree with the code, and real engine events fit the event schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from daemon.engine import Engine, TableSettings
from daemon.engine.inputs import EngineInput
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.contract import SCHEMA_NAMES, asyncapi_text, load_schema
from daemon.mqtt.envelope import event_payload
from daemon.mqtt.secrets import Secret
from daemon.mqtt.topics import TableTopics
from daemon.rules.variants import load_variant_by_name
from tests.mqtt.support import validate_payload

CONTRACT = Path(__file__).resolve().parents[2] / "daemon" / "mqtt" / "contract"


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schemas_are_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_asyncapi_channels_are_the_topics_the_code_uses() -> None:
    doc = yaml.safe_load(asyncapi_text())
    assert doc["asyncapi"].startswith("3.")
    addresses = {ch["address"] for ch in doc["channels"].values()}
    topics = TableTopics("TABLE")
    expected = {
        topics.events,
        topics.alerts,
        topics.state,
        topics.status,
        topics.health,
        topics.cmd,
        topics.cmd_reply,
    }
    assert {a.replace("{table_id}", "TABLE") for a in addresses} == expected
    referenced = {
        msg["payload"]["schema"]["$ref"] for msg in doc["components"]["messages"].values() if "payload" in msg
    }
    for ref in referenced:
        assert (CONTRACT / ref).is_file(), ref
    assert {Path(r).stem for r in referenced} == set(SCHEMA_NAMES)


def test_real_engine_events_of_a_faulty_shoe_fit_the_event_schema(tmp_path: Path) -> None:
    from drivers.replay import replay_fixture
    from drivers.simulate import DealSettings, FaultSpec, make_fixture

    faults = [
        FaultSpec.parse(text)
        for text in ("unneeded_card@2", "double_pull@3", "misread@4", "card_exposed@5", "missing_card@6")
    ]
    fixture = make_fixture("contract", "angel_eye", DealSettings(decks=8, seed=3, max_hands=8), faults)
    inputs: list[EngineInput] = []
    replay_fixture(fixture, inputs.append)
    settings = TableSettings.model_validate(fixture.header.table)
    engine = Engine(settings, load_variant_by_name(settings.variant))
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    kinds: set[str] = set()
    key = Secret(b"k", "test")
    for inp in inputs:
        for journaled in journal.append([inp], engine.handle(inp)):
            payload = event_payload(journaled, "T1", 1_764_400_000.5, key)  # as published
            validate_payload("baccarat/v1/T1/events", payload)
            kinds.add(journaled.kind)
    journal.close()
    assert {"shoe_started", "card_dealt", "round_completed", "alert_raised", "round_voided"} <= kinds


def test_a_card_event_with_a_bad_card_code_is_outside_the_contract() -> None:
    envelope = {
        "schema_version": 1,
        "event_id": "0b5c8f8e-8f43-5d1e-9d8e-3f1f1c7a2b10",
        "seq": 1,
        "table_id": "T1",
        "shoe_id": "S1",
        "hand": 1,
        "kind": "card_dealt",
        "ts": 1.0,
        "published_at": 1.0,
        "source": "reader",
        "data": {"card": "8s", "slot": "P1"},
    }
    validate_payload("x/events", json.dumps(envelope).encode())
    envelope["data"] = {"card": "1x", "slot": "P1"}
    with pytest.raises(jsonschema.ValidationError):
        validate_payload("x/events", json.dumps(envelope).encode())
