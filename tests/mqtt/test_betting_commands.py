"""The betting window's commands on the wire (issue #12): open_betting/close_betting signed by
the game server's key, cut_card by a supervisor's; replayed, unsigned, forbidden or malformed
ones are refused before the engine and change nothing; the schema describes their arguments."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from daemon.engine import Engine, TableSettings
from daemon.engine.settings import GameFlow
from daemon.journal import Journal, JournalSettings
from daemon.journal.records import JournaledEvent
from daemon.mqtt.commands import CommandVerifier, Refusal, Verified
from daemon.mqtt.contract import load_schema
from daemon.mqtt.envelope import encode, event_envelope
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import SecretSource
from daemon.mqtt.settings import CommandKeySettings, SigningSettings
from daemon.rules.variants import load_variant_by_name
from daemon.simulation.flow_dealer import FlowFault, plan_flow_game
from tests.engine.support import read, start_shoe
from tests.engine.test_game_flow_properties import SETTINGS, run
from tests.mqtt.conftest import TABLE
from tests.mqtt.support import signed_command, validate_payload
from tests.support.secrets import write_secret

KEYS = {"gs-1": Role.GAME_SERVER, "sup-anna": Role.SUPERVISOR, "tech-bo": Role.TECHNICIAN}


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    yield j
    j.close()


@pytest.fixture
def secrets(tmp_path: Path) -> dict[str, SecretSource]:
    return {
        key_id: SecretSource(
            file=write_secret(tmp_path / f"{key_id}.key", f"the key of {key_id}, long enough\n")
        )
        for key_id in KEYS
    }


@pytest.fixture
def verifier(secrets: dict[str, SecretSource], journal: Journal) -> CommandVerifier:
    signing = SigningSettings(
        command_keys=tuple(
            CommandKeySettings(key_id=key_id, role=role, secret=secrets[key_id])
            for key_id, role in KEYS.items()
        )
    )
    return CommandVerifier(TABLE, Keyring.load(signing), signing, journal, clock=time.time)


def _table() -> Engine:
    engine = Engine(TableSettings(game_flow=GameFlow.BETTING_WINDOW), load_variant_by_name("standard"))
    start_shoe(engine)
    return engine


def _send(verifier: CommandVerifier, engine: Engine, command: dict[str, Any]) -> Verified | Refusal:
    """What the runner does: verify, and hand a verified command to the engine."""
    outcome = verifier.check(json.dumps(command).encode())
    if isinstance(outcome, Verified):
        engine.handle(outcome.command)
    return outcome


def _game(engine: Engine) -> dict[str, Any]:
    return engine.state.comparable()


def test_the_game_server_opens_and_closes_betting(
    verifier: CommandVerifier, secrets: dict[str, SecretSource]
) -> None:
    engine = _table()
    gs = secrets["gs-1"].load()
    opening = signed_command(
        gs, TABLE, "open_betting", {"round_id": "T01-7", "closes_at": 1.7e9}, key_id="gs-1"
    )
    validate_payload(f"baccarat/v1/{TABLE}/cmd", json.dumps(opening).encode())
    outcome = _send(verifier, engine, opening)
    assert isinstance(outcome, Verified)
    assert outcome.command.actor == "game_server:gs-1"
    assert engine.state.flow_phase == "betting"
    closing = signed_command(gs, TABLE, "close_betting", {"round_id": "T01-7"}, key_id="gs-1")
    assert isinstance(_send(verifier, engine, closing), Verified)
    assert engine.state.flow_phase == "dealing"
    events = engine.handle(read("8c", engine.state.hand + 100.0))
    assert [e.data.get("round_id") for e in events if e.kind == "round_opened"] == ["T01-7"]


def test_a_replayed_betting_command_is_refused_and_changes_nothing(
    verifier: CommandVerifier, secrets: dict[str, SecretSource]
) -> None:
    engine = _table()
    gs = secrets["gs-1"].load()
    opening = signed_command(gs, TABLE, "open_betting", {"round_id": "1"}, key_id="gs-1")
    assert isinstance(_send(verifier, engine, opening), Verified)
    closing = signed_command(gs, TABLE, "close_betting", {"round_id": "1"}, key_id="gs-1")
    assert isinstance(_send(verifier, engine, closing), Verified)
    before = _game(engine)
    again = _send(verifier, engine, opening)  # the very same signed open, captured and sent again
    assert isinstance(again, Refusal)
    assert again.code == "replayed"
    assert _game(engine) == before


@pytest.mark.parametrize("tamper", ["no_sig", "wrong_sig", "unknown_key", "round_id_changed"])
def test_an_unsigned_or_tampered_betting_command_is_refused_and_changes_nothing(
    verifier: CommandVerifier, secrets: dict[str, SecretSource], tamper: str
) -> None:
    engine = _table()
    before = _game(engine)
    command = signed_command(secrets["gs-1"].load(), TABLE, "open_betting", {"round_id": "1"}, key_id="gs-1")
    if tamper == "no_sig":
        del command["sig"]
    elif tamper == "wrong_sig":
        command["sig"] = "0" * 64
    elif tamper == "unknown_key":
        command["key_id"] = "gs-2"
    else:
        command["args"] = {"round_id": "2"}
    outcome = _send(verifier, engine, command)
    assert isinstance(outcome, Refusal)
    assert outcome.code == ("malformed" if tamper == "no_sig" else "bad_signature")
    assert _game(engine) == before


@pytest.mark.parametrize(
    ("key_id", "action", "args", "allowed"),
    [
        ("gs-1", "open_betting", {"round_id": "1"}, True),
        ("sup-anna", "open_betting", {"round_id": "1"}, False),
        ("tech-bo", "close_betting", {"round_id": "1"}, False),
        ("sup-anna", "cut_card", {}, True),
        ("gs-1", "cut_card", {}, False),
        ("tech-bo", "cut_card", {}, False),
    ],
)
def test_betting_belongs_to_the_game_server_and_the_cut_card_to_a_supervisor(
    verifier: CommandVerifier,
    secrets: dict[str, SecretSource],
    key_id: str,
    action: str,
    args: dict[str, Any],
    allowed: bool,
) -> None:
    engine = _table()
    before = _game(engine)
    outcome = _send(
        verifier, engine, signed_command(secrets[key_id].load(), TABLE, action, args, key_id=key_id)
    )
    if allowed:
        assert isinstance(outcome, Verified)
        return
    assert isinstance(outcome, Refusal)
    assert outcome.code == "forbidden"
    assert _game(engine) == before


@pytest.mark.parametrize(
    ("action", "args"),
    [
        ("open_betting", {}),
        ("open_betting", {"round_id": "R-"}),
        ("open_betting", {"round_id": "1", "hand": 3}),
        ("close_betting", {"round_id": 7}),
        ("cut_card", {"hand": 1}),
    ],
)
def test_the_command_schema_refuses_bad_betting_arguments(action: str, args: dict[str, Any]) -> None:
    command = {"table_id": TABLE, "action": action, "args": args, "command_id": "c", "ts": 1.0}
    command |= {"nonce": "n" * 16, "sig": "0" * 64, "key_id": "gs-1"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(command, load_schema("command"))


@pytest.mark.slow
def test_a_betting_window_games_events_and_states_fit_the_contract() -> None:
    """Every event of shoes dealt in betting windows, with each fault, and the retained state after
    each event, validate against event.json and state.json (round_id, phase, game_flow)."""
    faults = (
        FlowFault("late_unneeded", 1, delay=30.0),
        FlowFault("exposed", 3),
        FlowFault("misread_deal_on", 5, card_index=1),
        FlowFault("outage", 7),
    )
    for protocol in ("angel_eye", "ascii_lines"):
        game = plan_flow_game(11, protocol, 10, faults)
        events = run(game, protocol)
        engine = Engine(SETTINGS, load_variant_by_name("standard"))
        kinds = set()
        for seq, event in enumerate(events, start=1):
            journaled = JournaledEvent(
                seq=seq,
                event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{protocol}/{seq}")),
                kind=event.kind,
                at=event.at,
                shoe_id=event.shoe_id,
                hand=event.hand,
                source=event.source,
                data=event.data,
                origin="engine",
                journaled_at=event.at,
            )
            validate_payload(
                f"baccarat/v1/{TABLE}/events", encode(event_envelope(journaled, TABLE, event.at, None))
            )
            engine.apply(event)
            state = {
                "schema_version": 1,
                "table_id": TABLE,
                "ts": event.at,
                "last_seq": seq,
                "state": engine.snapshot(),
            }
            validate_payload(f"baccarat/v1/{TABLE}/state", encode(state))
            kinds.add(event.kind)
        assert {"betting_opened", "betting_closed", "round_completed", "round_held", "alert_raised"} <= kinds
