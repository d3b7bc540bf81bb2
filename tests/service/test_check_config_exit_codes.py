"""``check-config`` exits as the README's table says: 0 all good, 1 the file itself is invalid
or unreadable, 2 the file is valid but something it points at is not (a secret or TLS file,
a device, the broker) or a setting is insecure. Each row of the table, run as a technician runs
it (the command line, its exit status and what it printed)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.broker import MosquittoBroker, free_port
from tests.support.secrets import write_secret

REPO = Path(__file__).resolve().parents[2]
KEY = "k" * 32 + "\n"


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", "check-config", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _config(tmp_path: Path, *, port: int, reader: str = "socket://127.0.0.1:1", extra: str = "") -> Path:
    """A lab table: a TCP reader, the loopback broker without TLS, a signed events key."""
    events = write_secret(tmp_path / "events.key", KEY)
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        f"readers:\n  - driver: angel_eye\n    settings: {{url: '{reader}'}}\n"
        f"broker:\n  host: 127.0.0.1\n  port: {port}\n  tls: {{enabled: false}}\n"
        f"  signing:\n    events_key: {{file: {events}}}\n{extra}"
    )
    return path


def test_the_readme_documents_the_exit_codes_in_one_table() -> None:
    readme = (REPO / "README.md").read_text()
    rows = re.findall(r"^\| (\d) \| (.+) \|$", readme.split("`check-config` exit status", 1)[1], re.M)
    codes = [int(code) for code, _meaning in rows[:3]]
    assert codes == [0, 1, 2], rows
    assert "missing" in rows[2][1]
    assert "secret" in rows[2][1]


@pytest.mark.mosquitto
def test_0_when_the_file_is_valid_and_everything_it_points_at_was_found(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    with socket.socket() as reader:
        reader.bind(("127.0.0.1", 0))
        reader.listen(1)
        port = reader.getsockname()[1]
        path = _config(tmp_path, port=mosquitto.port, reader=f"socket://127.0.0.1:{port}")
        result = _check(str(path), "--allow-insecure")  # the lab broker takes anyone
    assert result.returncode == 0, result.stdout + result.stderr
    assert "everything it points at was found" in result.stdout


def test_1_when_the_file_itself_is_invalid(tmp_path: Path) -> None:
    path = _config(tmp_path, port=free_port(), extra="  keepalive_s: 1\n")
    result = _check(str(path), "--no-probe")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{path}:12: broker.keepalive_s: Input should be greater than or equal to 5" in result.stderr
    # a missing secret beside an invalid key: the file is still invalid, every error listed
    (tmp_path / "events.key").unlink()
    result = _check(str(path), "--no-probe", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert (report["valid"], report["file_valid"], len(report["problems"])) == (False, False, 2)


def test_1_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    result = _check(str(tmp_path / "table.yaml"), "--no-probe")
    assert result.returncode == 1, result.stdout + result.stderr
    assert str(tmp_path / "table.yaml") in result.stderr


@pytest.mark.parametrize("fault", ["missing", "open to every user", "missing TLS CA"])
def test_2_when_a_secret_or_tls_file_it_names_is_missing_or_open(tmp_path: Path, fault: str) -> None:
    extra = ""
    if fault == "missing TLS CA":
        extra = f"  tls: {{enabled: true, ca_file: {tmp_path / 'ca.pem'}}}\n"
    path = _config(tmp_path, port=free_port(), extra=extra)
    if fault == "missing TLS CA":
        path.write_text(path.read_text().replace("  tls: {enabled: false}\n", ""))
    elif fault == "missing":
        (tmp_path / "events.key").unlink()
    else:
        (tmp_path / "events.key").chmod(0o644)
    result = _check(str(path), "--no-probe")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the file itself is valid: fix the files it names" in result.stderr
    expected = {
        "missing": f"broker.signing.events_key: cannot read secret file {tmp_path / 'events.key'}: "
        "No such file or directory",
        "open to every user": f"has mode 0644, open to every user: run `chmod 640 {tmp_path / 'events.key'}`",
        "missing TLS CA": f"broker.tls.ca_file: {tmp_path / 'ca.pem'}: ",
    }[fault]
    assert expected in result.stderr
    report = json.loads(_check(str(path), "--no-probe", "--json").stdout)
    assert (report["valid"], report["file_valid"], len(report["problems"])) == (False, True, 1)


def test_2_when_a_device_or_the_broker_is_missing(tmp_path: Path) -> None:
    path = _config(tmp_path, port=free_port(), reader=str(tmp_path / "baccarat-shoe"))
    result = _check(str(path), "--timeout", "1", "--allow-insecure")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{tmp_path / 'baccarat-shoe'} does not exist" in result.stdout
    assert "unreachable" in result.stdout


def test_2_for_an_insecure_setting_without_allow_insecure(tmp_path: Path) -> None:
    path = _config(tmp_path, port=free_port())
    path.write_text(path.read_text().replace("127.0.0.1", "10.1.2.3"))
    result = _check(str(path), "--no-probe")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "[PROBLEM] security: broker.tls.enabled is false" in result.stdout
    assert _check(str(path), "--no-probe", "--allow-insecure").returncode == 0


def test_2_for_a_mistyped_command_line() -> None:
    result = _check("--no-such-option")
    assert result.returncode == 2
    assert "usage:" in result.stderr
