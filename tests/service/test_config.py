"""The daemon config: shipped files validate; bad files report every error at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.yamlfile import format_key_path
from daemon.mqtt.settings import BrokerSettings
from daemon.rules.main_bets import BankerBet
from daemon.service.config import DEFAULTS_FILE, load_config
from daemon.service.configfile import ConfigError
from daemon.service.probes import probe_secrets
from drivers.pty_device import PtyDevice
from tests.support.broker import MosquittoBroker, free_port
from tests.support.secrets import write_secret

CONFIG_DIR = DEFAULTS_FILE.parent


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_shipped_config_files_validate() -> None:
    # the example names secret files that exist only on a table's machine
    example = load_config(CONFIG_DIR / "table.example.yaml", check_secrets=False)
    assert example.config.table_id == "T07"
    assert example.config.broker.tls.verify is True
    assert example.config.journal.path == Path("/var/lib/baccarat-edge/journal.sqlite3")
    assert example.variant.name
    defaults = load_config(None, check_secrets=False)  # the demo generates its keys
    assert defaults.config.broker.protocol.value == "mqtt311"
    assert defaults.config.journal.path == defaults.config.state_dir / "journal.sqlite3"


BAD = """\
table_id: "T/7"
table:
  decks: 9
  variant: no-such-variant
readers:
  - driver: angel_eye
    settings:
      url: /dev/ttyUSB0
      baudrate: fast
  - driver: teleport
broker:
  tls:
    verfy: true
  signing:
    command_key: {file: /nonexistent/command.key}
