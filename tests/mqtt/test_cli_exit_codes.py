"""The command-line MQTT tools (``monitor``, ``tail``, ``command``) exit with one code per kind
of failure, the same from each (``daemon/commands/_mqtt_client.py``), on real mosquittos: one
nobody listens for, one with a password file, one speaking TLS with its own CA."""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.cli import main
from daemon.commands._mqtt_client import ExitCode
from tests.conftest import REPO_ROOT
from tests.support.broker import MosquittoBroker, free_port
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

PASSWORD = "correct horse battery staple"
TOOLS = ["monitor", "tail", "command"]


@pytest.fixture
def command_key(tmp_path: Path) -> Path:
    return write_secret(tmp_path / "command.key", "k" * 32 + "\n")


def run_tool(tool: str, flags: list[str], command_key: Path) -> int:
    """``baccarat-edge TOOL FLAGS...`` in this process, the tool's own flags added."""
    own = {
        "monitor": ["--table", "T1", "--once", "--wait", "0.1"],
        "tail": ["--table", "T1", "--timeout", "0.1"],
        "command": ["--table", "T1", "--key-id", "sup", "--command-key-file", str(command_key)],
    }[tool]
    argv = [tool, *own, *flags]
    if tool == "command":
        argv += ["--timeout", "1", "pause"]
    return main(argv)


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unreachable_broker_exits_3_from_each_tool(
    tool: str, command_key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    code = run_tool(tool, ["--broker", f"mqtt://127.0.0.1:{port}"], command_key)
    assert code == ExitCode.UNREACHABLE
    assert f"{tool}: cannot reach the broker at 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("tool", TOOLS)
def test_a_bad_broker_url_exits_2_from_each_tool(
    tool: str, command_key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_tool(tool, ["--broker", "http://127.0.0.1:1"], command_key) == ExitCode.USAGE
    assert "the scheme must be mqtt:// or mqtts://" in capsys.readouterr().err


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    workdir = tmp_path_factory.mktemp("auth")
    passwords = workdir / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-c", "-b", str(passwords), "T1", PASSWORD], check=True, capture_output=True
    )
    with MosquittoBroker(
        workdir / "broker",
        extra_config=f"allow_anonymous false\npassword_file {passwords}\nuser {getpass.getuser()}",
    ) as broker:
        yield broker


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mqtt", ["5", "3.1.1"])
def test_a_refused_login_exits_4_from_each_tool(
    tool: str,
    mqtt: str,
    auth_broker: MosquittoBroker,
    command_key: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = write_secret(tmp_path / "password", "not the password\n")
    flags = [
        "--broker",
        f"mqtt://127.0.0.1:{auth_broker.port}",
        "--username",
        "T1",
        "--password-file",
        str(wrong),
    ]
    assert run_tool(tool, [*flags, "--mqtt", mqtt], command_key) == ExitCode.NOT_AUTHORISED
    err = capsys.readouterr().err
    assert f"{tool}: the broker refused the connection:" in err
    assert "not the password" not in err


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MosquittoBroker, Path]]:
    pki = tmp_path_factory.mktemp("pki")
    script = REPO_ROOT / "config" / "mosquitto" / "make-pki.sh"
    subprocess.run(["bash", str(script), str(pki), "127.0.0.1", "T1"], check=True, capture_output=True)
    # a second, unrelated CA: the tools do not trust the broker with it
    subprocess.run(
        ["bash", str(script), str(pki / "rogue"), "127.0.0.1", "x"], check=True, capture_output=True
    )
    with MosquittoBroker(
        pki / "broker-dir",
        extra_config="\n".join(
            [
                f"cafile {pki / 'ca.crt'}",
                f"certfile {pki / 'broker.crt'}",
                f"keyfile {pki / 'broker.key'}",
                "tls_version tlsv1.2",
                f"user {getpass.getuser()}",
            ]
        ),
    ) as broker:
        yield broker, pki


@pytest.mark.parametrize("tool", TOOLS)
def test_a_broker_the_tool_cannot_verify_exits_5_from_each_tool(
    tool: str,
    tls_broker: tuple[MosquittoBroker, Path],
    command_key: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broker, pki = tls_broker
    flags = ["--broker", f"mqtts://127.0.0.1:{broker.port}", "--ca-file", str(pki / "rogue" / "ca.crt")]
    assert run_tool(tool, flags, command_key) == ExitCode.TLS_FAILED
    err = capsys.readouterr().err
    assert f"{tool}: TLS handshake with 127.0.0.1:{broker.port} failed" in err
    assert "certificate verify failed" in err


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unusable_ca_file_exits_5_from_each_tool(
    tool: str, command_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_pem = tmp_path / "ca.crt"
    not_pem.write_text("this is no certificate\n")
    flags = ["--broker", f"mqtts://127.0.0.1:{free_port()}", "--ca-file", str(not_pem)]
    assert run_tool(tool, flags, command_key) == ExitCode.TLS_FAILED
    assert f"{tool}: TLS set-up failed" in capsys.readouterr().err


def test_the_tls_broker_is_reachable_with_its_own_ca(
    tls_broker: tuple[MosquittoBroker, Path], command_key: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control for the test above: the same broker with the right CA lets ``tail`` in."""
    broker, pki = tls_broker
    flags = ["--broker", f"mqtts://127.0.0.1:{broker.port}", "--ca-file", str(pki / "ca.crt")]
    assert run_tool("tail", flags, command_key) == ExitCode.OK
    assert "tail: subscribed to baccarat/v1/T1/events" in capsys.readouterr().err


def test_command_without_a_table_to_answer_exits_7(
    auth_broker: MosquittoBroker, command_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    password = write_secret(tmp_path / "password", PASSWORD + "\n")
    flags = [
        "--broker",
        f"mqtt://127.0.0.1:{auth_broker.port}",
        "--username",
        "T1",
        "--password-file",
        str(password),
    ]
    assert run_tool("command", flags, command_key) == ExitCode.NO_REPLY
    assert "command: no reply within 1 s" in capsys.readouterr().err


@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_lists_the_exit_codes_in_its_help(tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([tool, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "3 broker unreachable; 4 login or subscription refused; 5 TLS failed" in out


def test_the_readme_documents_every_exit_code() -> None:
    readme = (REPO_ROOT / "README.md").read_text("utf-8")
    table = readme.split("exit with the same code\nfor the same failure", 1)[1].split("\n\n", 2)[1]
    documented = [int(line.split("|")[1]) for line in table.splitlines()[2:]]
    assert documented == [int(code) for code in ExitCode] == list(range(9))
