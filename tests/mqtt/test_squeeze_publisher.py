"""A squeeze table through the real publisher and a real mosquitto: no message but the auditors'
names a hidden card, the revealed cards appear first in their card_revealed, every event's chain
hash holds over what was published, and a round voided before its reveal reaches the audit topic."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from common.cards import Card
from common.inputs import CardRead, EngineInput, SupervisorCommand
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal import Journal
from daemon.journal.chain import event_hash
from daemon.mqtt.publisher import Publisher
from daemon.rules.variants import load_variant_by_name
from tests.mqtt.conftest import TABLE, make_settings
from tests.mqtt.support import Subscriber, topic_count, validate_payload
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

REVEALED = ("8s", "Td", "Qh", "9c")  # round 1, revealed
HIDDEN = ("5d", "4h", "3s")  # round 2, voided before its reveal


def squeeze_events(journal: Journal) -> Engine:
    eng = Engine(
        TableSettings.model_validate({"reveal": {"mode": "squeeze"}}),
        load_variant_by_name("standard"),
        table_id=TABLE,
    )

    def command(action: str, at: float, **args: object) -> SupervisorCommand:
        return SupervisorCommand(action, at, "server", f"{action}-{at}", dict(args))

    inputs: list[EngineInput] = [command("new_shoe", 1, shoe_id="S1")]
    cards = ("2c", "Kd", "Kh", *REVEALED)
    inputs += [CardRead(Card.parse(c), 2.0 + k, nonce=f"{k:032x}") for k, c in enumerate(cards)]
    inputs.append(command("reveal", 20, slots=["P1", "P2", "B1", "B2"]))
    inputs += [CardRead(Card.parse(c), 40.0 + k, nonce=f"{k + 50:032x}") for k, c in enumerate(HIDDEN)]
    inputs.append(command("void_round", 50, reason="card exposed"))
    for inp in inputs:
        journal.append([inp], eng.handle(inp))
    return eng


def test_nothing_but_the_audit_topic_names_a_hidden_card(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    sub = Subscriber(mosquitto.port, [f"baccarat/v1/{TABLE}/#"])
    eng = squeeze_events(journal)
    total = len(list(journal.events(origin=None)))
    publisher = make_publisher(make_settings(mosquitto.port, keys), TABLE, journal, snapshot=eng.snapshot)
    messages = sub.wait_for(lambda msgs: topic_count("events", total)(msgs) and topic_count("audit", 1)(msgs))
    deadline = time.monotonic() + 10
    while journal.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    publisher.stop()
    sub.close()

    revealed_so_far: set[str] = set()
    for message in messages:
        text = message.payload.decode("utf-8")
        validate_payload(message.topic, message.payload)
        if message.topic.endswith("/audit"):
            audit = json.loads(text)
            assert {c["card"] for c in audit["cards"].values()} == set(HIDDEN)
            for slot, sealed in audit["cards"].items():
                fields = [TABLE, "S1", "2", slot, sealed["card"], sealed["nonce"]]
                line = "baccarat-edge card commitment v1\n" + "\n".join(fields)
                assert hashlib.sha256(line.encode()).hexdigest() == sealed["commitment"]
            continue
        assert "sealed" not in text
        for code in HIDDEN:
            assert f'"{code}"' not in text, (message.topic, text)
        if message.topic.endswith("/events"):
            envelope = json.loads(text)
            members = {
                k: v
                for k, v in envelope.items()
                if k not in ("hash", "sig", "published_at", "epoch", "prev_hash")
            }
            assert event_hash(members, envelope["epoch"], envelope["prev_hash"]) == envelope["hash"]
            if envelope["kind"] == "card_revealed":
                revealed_so_far.add(envelope["data"]["card"])
        for code in REVEALED:
            if f'"{code}"' in text and not (message.topic.endswith("/events") and '"card_revealed"' in text):
                assert code in revealed_so_far, (message.topic, text)
    assert revealed_so_far == set(REVEALED)