colour: red
"""


def test_bad_config_reports_every_error_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    found = {format_key_path(p.path): p for p in info.value.problems}
    assert {
        "table_id",
        "table.decks",
        "readers[0].settings.baudrate",
        "readers[1].driver",
        "broker.tls.verfy",
        "colour",
        "table.variant",  # with the other mistakes, not after they are fixed
    } <= set(found)
    assert "standard" in found["table.variant"].message  # lists the shipped variants
    assert found["table_id"].line == 1
    assert found["table.decks"].line == 3
    assert found["readers[0].settings.baudrate"].line == 9
    assert "teleport" in found["readers[1].driver"].message
    assert "angel_eye" in found["readers[1].driver"].message
    assert found["broker.tls.verfy"].message.startswith("unknown key")
    assert all(p.source == str(path) for p in info.value.problems)
    assert found["table.variant"].line == 4


def test_unreadable_secrets_are_config_errors_reported_with_the_rest(tmp_path: Path) -> None:
    """Secrets are read while loading, beside every other mistake, before anything is created."""
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\ntable:\n  decks: 0\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/x}\n"
        "broker:\n  auth:\n    username: t7\n    password: {env: T7_PASSWORD_UNSET}\n"
        f"  signing:\n    events_key: {{file: {tmp_path / 'missing.key'}}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    found = {format_key_path(p.path): p for p in info.value.problems}
    assert set(found) == {"table.decks", "broker.auth.password", "broker.signing.events_key"}
    assert "T7_PASSWORD_UNSET" in found["broker.auth.password"].message
    assert found["broker.auth.password"].line == 11
    assert "missing.key" in found["broker.signing.events_key"].message
    assert not (tmp_path / "state").exists()


def test_an_unreadable_keyring_key_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    good = write_secret(tmp_path / "sup-anna.key", "the key of anna, long enough\n")
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/x}\n"
        "broker:\n  signing:\n    command_keys:\n"
        f"      - {{key_id: sup-anna, role: supervisor, secret: {{file: {good}}}}}\n"
        f"      - {{key_id: tech-bo, role: technician, secret: {{file: {tmp_path / 'missing.key'}}}}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    [problem] = info.value.problems
    assert format_key_path(problem.path) == "broker.signing.command_keys[1].secret"
    assert "missing.key" in problem.message
    assert problem.line == 10


def test_duplicate_device_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(
        "table_id: T7\nreaders:\n  - driver: angel_eye\n    settings: {url: /dev/a}\n"
        "  - driver: ascii_lines\n    settings: {url: /dev/b}\n"
    )
    with pytest.raises(
        ConfigError, match=r"readers\[1\]\.settings\.device_name: device name 'reader' is used twice"
    ):
        load_config(path, environ={})


def test_environment_overrides_secret_locations(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text("table_id: T7\nreaders:\n  - driver: angel_eye\n    settings: {url: /dev/a}\n")
    env = {
        "BACCARAT_EDGE__BROKER__AUTH__USERNAME": "table-t7",
        "BACCARAT_EDGE__BROKER__AUTH__PASSWORD__FILE": "/run/credentials/baccarat-edge.service/mqtt",
        "BACCARAT_EDGE__STATE_DIR": str(tmp_path / "state"),
    }
    loaded = load_config(path, environ=env, check_secrets=False)  # only where they are read from
    auth = loaded.config.broker.auth
    assert auth is not None
    assert auth.username == "table-t7"
    assert auth.password is not None
    assert auth.password.file == Path("/run/credentials/baccarat-edge.service/mqtt")
    assert loaded.config.journal.path == tmp_path / "state" / "journal.sqlite3"


def test_run_refuses_a_bad_config_with_ex_config(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(BAD)
    result = _cli("run", "--config", str(path))
    assert result.returncode == 78
    assert "configuration errors" in result.stderr
    assert f"{path}:3: table.decks:" in result.stderr


def test_run_with_a_missing_secret_exits_ex_config_and_names_it(tmp_path: Path) -> None:
    path = _valid_config(tmp_path, "/dev/null", free_port())
    path.write_text(path.read_text() + "  signing:\n    events_key: {env: T7_EVENTS_KEY_UNSET}\n")
    result = _cli("run", "--config", str(path))
    assert result.returncode == 78
    assert "broker.signing.events_key: environment variable T7_EVENTS_KEY_UNSET" in result.stderr
    assert not (tmp_path / "state").exists()  # checked before any side effect: no journal created


def test_check_config_reports_invalid_file(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(BAD)
    result = _cli("check-config", str(path))
    assert result.returncode == 1
    assert f"{path}:13: broker.tls.verfy: unknown key" in result.stderr


def _valid_config(tmp_path: Path, device: str, port: int) -> Path:
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        f"readers:\n  - driver: angel_eye\n    settings: {{url: {device}}}\n"
        f"broker:\n  host: 127.0.0.1\n  port: {port}\n  tls: {{enabled: false}}\n"
    )
    return path


def test_check_config_says_the_device_is_missing_and_the_broker_unreachable(tmp_path: Path) -> None:
    path = _valid_config(tmp_path, str(tmp_path / "baccarat-shoe"), free_port())
    result = _cli("check-config", str(path), "--timeout", "2")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "valid — table T7" in result.stdout
    assert (
        f"[PROBLEM] reader 'reader' (angel_eye): {tmp_path / 'baccarat-shoe'} does not exist" in result.stdout
    )
    assert "[PROBLEM] broker: 127.0.0.1:" in result.stdout
    assert "unreachable" in result.stdout
    assert "[ok] state directory" in result.stdout
    assert "[ok] command key: not configured: every supervisor command is refused" in result.stdout


def test_check_config_says_a_secret_is_missing_without_showing_any(tmp_path: Path) -> None:
    path = _valid_config(tmp_path, "/dev/null", free_port())
    path.write_text(
        path.read_text()
        + "  signing:\n    events_key: {env: T7_EVENTS_KEY}\n    command_key: {file: "
        + str(tmp_path / "command.key")
        + "}\n"
    )
    # keys long enough for any minimum HMAC key length
    write_secret(tmp_path / "command.key", "s3cr3t-command-key-0123456789abcdef\n")
    result = _cli("check-config", str(path), "--timeout", "1", env={"T7_EVENTS_KEY": ""})
    assert result.returncode == 2  # the file is valid; the secret it names is not
    assert "broker.signing.events_key: secret from env T7_EVENTS_KEY is empty" in result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr
    write_secret(tmp_path / "events.key", "an-events-key-0123456789abcdef-xyz\n")
    path.write_text(path.read_text().replace("{env: T7_EVENTS_KEY}", f"{{file: {tmp_path / 'events.key'}}}"))
    result = _cli("check-config", str(path), "--timeout", "1", "--allow-insecure")
    assert f"[ok] command key: readable from file {tmp_path / 'command.key'} (35 bytes)" in result.stdout
    assert "s3cr3t" not in result.stdout + result.stderr
    assert "an-events-key-0123456789abcdef-xyz" not in result.stdout


@pytest.mark.mosquitto
def test_check_config_finds_the_device_and_the_broker(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    try:
        path = _valid_config(tmp_path, shoe.path, mosquitto.port)
        result = _cli("check-config", str(path), "--allow-insecure")  # a lab broker: no login
    finally:
        shoe.unplug()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING] security: no broker.auth" in result.stdout
    assert "character device, opens read-write" in result.stdout
    assert (
        f"[ok] broker MQTT: mqtt://127.0.0.1:{mosquitto.port} (MQTT 5): connection accepted" in result.stdout
    )
    assert "everything it points at was found" in result.stdout


@pytest.mark.mosquitto
def test_check_config_reports_a_refused_login(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker", extra_config="allow_anonymous false")
    broker.start()
    try:
        shoe = PtyDevice(tmp_path / "baccarat-shoe")
        try:
            path = _valid_config(tmp_path, shoe.path, broker.port)
            result = _cli("check-config", str(path))
        finally:
            shoe.unplug()
    finally:
        broker.stop()
    assert result.returncode == 2
    assert "[PROBLEM] broker MQTT" in result.stdout
    assert "refused" in result.stdout


def test_check_config_flags_every_insecure_broker_setting(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    base = (
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/x}\n"
    )
    path.write_text(base + "broker:\n  host: broker.example\n  tls: {verify: false}\n")
    result = _cli("check-config", str(path), "--no-probe")
    assert result.returncode == 2, result.stdout + result.stderr
    problems = [line.strip() for line in result.stdout.splitlines() if "[PROBLEM] security" in line]
    assert len(problems) == 3, result.stdout
    assert "broker.tls.verify is false" in problems[0]
    assert "no broker.auth" in problems[1]
    assert "no broker.signing.events_key" in problems[2]
    assert "--allow-insecure" in result.stdout
    # clear text to a remote host; login and signing configured
    write_secret(tmp_path / "pw", "pw\n")
    write_secret(tmp_path / "events.key", "k" * 32 + "\n")
    path.write_text(
        base + "broker:\n  host: 10.1.2.3\n  tls: {enabled: false}\n"
        f"  auth: {{username: t7, password: {{file: {tmp_path / 'pw'}}}}}\n"
        f"  signing: {{events_key: {{file: {tmp_path / 'events.key'}}}}}\n"
    )
    result = _cli("check-config", str(path), "--no-probe", "--json")
    assert result.returncode == 2
    report = json.loads(result.stdout)
    [finding] = [f for f in report["findings"] if f["subject"] == "security"]
    assert finding["ok"] is False
    assert "clear text" in finding["detail"]
    assert "'10.1.2.3'" in finding["detail"]
    result = _cli("check-config", str(path), "--no-probe", "--allow-insecure")
    assert result.returncode == 0
    assert "[WARNING] security: broker.tls.enabled is false" in result.stdout
    # the same on the loopback interface is fine
    path.write_text(path.read_text().replace("10.1.2.3", "127.0.0.1"))
    result = _cli("check-config", str(path), "--no-probe")
    assert result.returncode == 0, result.stdout
    assert "security" not in result.stdout


def all_keys() -> set[str]:
    """Every key path the config reference documents."""
    from daemon.service.config import READER_DRIVERS, DaemonConfig
    from daemon.service.config_docs import rows
    from drivers.registry import load

    keys = {k for k, *_ in rows(DaemonConfig, "")}
    for driver in READER_DRIVERS:
        keys |= {k for k, *_ in rows(load(driver).settings, "readers[].settings")}
    keys |= {k for k, *_ in rows(load("camera").settings, "camera.settings")}
    return keys


def test_config_readme_documents_every_key() -> None:
    from daemon.service.config_docs import README

    text = README.read_text()
    missing = sorted(k for k in all_keys() if f"`{k}`" not in text)
    assert missing == [], (
        f"config/README.md lacks {missing}: run `python -m daemon.service.config_docs --write`"
    )


HOUSE_VARIANT = """\
name: house
bets:
  - name: Banker
    kind: banker
    payout: 0.9   # the casino's own commission
  - name: Player
    kind: player
    payout: 1
