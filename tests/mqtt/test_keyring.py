"""Commands bound to people: the keyring's roles, the verifier's key and role checks, and a
named key's command through a real mosquitto (actor from the key, ``forbidden`` journaled)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from daemon.cli import main
from daemon.engine.commands import ACTIONS, SERVICE_ACTIONS
from daemon.journal import Journal, JournalSettings
from daemon.journal.nonces import NonceVerdict
from daemon.mqtt.commands import CommandVerifier, Refusal, Verified
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.roles import PUBLISHER_ACTIONS, ROLE_ACTIONS, Role
from daemon.mqtt.secrets import SecretError, SecretSource
from daemon.mqtt.settings import CommandKeySettings, SigningSettings
from daemon.mqtt.signing import sign
from tests.mqtt.conftest import TABLE, make_settings
from tests.mqtt.support import signed_command, validate_payload
from tests.mqtt.test_commands import EngineDouble, Supervisor
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret


def test_every_engine_action_belongs_to_exactly_one_role() -> None:
    for action in (*ACTIONS, *SERVICE_ACTIONS):
        holders = [role for role, actions in ROLE_ACTIONS.items() if action in actions]
        assert len(holders) == 1, f"{action} is held by {holders}"
    assigned = set().union(*ROLE_ACTIONS.values())
    assert assigned == set(ACTIONS) | SERVICE_ACTIONS | PUBLISHER_ACTIONS, "a role names an unknown action"
    assert all(len([r for r in Role if a in ROLE_ACTIONS[r]]) == 1 for a in PUBLISHER_ACTIONS)


@pytest.fixture
def key_files(tmp_path: Path) -> dict[str, Path]:
    return {
        name: write_secret(tmp_path / f"{name}.key", f"the key of {name}, long enough\n")
        for name in ("sup-anna", "gs-1", "tech-bo", "legacy")
    }


def _signing(key_files: dict[str, Path], legacy: bool = False, events: Path | None = None) -> SigningSettings:
    roles = {"sup-anna": Role.SUPERVISOR, "gs-1": Role.GAME_SERVER, "tech-bo": Role.TECHNICIAN}
    return SigningSettings(
        command_keys=tuple(
            CommandKeySettings(key_id=key_id, role=role, secret=SecretSource(file=key_files[key_id]))
            for key_id, role in roles.items()
        ),
        command_key=SecretSource(file=key_files["legacy"]) if legacy else None,
        events_key=SecretSource(file=events) if events else None,
    )


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    yield j
    j.close()


def _verifier(signing: SigningSettings, journal: Journal) -> CommandVerifier:
    return CommandVerifier(TABLE, Keyring.load(signing), signing, journal, clock=time.time)


def _check(verifier: CommandVerifier, command: dict[str, object]) -> Verified | Refusal:
    return verifier.check(json.dumps(command).encode())


def test_a_named_key_sends_its_roles_actions_as_itself(key_files: dict[str, Path], journal: Journal) -> None:
    verifier = _verifier(_signing(key_files), journal)
    anna = SecretSource(file=key_files["sup-anna"]).load()
    command = signed_command(anna, TABLE, "void_round", {"reason": "misdeal"}, key_id="sup-anna")
    validate_payload("x/cmd", json.dumps(command).encode())
    outcome = _check(verifier, command)
    assert isinstance(outcome, Verified)
    assert outcome.command.actor == "supervisor:sup-anna"

    # the same actor spelled out is accepted; another one is refused, never believed
    same = {**signed_command(anna, TABLE, "void_shoe", key_id="sup-anna"), "actor": "supervisor:sup-anna"}
    same["sig"] = sign(same, anna)
    assert isinstance(_check(verifier, same), Verified)
    other = {**signed_command(anna, TABLE, "void_shoe", key_id="sup-anna"), "actor": "supervisor:boss"}
    other["sig"] = sign(other, anna)
    refused = _check(verifier, other)
    assert isinstance(refused, Refusal)
    assert (refused.code, refused.actor) == ("malformed", "supervisor:sup-anna")
    assert "comes from the key" in refused.reason


@pytest.mark.parametrize(
    ("key_id", "action", "allowed"),
    [
        ("sup-anna", "assign_card", True),
        ("sup-anna", "lock", False),
        ("sup-anna", "new_shoe", False),
        ("gs-1", "new_shoe", True),
        ("gs-1", "void_round", False),
        ("tech-bo", "unlock", True),
        ("tech-bo", "rescan_ack", True),
        ("tech-bo", "acknowledge_alert", False),
    ],
)
def test_an_action_outside_the_keys_role_is_forbidden(
    key_files: dict[str, Path], journal: Journal, key_id: str, action: str, allowed: bool
) -> None:
    verifier = _verifier(_signing(key_files), journal)
    key = SecretSource(file=key_files[key_id]).load()
    command = signed_command(key, TABLE, action, key_id=key_id)
    outcome = _check(verifier, command)
    if allowed:
        assert isinstance(outcome, Verified)
        return
    assert isinstance(outcome, Refusal)
    assert outcome.code == "forbidden"
    assert key_id in outcome.reason
    assert action in outcome.reason
    # refused before the nonce is stored
    assert journal.remember_nonce(command["nonce"], command["ts"], time.time(), 60, 100) is NonceVerdict.FRESH


def test_unknown_key_ids_and_borrowed_keys_are_bad_signatures(
    key_files: dict[str, Path], journal: Journal
) -> None:
    verifier = _verifier(_signing(key_files), journal)
    anna = SecretSource(file=key_files["sup-anna"]).load()
    unknown = _check(verifier, signed_command(anna, TABLE, "void_shoe", key_id="sup-zed"))
    assert isinstance(unknown, Refusal)
    assert (unknown.code, unknown.reason, unknown.key_id) == (
        "bad_signature",
        "unknown key_id 'sup-zed'",
        "sup-zed",
    )
    # anna's key presented as the technician's: the signature is checked with tech-bo's key
    borrowed = _check(verifier, signed_command(anna, TABLE, "lock", key_id="tech-bo"))
    assert isinstance(borrowed, Refusal)
    assert borrowed.code == "bad_signature"
    # without a legacy key a command without key_id has nothing to be checked with
    legacy = _check(verifier, signed_command(anna, TABLE, "void_shoe"))
    assert isinstance(legacy, Refusal)
    assert (legacy.code, legacy.reason) == (
        "bad_signature",
        "no key_id given and this table has no legacy command_key",
    )


def test_the_legacy_key_holds_every_role_beside_the_keyring(
    key_files: dict[str, Path], journal: Journal
) -> None:
    verifier = _verifier(_signing(key_files, legacy=True), journal)
    legacy = SecretSource(file=key_files["legacy"]).load()
    for action in ("new_shoe", "void_round", "lock"):
        outcome = _check(verifier, signed_command(legacy, TABLE, action))
        assert isinstance(outcome, Verified)
        assert outcome.command.actor == "supervisor:test"  # declared, as before the keyring
    assert Keyring.load(_signing(key_files, legacy=True)).key_ids == ["gs-1", "sup-anna", "table", "tech-bo"]


def test_keyring_settings_are_checked(key_files: dict[str, Path], tmp_path: Path) -> None:
    entry = {"key_id": "sup-anna", "role": "supervisor", "secret": {"file": str(key_files["sup-anna"])}}
    with pytest.raises(ValidationError, match="given twice"):
        SigningSettings.model_validate({"command_keys": [entry, entry]})
    with pytest.raises(ValidationError, match="reserved for the legacy"):
        SigningSettings.model_validate({"command_keys": [{**entry, "key_id": "table"}]})
    with pytest.raises(ValidationError, match="key_id"):
        SigningSettings.model_validate({"command_keys": [{**entry, "key_id": "Anna Smith"}]})
    with pytest.raises(ValidationError, match="role"):
        SigningSettings.model_validate({"command_keys": [{**entry, "role": "owner"}]})
    short = write_secret(tmp_path / "short.key", "too short\n")
    signing = SigningSettings.model_validate({"command_keys": [{**entry, "secret": {"file": str(short)}}]})
    with pytest.raises(SecretError, match="at least 16 are required"):
        Keyring.load(signing)
    open_file = write_secret(tmp_path / "open.key", "a key others can read, long enough\n")
    open_file.chmod(0o644)
    signing = SigningSettings.model_validate(
        {"command_keys": [{**entry, "secret": {"file": str(open_file)}}]}
    )
    with pytest.raises(SecretError, match="mode 0644"):
        Keyring.load(signing)


@pytest.mark.mosquitto
def test_named_keys_end_to_end(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    key_files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    engine = EngineDouble()
    settings = make_settings(mosquitto.port, keys)
    settings = settings.model_copy(update={"signing": _signing(key_files, events=keys["events"])})
    publisher = make_publisher(settings, TABLE, journal, on_command=engine.on_command)
    assert publisher.subscribed.wait(10)
    supervisor = Supervisor(mosquitto.port)
    try:
        anna = SecretSource(file=key_files["sup-anna"]).load()
        supervisor.send(
            signed_command(anna, TABLE, "void_round", {"reason": "x"}, command_id="v", key_id="sup-anna")
        )
        assert supervisor.reply_to("v")[0]["status"] == "accepted"
        supervisor.send(signed_command(anna, TABLE, "lock", command_id="l", key_id="sup-anna"))
        [reply] = supervisor.reply_to("l")
        assert (reply["status"], reply["code"]) == ("refused", "forbidden")
        for message in supervisor.replies.messages:
            validate_payload(message.topic, message.payload)
    finally:
        supervisor.close()
    assert [(c.command_id, c.actor) for c in engine.commands] == [("v", "supervisor:sup-anna")]
    [refusal] = [e for e in journal.events(origin=None) if e.kind == "command_refused"]
    assert (
        refusal.data["command_id"],
        refusal.data["code"],
        refusal.data["actor"],
        refusal.data["key_id"],
    ) == (
        "l",
        "forbidden",
        "supervisor:sup-anna",
        "sup-anna",
    )
    assert reply["seq"] == refusal.seq


def _cli(port: int, key_id: str, key_file: Path, *rest: str) -> list[str]:
    return [
        "command",
        "--broker",
        f"mqtt://127.0.0.1:{port}",
        "--table",
        TABLE,
        "--key-id",
        key_id,
        "--command-key-file",
        str(key_file),
        *rest,
    ]


@pytest.mark.mosquitto
def test_the_command_cli_signs_sends_and_reports(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    key_files: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # no table listening: no reply is exit 7 (daemon/commands/_mqtt_client.py)
    assert (
        main([*_cli(mosquitto.port, "sup-anna", key_files["sup-anna"], "--timeout", "1"), "void_shoe"]) == 7
    )
    assert "no reply within 1 s" in capsys.readouterr().err

    engine = EngineDouble()
    signing = _signing(key_files, events=keys["events"])
    settings = make_settings(mosquitto.port, keys).model_copy(update={"signing": signing})
    publisher = make_publisher(settings, TABLE, journal, on_command=engine.on_command)
    assert publisher.subscribed.wait(10)
    verified = ("--events-key-file", str(keys["events"]))
    args = ("--arg", "reason=card exposed", "--arg", "hand=3", "--arg", "opening_burn=false")
    assert (
        main([*_cli(mosquitto.port, "sup-anna", key_files["sup-anna"], *verified, *args), "void_round"]) == 0
    )
    reply = json.loads(capsys.readouterr().out)
    assert (reply["status"], reply["action"]) == ("accepted", "void_round")
    [command] = engine.commands
    assert command.args == {"reason": "card exposed", "hand": 3, "opening_burn": False}
    assert command.actor == "supervisor:sup-anna"

    assert main([*_cli(mosquitto.port, "sup-anna", key_files["sup-anna"], *verified), "lock"]) == 1
    assert json.loads(capsys.readouterr().out)["code"] == "forbidden"

    # a reply that does not verify with the events key given is not believed
    other = write_secret(tmp_path / "other-events.key", "not the table's events key at all\n")
    wrong = ("--events-key-file", str(other))
    assert main([*_cli(mosquitto.port, "gs-1", key_files["gs-1"], *wrong), "new_shoe"]) == 8
    assert "does not verify" in capsys.readouterr().err


def test_the_command_cli_refuses_bad_usage(
    key_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_cli(1, "Anna Smith", key_files["sup-anna"]), "void_shoe"]) == 2
    assert "--key-id 'Anna Smith'" in capsys.readouterr().err
    assert main([*_cli(1, "sup-anna", key_files["sup-anna"], "--arg", "reason"), "void_shoe"]) == 2
    assert "give NAME=VALUE" in capsys.readouterr().err
    readable = write_secret(tmp_path / "readable.key", "a key others can read, long enough\n")
    readable.chmod(0o644)
    assert main([*_cli(1, "sup-anna", readable), "void_shoe"]) == 2
    assert "mode 0644" in capsys.readouterr().err
