"""Passwords, the user file, the settings file, sessions and the tableau hint: pure parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.console.passwords import PasswordHashError, check_hash_format, hash_password, verify_password
from daemon.console.sessions import SessionStore, csrf_ok
from daemon.console.settings import load_settings
from daemon.console.tableau_hint import next_card
from daemon.console.users import PersonRole, load_users
from daemon.service.configfile import ConfigError
from tests.support.secrets import write_secret

FAST = {"n": 2**14, "r": 8, "p": 1}


def test_a_password_hash_verifies_only_its_password_and_salts_differ() -> None:
    one, two = hash_password("correct horse", **FAST), hash_password("correct horse", **FAST)
    assert one != two
    assert one.startswith("scrypt$16384$8$1$")
    assert verify_password("correct horse", one)
    assert not verify_password("correct horsE", one)
    with pytest.raises(ValueError, match="at least 10"):
        hash_password("short")
    with pytest.raises(PasswordHashError, match="cost too low"):
        check_hash_format("scrypt$1024$8$1$" + one.split("$", 4)[4])


def test_the_user_file_names_every_problem(tmp_path: Path) -> None:
    good = hash_password("a good long password", **FAST)
    path = tmp_path / "users.yaml"
    path.write_text(
        "users:\n"
        f"  - {{name: anna, password_hash: '{good}', role: supervisor}}\n"
        f"  - {{name: vic, password_hash: 'md5$abc', role: viewer}}\n"
        f"  - {{name: bo, password_hash: '{good}', role: boss, key_id: b, key_file: /x}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_users(path)
    text = str(caught.value)
    assert "users[0]" in text
    assert "give key_id and key_file" in text
    assert "users[1].password_hash" in text
    assert "scrypt$N$r$p$salt$hash" in text
    assert "users[2].role" in text


def test_a_user_file_loads_and_reads_each_key(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "sup-anna.key", "a supervisor key of some length\n")
    good = hash_password("a good long password", **FAST)
    path = tmp_path / "users.yaml"
    path.write_text(
        "users:\n"
        f"  - {{name: anna, password_hash: '{good}', role: supervisor, key_id: sup-anna, key_file: {key}}}\n"
        f"  - {{name: vic, password_hash: '{good}', role: viewer}}\n"
    )
    users = load_users(path)
    anna, vic = users.find("anna"), users.find("vic")
    assert anna is not None
    assert vic is not None
    assert "resolve_hold" in anna.role.actions
    assert not vic.role.actions
    assert PersonRole.TECHNICIAN.actions == {"lock", "unlock", "rescan_ack"}
    key.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        load_users(path)


def test_settings_errors_name_the_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "console.yaml"
    path.write_text("listen:\n  port: 99999\nusers_file: users.yaml\nsession_idel_s: 5\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    text = str(caught.value)
    assert f"{path}:2: listen.port" in text
    assert "session_idel_s" in text
    path.write_text("users_file: users.yaml\ntables: [T1, 'a/#']\n")
    with pytest.raises(ConfigError, match=r"console.yaml:2: tables: .*'a/#' is not usable in a topic"):
        load_settings(path)
    path.write_text("users_file: users.yaml\nbroker: {host: pit-broker, tls: {enabled: false}}\n")
    settings = load_settings(path)
    assert settings.users_file == tmp_path / "users.yaml"
    assert settings.broker.effective_port == 1883


def test_sessions_expire_when_idle_and_at_their_maximum() -> None:
    now = [0.0]
    store = SessionStore(idle_s=10, max_s=25, clock=lambda: now[0])
    session = store.create("anna")
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, "x")
    assert not csrf_ok(session, None)
    for t in (8.0, 16.0, 24.0):
        now[0] = t
        assert store.get(session.session_id) is session
    now[0] = 26.0
    assert store.get(session.session_id) is None  # past the maximum though active
    other = store.create("bo")
    now[0] = 36.5
    assert store.get(other.session_id) is None  # idle


@pytest.mark.parametrize(
    ("cards", "slot", "text"),
    [
        ({}, "P1", "Deal Player card 1 (P1)"),
        ({"P1": "2s", "B1": "3h"}, "P2", "Deal Player card 2 (P2)"),
        ({"P1": "8s", "B1": "3h", "P2": "Ks", "B2": "2d"}, None, "Natural: both stand"),
        ({"P1": "2s", "B1": "3h", "P2": "3s", "B2": "2d"}, "P3", "Player draws"),
        ({"P1": "2s", "B1": "3h", "P2": "3s", "B2": "3d", "P3": "8c"}, None, "Player drew; Banker stands"),
        ({"P1": "2s", "B1": "3h", "P2": "3s", "B2": "3d", "P3": "6c"}, "B3", "Player drew; Banker draws"),
        ({"P1": "4s", "B1": "3h", "P2": "3s", "B2": "2d"}, "B3", "Player stands; Banker draws"),
        ({"P1": "4s", "B1": "3h", "P2": "3s", "B2": "3d"}, None, "Player stands; Banker stands"),
    ],
)
def test_the_next_card_follows_the_tableau(cards, slot, text) -> None:
    hint = next_card(cards)
    assert (hint.slot, hint.text) == (slot, text)


def test_the_command_refuses_a_bad_config_with_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from daemon.cli import main

    path = tmp_path / "console.yaml"
    path.write_text("listen: {port: -1}\nbroker: {protocol: mqtt4}\n")
    assert main(["console", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "3 configuration errors" in err
    assert "listen.port" in err
    assert "broker.protocol" in err
    assert "users_file" in err


def test_hash_password_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from daemon.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough password\n"))
    assert main(["console", "--hash-password"]) == 0
    line = capsys.readouterr().out.strip()
    assert verify_password("a long enough password", line)
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["console", "--hash-password"]) == 2