"""


def _config_naming_variant(folder: Path, variant: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {folder / 'state'}\ntable:\n  variant: {variant}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/ttyUSB0}\n"
    )
    return path


def test_a_casino_variant_file_is_loaded_relative_to_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "etc"
    (folder / "variants").mkdir(parents=True)
    (folder / "variants" / "house.yaml").write_text(HOUSE_VARIANT)
    path = _config_naming_variant(folder, "variants/house.yaml")
    monkeypatch.chdir(tmp_path)  # not the config's folder: the path is not read from here
    loaded = load_config(path, environ={}, check_secrets=False)
    assert loaded.variant.name == "house"
    banker = loaded.variant.bet("Banker")
    assert isinstance(banker, BankerBet)
    assert str(banker.payout) == "9/10"
    assert loaded.config.table.variant == "variants/house.yaml"
    absolute = _config_naming_variant(tmp_path / "other", str(folder / "variants" / "house.yaml"))
    assert load_config(absolute, environ={}, check_secrets=False).variant.digest == loaded.variant.digest


def test_a_bad_casino_variant_file_is_refused_naming_config_key_file_bet_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "house.yaml").write_text(HOUSE_VARIANT.replace("payout: 0.9", "payot: 0.9"))
    path = _config_naming_variant(folder, "house.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={}, check_secrets=False)
    (problem,) = info.value.problems
    assert (problem.source, format_key_path(problem.path), problem.line) == (str(path), "table.variant", 4)
    assert str(folder / "house.yaml") in problem.message
    assert "bet 'Banker'" in problem.message
    assert "'payot'" in problem.message
    missing = _config_naming_variant(tmp_path / "none", "variants/gone.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(missing, environ={}, check_secrets=False)
    assert f"{tmp_path / 'none' / 'variants' / 'gone.yaml'}: variant file not found" in str(info.value)


def test_check_config_probes_every_keyring_key(tmp_path: Path) -> None:
    anna = write_secret(tmp_path / "sup-anna.key", "the key of anna, long enough\n")
    settings = BrokerSettings.model_validate(
        {
            "signing": {
                "command_keys": [
                    {"key_id": "sup-anna", "role": "supervisor", "secret": {"file": str(anna)}},
                    {
                        "key_id": "tech-bo",
                        "role": "technician",
                        "secret": {"file": str(tmp_path / "gone.key")},
                    },
                ]
            }
        }
    )
    findings = {f.subject: f for f in probe_secrets(settings)}
    assert set(findings) == {"command key sup-anna (supervisor)", "command key tech-bo (technician)"}
    assert findings["command key sup-anna (supervisor)"].ok
    assert not findings["command key tech-bo (technician)"].ok
    assert "gone.key" in findings["command key tech-bo (technician)"].detail
    assert "anna, long" not in repr(findings)


CAMERA = (
    "source: /tmp, templates: /tmp/deck.npz, layout: {"
    + ", ".join(
        f"{slot}: {{x0: {0.1 * i:.1f}, y0: 0.1, x1: {0.1 * i + 0.05:.2f}, y1: 0.9}}"
        for i, slot in enumerate(("P1", "P2", "P3", "B1", "B2", "B3", "shoe_mouth"), start=1)
    )
    + "}"
)


def test_a_camera_renamed_without_table_camera_devices_is_refused(tmp_path: Path) -> None:
    """A camera named other than in table.camera.devices would count as a reader."""
    path = tmp_path / "table.yaml"
    base = "table_id: T7\nreaders:\n  - driver: ascii_lines\n    settings: {url: /dev/a}\n"
    camera = f"camera:\n  settings: {{{CAMERA}, device: overhead}}\n"
    path.write_text(base + camera)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    [problem] = info.value.problems
    assert format_key_path(problem.path) == "camera.settings.device"
    assert "'overhead' is not in table.camera.devices ['camera']" in problem.message
    assert problem.line == 6
    path.write_text(base + camera + "table:\n  camera:\n    devices: [overhead]\n")
    assert load_config(path, environ={}).config.table.camera.devices == ("overhead",)


def test_a_reader_named_as_a_camera_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(
        "table_id: T7\nreaders:\n  - driver: ascii_lines\n    settings: {url: /dev/a, device_name: camera}\n"
    )
    with pytest.raises(ConfigError, match=r"table\.camera\.devices: reader 'camera' is named in"):
        load_config(path, environ={})


def test_a_camera_with_a_reader_s_name_is_refused_at_its_own_key(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(
        "table_id: T7\nreaders:\n  - driver: ascii_lines\n    settings: {url: /dev/a}\n"
        f"camera:\n  settings: {{{CAMERA}, device: reader}}\n"
        "table:\n  camera:\n    devices: [reader]\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    paths = sorted(format_key_path(problem.path) for problem in info.value.problems)
    assert paths == ["camera.settings.device", "table.camera.devices"]


def _table(tmp_path: Path, reader: str, table: str = "") -> Path:
    path = tmp_path / "table.yaml"
    path.write_text("table_id: T7\nreaders:\n" + reader + table)
    return path


LINE_BUTTON = (
    "  - driver: ascii_lines\n    settings:\n      url: /dev/a\n"
    "      protocol: {signals: {betting_closed: [BTN]}}\n"
)
LOCKING_SHOE = (
    "  - driver: angel_eye\n    settings:\n      url: /dev/a\n"
    "      protocol: {lock_is_betting_window: true}\n"
)


def test_betting_inputs_of_a_reader_need_the_table_to_take_its_window_from_them(tmp_path: Path) -> None:
    """A dealer button or the shoe's lock as the betting window, configured on both sides."""
    with pytest.raises(ConfigError) as info:
        load_config(_table(tmp_path, LINE_BUTTON), environ={})
    [problem] = info.value.problems
    assert format_key_path(problem.path) == "readers[0].settings.protocol.signals"
    assert "sends betting inputs from a button" in problem.message
    assert "nowhere (game_flow cards_only)" in problem.message
    both = "table:\n  game_flow: betting_window\n  betting: {source: button}\n"
    assert (
        load_config(_table(tmp_path, LINE_BUTTON, both), environ={}).config.table.betting.source == "button"
    )
    with pytest.raises(
        ConfigError, match=r"readers\[0\]\.settings\.protocol\.lock_is_betting_window: .*from server"
    ):
        load_config(_table(tmp_path, LOCKING_SHOE, "table:\n  game_flow: betting_window\n"), environ={})
    lock = "table:\n  game_flow: betting_window\n  betting: {source: shoe_lock}\n"
    assert (
        load_config(_table(tmp_path, LOCKING_SHOE, lock), environ={}).config.table.game_flow
        == "betting_window"
    )


