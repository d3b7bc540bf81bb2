"""A squeeze table's payloads fit the contract: its events as published (journaled, chained,
signed), its retained state after every event, its audit messages, the reveal command; and the
contract's worked commitment example is what the table computes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.squeeze import commitment
from daemon.engine.table import Engine
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.audit import audit_payload
from daemon.mqtt.contract import asyncapi_text
from daemon.mqtt.envelope import encode, event_payload, signed_message
from daemon.mqtt.secrets import Secret
from daemon.rules.variants import load_variant_by_name
from daemon.simulation.squeeze_library import SQUEEZE_LIBRARY, SqueezeEntry
from drivers.fixtures import load_expected
from tests.conftest import REPO_ROOT
from tests.mqtt.support import validate_payload

KEY = Secret(b"the events key of table T1, long", "test")


@pytest.mark.parametrize("entry", SQUEEZE_LIBRARY, ids=lambda e: e.name)
def test_squeeze_events_state_and_audit_fit_the_contract(entry: SqueezeEntry, tmp_path: Path) -> None:
    events = [
        Event.from_dict(e) for e in load_expected(REPO_ROOT / "hw-fixtures" / f"{entry.name}.expected.jsonl")
    ]
    settings = TableSettings.model_validate(entry.base().header.table | {"reveal": {"mode": "squeeze"}})
    engine = Engine(settings, load_variant_by_name(settings.variant), table_id="T1")
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    kinds: set[str] = set()
    for event in events:
        engine.apply(event)
        for journaled in journal.append([], [event]):
            validate_payload("baccarat/v1/T1/events", event_payload(journaled, "T1", 1.5, KEY))
            audit = audit_payload(journaled, "T1", KEY)
            if audit is not None:
                validate_payload("baccarat/v1/T1/audit", audit)
                kinds.add("audit")
            kinds.add(journaled.kind)
        body = {"table_id": "T1", "ts": 1.5, "last_seq": 1, "state": engine.snapshot()}
        validate_payload("baccarat/v1/T1/state", encode(signed_message(body, KEY)))
    journal.close()
    assert {"card_dealt", "card_revealed"} <= kinds
    if entry.name.endswith("-voided"):
        assert "audit" in kinds


def test_the_reveal_command_fits_the_command_schema() -> None:
    command = {
        "table_id": "T1",
        "action": "reveal",
        "args": {"slots": ["P1", "P2"], "hand": 3},
        "command_id": "r-1",
        "ts": 1.0,
        "nonce": "abcdefghijklmnop",
        "sig": "0" * 64,
    }
    validate_payload("baccarat/v1/T1/cmd", json.dumps(command).encode())
    command["args"] = {"slots": ["X9"]}
    with pytest.raises(Exception, match="X9"):
        validate_payload("baccarat/v1/T1/cmd", json.dumps(command).encode())


def test_the_contracts_worked_commitment_example_is_what_the_table_computes() -> None:
    text = asyncapi_text()
    doc = yaml.safe_load(text)
    description = doc["info"]["description"]
    hex_bytes = re.search(r"The bytes hashed \(hex\) are\s+((?:[0-9a-f]{2}\s+)+)and", description)
    assert hex_bytes is not None
    hashed = bytes.fromhex(hex_bytes.group(1))
    digest = re.search(r"and the commitment is\s+([0-9a-f]{64})", description)
    assert digest is not None
    assert hashlib.sha256(hashed).hexdigest() == digest.group(1)
    nonce = "3f9c2a71d04b5e8f6a1c9d2e7b4f0a63"
    assert commitment(
        table_id="T01", shoe_id="S1", hand=7, slot="P1", card="8s", nonce=nonce
    ) == digest.group(1)
