"""The contract files agree with the code, and real engine events fit the event schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from common.inputs import EngineInput
from daemon.engine import Engine, TableSettings
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.contract import SCHEMA_NAMES, asyncapi_text, load_schema
from daemon.mqtt.envelope import encode, event_payload, signed_message
from daemon.mqtt.secrets import Secret
from daemon.mqtt.topics import TableTopics
from daemon.rules.variants import load_variant_by_name
from tests.mqtt.support import engine_snapshot_mid_round, engine_snapshots, validate_payload

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
        topics.shoe_certificate,
        topics.state,
        topics.status,
        topics.health,
        topics.cmd,
        topics.cmd_reply,
        topics.ack,
        topics.audit,
    }
    assert {a.replace("{table_id}", "TABLE") for a in addresses} == expected
    referenced = {
        msg["payload"]["schema"]["$ref"] for msg in doc["components"]["messages"].values() if "payload" in msg
    }
    for ref in referenced:
        assert (CONTRACT / ref).is_file(), ref
    assert {Path(r).stem for r in referenced} == set(SCHEMA_NAMES)


def test_real_engine_events_of_a_faulty_shoe_fit_the_event_schema(tmp_path: Path) -> None:
    from daemon.simulation.dealer import DealSettings, FaultSpec, make_fixture
    from drivers.replay import replay_fixture

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


def test_shoe_started_carries_the_pay_table_digest_in_the_contract() -> None:
    variant = load_variant_by_name("standard")
    data = {"shoe_id": "S1", "decks": 8, "variant": variant.name, "variant_digest": variant.digest}
    envelope = {
        "schema_version": 1,
        "event_id": "0b5c8f8e-8f43-5d1e-9d8e-3f1f1c7a2b11",
        "seq": 1,
        "table_id": "T1",
        "shoe_id": "S1",
        "hand": None,
        "kind": "shoe_started",
        "ts": 1.0,
        "published_at": 1.0,
        "source": "supervisor",
        "data": data,
    }
    validate_payload("x/events", json.dumps(envelope).encode())
    envelope["data"] = {**data, "variant_digest": variant.digest.upper()}  # lowercase hex only
    with pytest.raises(jsonschema.ValidationError):
        validate_payload("x/events", json.dumps(envelope).encode())
    envelope["data"] = {k: v for k, v in data.items() if k != "variant_digest"}  # journals before it
    validate_payload("x/events", json.dumps(envelope).encode())


def state_payload(snapshot: dict[str, Any]) -> bytes:
    """A state payload as the publisher builds it (signed)."""
    body = {"table_id": "T1", "ts": 1_764_400_000.5, "last_seq": 7, "state": snapshot}
    return encode(signed_message(body, Secret(b"k" * 32, "test")))


def test_every_real_engine_snapshot_fits_the_state_schema() -> None:
    snapshots = engine_snapshots()
    for snapshot in snapshots:
        validate_payload("baccarat/v1/T1/state", state_payload(snapshot))
    # The runs cover every part of the snapshot the schema specifies.
    assert {s["shoe"]["phase"] for s in snapshots} == {
        "no_shoe",
        "indicator",
        "burning",
        "ready",
        "round",
        "over",
    }
    assert any(s["round"] is not None and len(s["round"]["cards"]) >= 4 for s in snapshots)
    assert any(s["held_rounds"] for s in snapshots)
    assert any(s["alerts"] for s in snapshots)
    assert any(s["offered_bets"]["bets"] for s in snapshots)
    assert any(len(s["results"]) >= 5 for s in snapshots)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda s: s.update(surprise=1), "Additional properties"),
        (lambda s: s["round"]["cards"].update(P1="1x"), "'1x' does not match"),
        (lambda s: s["round"]["cards"].update(X9="8s"), "X9"),
        (lambda s: s["shoe"].update(phase="dealing"), "dealing"),
        (lambda s: s["shoe"].pop("shoe_id"), "shoe_id"),
        (lambda s: s["offered_bets"].update(bets="Player"), "Player"),
        (lambda s: s["results"].append({"hand": 9, "winner": "dragon", "totals": [1, 2]}), "dragon"),
        (lambda s: s.update(hand=-1), "-1"),
    ],
)
def test_a_snapshot_off_the_engine_shape_is_outside_the_contract(
    change: Callable[[dict[str, Any]], object], where: str
) -> None:
    snapshot = engine_snapshot_mid_round()
    change(snapshot)
    with pytest.raises(jsonschema.ValidationError, match=where):
        validate_payload("baccarat/v1/T1/state", state_payload(snapshot))


def _health_with(devices: dict[str, Any]) -> bytes:
    return json.dumps({"schema_version": 1, **_PUBLISHER_HEALTH, "devices": devices}).encode()


_PUBLISHER_HEALTH: dict[str, Any] = {
    "table_id": "T1",
    "ts": 1.0,
    "running": True,
    "connected": True,
    "last_error": None,
    "queue_depth": 0,
    "inflight": 0,
    "oldest_undelivered_age_s": None,
    "last_seq": 3,
    "counters": {
        "published": 3,
        "acknowledged": 3,
        "dead_lettered": 0,
        "connects": 1,
        "connection_failures": 0,
        "delivery_retries": 0,
        "commands_accepted": 0,
        "commands_refused": 0,
    },
    "journal": {"size_bytes": 1, "max_bytes": 2, "full": False, "reason": None, "admits_new_round": True},
}

_ENGINE_HEALTH: dict[str, Any] = {
    "queue_depth": 0,
    "inputs": 10,
    "processed": 10,
    "events": 12,
    "journal_errors": 0,
    "journal_failing": False,
    "journal_failing_for_s": None,
    "inputs_waiting": 0,
    "storage_full": False,
    "inputs_not_stored": 0,
    "queue_depth_warnings": 0,
    "reader_commands": {"running": True, "waiting": 0, "performed": 0},
    "command_channel_ready": True,
    "stalled_workers": [],
    "insecure_broker_settings": [],
}


def test_health_devices_blocks_fit_the_schema(tmp_path: Path) -> None:
    from drivers.serial_reader import AngelEyeReader
    from drivers.settings import AngelEyeReaderSettings

    reader = AngelEyeReader(
        AngelEyeReaderSettings(url=str(tmp_path / "no-such-tty")), lambda item: None, lambda: 1.0
    )
    reader_health = reader.health()  # a real reader driver's block, never started
    devices = {"reader": reader_health, "engine": _ENGINE_HEALTH, "camera": {"error": "camera wedged"}}
    validate_payload("x/health", _health_with(devices))
    validate_payload("x/health", json.dumps({"schema_version": 1, **_PUBLISHER_HEALTH}).encode())
    validate_payload("x/health", _health_with({"error": "health provider failed: boom"}))
    for bad in (
        {"engine": {k: v for k, v in _ENGINE_HEALTH.items() if k != "journal_failing"}},
        {"engine": {**_ENGINE_HEALTH, "queue_depth": -1}},
        {"reader": {k: v for k, v in reader_health.items() if k != "connected"}},
        {"reader": {**reader_health, "nested": {"not": "a counter"}}},
        {"error": "x", "engine": _ENGINE_HEALTH},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate_payload("x/health", _health_with(bad))


def _resolve(doc: Any, pointer: str) -> Any:
    node = doc
    for part in pointer.lstrip("/").split("/") if pointer.strip("/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def _deref(doc: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = _resolve(doc, ref[1:])
    return node


def test_the_asyncapi_document_is_structurally_sound() -> None:
    doc = yaml.safe_load(asyncapi_text())
    assert re.fullmatch(r"3\.\d+\.\d+", doc["asyncapi"]), doc["asyncapi"]
    assert {"title", "version"} <= set(doc["info"])
    # Every $ref resolves: into this document, or a schema file (and a fragment in it).
    for ref in _refs(doc):
        target, _, fragment = ref.partition("#")
        if target:
            path = CONTRACT / target
            assert path.is_file(), ref
            _resolve(json.loads(path.read_text()), fragment)
        else:
            _resolve(doc, fragment)
    for schema_file in sorted((CONTRACT / "schemas").glob("*.json")):  # the schemas' own refs
        schema = json.loads(schema_file.read_text())
        for ref in _refs(schema):
            assert ref.startswith("#"), f"{schema_file.name}: {ref} (only local refs are used)"
            _resolve(schema, ref[1:])
    # Channels: the address parameters are declared, every message is a component message.
    for name, channel in doc["channels"].items():
        params = set(re.findall(r"{(\w+)}", channel["address"]))
        assert params == set(channel.get("parameters", {})), name
        for message in channel["messages"].values():
            assert message["$ref"].startswith("#/components/messages/"), name
    # Operations: a valid action, an existing channel, messages of that channel only (AsyncAPI 3).
    for name, operation in doc["operations"].items():
        assert operation["action"] in ("send", "receive"), name
        for part in [operation, *([operation["reply"]] if "reply" in operation else [])]:
            channel_ref = part["channel"]["$ref"]
            assert channel_ref.startswith("#/channels/"), name
            channel = _deref(doc, part["channel"])
            for message in part.get("messages", []):
                assert message["$ref"].startswith(channel_ref + "/messages/"), (name, message)
                assert _deref(doc, message) is not None
            assert channel["messages"], name
        bindings = operation.get("bindings", {}).get("mqtt", {})
        assert set(bindings) <= {"qos", "retain", "messageExpiryInterval", "bindingVersion"}, name
    # Every message payload is a valid JSON Schema 2020-12 of the shipped files.
    for name, message in doc["components"]["messages"].items():
        payload = message["payload"]
        assert payload["schemaFormat"] == "application/schema+json;version=draft-2020-12", name
        schema = json.loads((CONTRACT / payload["schema"]["$ref"]).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        bindings = message.get("bindings", {}).get("mqtt", {})
        assert set(bindings) <= {
            "payloadFormatIndicator",
            "correlationData",
            "contentType",
            "responseTopic",
            "bindingVersion",
        }, name