def test_a_betting_source_no_reader_sends_is_refused(tmp_path: Path) -> None:
    plain = "  - driver: angel_eye\n    settings: {url: /dev/a}\n"
    for source, hint in (("button", "signals.betting_closed"), ("shoe_lock", "lock_is_betting_window: true")):
        table = f"table:\n  game_flow: betting_window\n  betting: {{source: {source}}}\n"
        with pytest.raises(ConfigError) as info:
            load_config(_table(tmp_path, plain, table), environ={})
        [problem] = info.value.problems
        assert format_key_path(problem.path) == "table.betting.source"
        assert hint in problem.message


@pytest.mark.parametrize(
    ("table", "signing", "key", "message"),
    [
        (
            "{game_flow: betting_window}",
            "",
            "table.betting.source",
            "no command key holds the game_server role",
        ),
        (
            "{game_flow: betting_window, betting: {source: shoe_lock}}",
            "",
            "table.betting.source",
            "no reader reports it",
        ),
        (
            "{game_flow: betting_window, betting: {source: button, lock_shoe: true}}",
            "",
            "table.betting.lock_shoe",
            "the shoe could never lock",
        ),
    ],
)
def test_a_betting_window_that_could_never_work_is_refused(
    tmp_path: Path, table: str, signing: str, key: str, message: str
) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\ntable: {table}\nreaders:\n  - driver: ascii_lines\n    settings: {{url: /dev/a}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    # (a button source also needs a reader sending the button: device_checks reports that too)
    found = [p for p in info.value.problems if format_key_path(p.path) == key and message in p.message]
    assert len(found) == 1, info.value.problems


def test_a_betting_window_with_a_game_server_key_and_an_angel_eye_loads(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "gs.key", "the game server key, long enough\n")
    path = tmp_path / "table.yaml"
    path.write_text(
        "table_id: T7\ntable: {game_flow: betting_window, betting: {lock_shoe: true}}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/a}\n"
        "broker:\n  signing:\n    command_keys:\n"
        f"      - {{key_id: gs-1, role: game_server, secret: {{file: {key}}}}}\n"
    )
    loaded = load_config(path, environ={})
    assert loaded.config.table.betting.lock_shoe is True
