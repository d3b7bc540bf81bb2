"""Settings validation, secrets, topics, backoff and the command verifier (no broker)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from common.backoff import Backoff
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.command_channel import reply_topic_allowed
from daemon.mqtt.commands import CommandVerifier, Refusal, Verified
from daemon.mqtt.keyring import CommandKey, Keyring
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.roles import Role
from daemon.mqtt.secrets import Secret, SecretError, SecretSource, SigningKeySource
from daemon.mqtt.settings import LEGACY_KEY_ID, BrokerSettings, SigningSettings
from daemon.mqtt.topics import TableTopics, TopicError
from tests.mqtt.support import signed_command, validate_payload
from tests.support.secrets import write_secret

KEY = Secret(b"command-key", "test")


def test_unknown_keys_and_bad_values_are_named() -> None:
    with pytest.raises(ValidationError) as info:
        BrokerSettings.model_validate(
            {"host": "b", "tls": {"verfy": False}, "delivery": {"inflight_window": 0}, "port": 70000}
        )
    text = str(info.value)
    assert "tls.verfy" in text
    assert "delivery.inflight_window" in text
    assert "port" in text


def test_cert_and_key_go_together() -> None:
    with pytest.raises(ValidationError, match="cert_file and key_file go together"):
        BrokerSettings.model_validate({"tls": {"cert_file": "/x.crt"}})


def test_secret_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pw"
    write_secret(path, "s3cret\n")
    assert SecretSource(file=path).load().reveal() == b"s3cret"
    monkeypatch.setenv("EDGE_PW", "from-env")
    assert SecretSource(env="EDGE_PW").load().reveal_text() == "from-env"
    with pytest.raises(SecretError, match="EDGE_MISSING"):
        SecretSource(env="EDGE_MISSING").load()
    with pytest.raises(SecretError, match="cannot read secret file"):
        SecretSource(file=tmp_path / "absent").load()
    write_secret(tmp_path / "empty", "\n")
    with pytest.raises(SecretError, match="empty"):
        SecretSource(file=tmp_path / "empty").load()
    with pytest.raises(ValidationError, match="exactly one"):
        SecretSource(file=path, env="EDGE_PW")
    with pytest.raises(ValidationError, match="exactly one"):
        SecretSource()


def test_signing_keys_under_16_bytes_are_refused_naming_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal_path: Path
) -> None:
    short = "fifteen-bytes-k"  # 15 bytes
    write_secret(tmp_path / "events.key", short + "\n")
    monkeypatch.setenv("T1_COMMAND_KEY", short)
    settings = BrokerSettings.model_validate(
        {
            "tls": {"enabled": False},
            "signing": {
                "events_key": {"file": str(tmp_path / "events.key")},
                "command_key": {"env": "T1_COMMAND_KEY"},
            },
        }
    )
    assert settings.signing.events_key is not None
    assert settings.signing.command_key is not None
    with pytest.raises(SecretError) as events_error:
        settings.signing.events_key.load()
    assert str(events_error.value) == (
        f"signing key from file {tmp_path / 'events.key'} is 15 bytes; at least 16 are required "
        "(e.g. `openssl rand -hex 32`)"
    )
    with pytest.raises(SecretError, match="signing key from env T1_COMMAND_KEY is 15 bytes") as command_error:
        settings.signing.command_key.load()
    for error in (events_error, command_error):
        assert short not in str(error.value)
    # A plain SecretSource built in code is held to the same rule.
    built = SigningSettings(events_key=SecretSource(env="T1_COMMAND_KEY"))
    assert isinstance(built.events_key, SigningKeySource)
    with pytest.raises(SecretError, match="15 bytes"):
        built.events_key.load()
    # The publisher refuses to start with it, and the broker password has no such limit.
    journal = Journal(JournalSettings(path=journal_path), "T1")
    try:
        with pytest.raises(SecretError, match="signing key from file"):
            Publisher(settings, "T1", journal)
    finally:
        journal.close()
    write_secret(tmp_path / "pw", "pw\n")
    assert SecretSource(file=tmp_path / "pw").load().reveal() == b"pw"
    monkeypatch.setenv("T1_COMMAND_KEY", short + "!")
    assert settings.signing.command_key.load().reveal() == (short + "!").encode()


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


def test_settings_never_hold_a_secret_value(tmp_path: Path) -> None:
    """A password can only be named by file or env var, so dumping settings cannot leak it."""
    with pytest.raises(ValidationError):
        BrokerSettings.model_validate({"auth": {"username": "t1", "password": "plain-text"}})
    settings = BrokerSettings.model_validate({"auth": {"username": "t1", "password": {"env": "PW"}}})
    assert "PW" in settings.model_dump_json()


def test_topics() -> None:
    topics = TableTopics("T-01.a")
    assert topics.events == "baccarat/v1/T-01.a/events"
    assert topics.cmd_reply == "baccarat/v1/T-01.a/cmd/reply"
    for bad in ["", "a/b", "+", "#", "a b", "x" * 65, "-lead"]:
        with pytest.raises(TopicError):
            TableTopics(bad)


def test_backoff_doubles_with_jitter_and_caps() -> None:
    backoff = Backoff(0.5, 8.0, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(8)]
    ceilings = [0.5, 1, 2, 4, 8, 8, 8, 8]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert len({round(d, 6) for d in delays[4:]}) > 1  # jittered, not a fixed 8 s
    backoff.reset()
    assert backoff.next_delay() <= 0.5


@pytest.fixture
def verifier(tmp_path: Path) -> CommandVerifier:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    keyring = Keyring([CommandKey(LEGACY_KEY_ID, frozenset(Role), KEY, legacy=True)])
    return CommandVerifier("T1", keyring, SigningSettings(command_max_skew_s=30), journal, clock=time.time)


def check(verifier: CommandVerifier, command: dict[str, object] | bytes) -> Verified | Refusal:
    payload = command if isinstance(command, bytes) else json.dumps(command).encode()
    return verifier.check(payload)


def test_verifier_accepts_a_good_command(verifier: CommandVerifier) -> None:
    command = signed_command(KEY, "T1", "assign_card", {"slot": "P3", "card": "8s"})
    validate_payload("x/cmd", json.dumps(command).encode())
    outcome = check(verifier, command)
    assert isinstance(outcome, Verified)
    assert outcome.command.args == {"slot": "P3", "card": "8s"}


def test_lock_and_unlock_are_engine_commands(verifier: CommandVerifier) -> None:
    for action in ("lock", "unlock"):
        outcome = check(verifier, signed_command(KEY, "T1", action))
        assert isinstance(outcome, Verified)
        assert outcome.command.action == action


def test_a_refusal_names_the_claimed_actor(verifier: CommandVerifier) -> None:
    forged = {**signed_command(KEY, "T1", "void_round"), "sig": "0" * 64}
    outcome = check(verifier, forged)
    assert isinstance(outcome, Refusal)
    assert (outcome.code, outcome.actor, outcome.action) == ("bad_signature", "supervisor:test", "void_round")


@pytest.mark.parametrize(
    ("mutate", "code", "fragment"),
    [
        (lambda c: c.update(ts="soon"), "malformed", "ts"),
        (lambda c: c.update(nonce="short"), "malformed", "nonce"),
        (lambda c: c.pop("actor"), "malformed", "actor"),
        (lambda c: c.update(args=[1]), "malformed", "args"),
        (lambda c: c.update(args={"x": "y" * 5000}), "malformed", "args"),
        (lambda c: c.update(sig="zz"), "malformed", "sig"),
        (lambda c: c.update(ts=float("nan")), "malformed", "ts"),
    ],
)
def test_malformed_fields_are_named(verifier: CommandVerifier, mutate, code: str, fragment: str) -> None:
    command = signed_command(KEY, "T1", "void_round")
    mutate(command)
    outcome = verifier.check(json.dumps(command).encode())
    assert isinstance(outcome, Refusal)
    assert outcome.code == code
    assert fragment in outcome.reason


def test_unauthenticated_commands_do_not_consume_nonces(verifier: CommandVerifier) -> None:
    good = signed_command(KEY, "T1", "void_round")
    forged = {**good, "sig": "0" * 64}
    assert isinstance(check(verifier, forged), Refusal)
    assert isinstance(check(verifier, good), Verified)  # the forged copy did not burn the nonce


def test_oversized_payload(verifier: CommandVerifier) -> None:
    outcome = check(verifier, b" " * 20000)
    assert isinstance(outcome, Refusal)
    assert outcome.code == "malformed"


def test_command_schema_lists_exactly_the_accepted_actions() -> None:
    from daemon.mqtt.commands import ENGINE_ACTIONS
    from daemon.mqtt.contract import load_schema
    from daemon.mqtt.roles import PUBLISHER_ACTIONS

    schema_actions = set(load_schema("command")["properties"]["action"]["enum"])
    assert schema_actions == ENGINE_ACTIONS | PUBLISHER_ACTIONS


def test_a_lone_surrogate_is_malformed_not_an_internal_error(verifier: CommandVerifier) -> None:
    command = signed_command(KEY, "T1", "void_round")
    payload = json.dumps(command).replace(command["command_id"], "\\ud800", 1).encode()
    outcome = verifier.check(payload)
    assert isinstance(outcome, Refusal)
    assert outcome.code == "malformed"
    assert "not valid Unicode" in outcome.reason
    assert outcome.command_id is None  # nothing unencodable is echoed into the journal or reply


@pytest.mark.parametrize("depth", [9, 5000])
def test_deep_nesting_is_malformed(verifier: CommandVerifier, depth: int) -> None:
    command = signed_command(KEY, "T1", "void_round")
    nested = "[" * depth + "]" * depth
    payload = json.dumps(command)[:-1] + f', "x": {nested}}}'
    outcome = verifier.check(payload.encode())
    assert isinstance(outcome, Refusal)
    assert (outcome.code, outcome.reason) == ("malformed", "command is nested deeper than 8 levels")


def test_a_refused_command_echoes_bounded_fields(verifier: CommandVerifier) -> None:
    junk = {**signed_command(KEY, "T1", "void_round"), "command_id": "c" * 10_000, "actor": "a" * 3000}
    outcome = check(verifier, {**junk, "sig": "0" * 64})
    assert isinstance(outcome, Refusal)
    assert outcome.command_id is not None
    assert outcome.actor is not None
    assert len(outcome.command_id) < 160
    assert outcome.command_id.endswith("(10000 characters)")
    assert len(outcome.actor) < 160
    assert len(outcome.reason) <= 600


@pytest.mark.parametrize(
    ("topic", "allowed"),
    [
        ("baccarat/v1/T1/cmd/reply/pit-7", True),
        ("baccarat/v1/T1/cmd/reply/a/b", True),
        ("baccarat/v1/T1/events", False),
        ("baccarat/v1/T1/state", False),
        ("baccarat/v1/T1/status", False),
        ("baccarat/v1/T2/cmd/reply/x", False),
        ("baccarat/v1/T1/cmd/replyx", False),
        ("baccarat/v1/T1/cmd/reply/+", False),
        ("baccarat/v1/T1/cmd/reply/#", False),
    ],
)
def test_a_response_topic_must_lie_in_the_tables_reply_subtree(topic: str, allowed: bool) -> None:
    assert reply_topic_allowed(topic, TableTopics("T1").cmd_reply) is allowed
