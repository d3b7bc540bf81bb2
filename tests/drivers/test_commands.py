"""The technician's commands: decode, simulate, replay, record (run as the CLI runs them)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from daemon.cli import main
from drivers.fixtures import load_fixture
from drivers.protocols.angel_eye_codec import encode_frame
from drivers.pty_device import PtyDevice
from drivers.replay import replay_fixture
from tests.conftest import REPO_ROOT


@pytest.fixture(autouse=True)
def _keep_structlog_config() -> Iterator[None]:
    """Commands run in-process here; leave the logging configuration as the next test expects it."""
    was_configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if was_configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


P1_8S = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
VERDICT = encode_frame(ord("2"), "G", bytes([0x91]))


def cli(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "daemon.cli", *argv]
    return subprocess.run(command, cwd=REPO_ROOT, input=stdin, capture_output=True, timeout=120, check=False)


def test_decode_prints_one_json_object_per_frame() -> None:
    result = cli("decode", "--protocol", "angel_eye", "-", stdin=P1_8S * 2 + b"\x00junk" + VERDICT[:-1])
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [line["status"] for line in lines] == ["input", "duplicate", "rejected", "rejected"]
    assert lines[0]["input"]["card"] == "8s"
    assert lines[0]["input"]["target"] == "P1"
    assert lines[2]["reason"] == "bytes outside any frame"
    assert lines[3]["reason"] == "incomplete frame at end of input"


def test_decode_hex_input_and_settings_file(tmp_path: Path) -> None:
    settings = tmp_path / "lines.yaml"
    settings.write_text("unmatched: reject\nmax_line_length: 8\n")
    text = b"53 30 38 0d 0a  58 58 0a"  # "S08\r\nXX\n"
    result = cli("decode", "--protocol", "ascii_lines", "--hex", "--settings", str(settings), stdin=text)
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [line["status"] for line in lines] == ["input", "rejected"]
    settings.write_text("max_line_lenght: 8\n")
    result = cli("decode", "--protocol", "ascii_lines", "--settings", str(settings), stdin=b"")
    assert result.returncode == 2
    assert f"{settings}: max_line_lenght: Extra inputs are not permitted" in result.stderr.decode()


def test_decode_a_fixture_file() -> None:
    path = REPO_ROOT / "hw-fixtures" / "usb_hid-misread.fixture.jsonl"
    result = cli("decode", "--protocol", "usb_hid", "--fixture", str(path))
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert sum(line["input"]["type"] == "ReadFailed" for line in lines if "input" in line) == 1
    assert result.returncode == 0
    wrong = cli("decode", "--protocol", "angel_eye", "--fixture", str(path))
    assert wrong.returncode == 2
    assert "is a usb_hid fixture" in wrong.stderr.decode()


def test_decode_recognises_a_fixture_by_its_header_and_takes_its_protocol() -> None:
    path = REPO_ROOT / "hw-fixtures" / "angel_eye-corrupt-card-frame.fixture.jsonl"
    explicit = cli("decode", "--protocol", "angel_eye", "--fixture", str(path))
    detected = cli("decode", str(path))
    assert detected.returncode == 0, detected.stderr
    assert detected.stdout == explicit.stdout
    lines = [json.loads(line) for line in detected.stdout.decode().splitlines()]
    assert sum(line["status"] == "input" for line in lines) > 20
    assert not [line for line in lines if line.get("reason") == "bytes outside any frame"]
    assert sum("rescan" in line for line in lines) == 1  # the card frame whose every copy is corrupted
    piped = cli("decode", "-", stdin=path.read_bytes())
    assert piped.stdout == explicit.stdout


def test_decode_refuses_json_that_is_not_a_fixture_and_raw_bytes_without_a_protocol() -> None:
    expected = REPO_ROOT / "hw-fixtures" / "angel_eye-clean.expected.jsonl"
    result = cli("decode", "--protocol", "angel_eye", str(expected))
    assert result.returncode == 2
    assert "is JSON text, not reader bytes" in result.stderr.decode()
    assert result.stdout == b""
    raw = cli("decode", "-", stdin=P1_8S)
    assert raw.returncode == 2
    assert "--protocol is required for raw reader bytes" in raw.stderr.decode()
    broken = cli("decode", "--fixture", "-", stdin=b'{"format": "baccarat-edge-fixture", "name": "x"}\n')
    assert broken.returncode == 2
    assert "<stdin>:1: header:" in broken.stderr.decode()


def test_decode_hints_on_stderr_when_stdin_is_a_terminal() -> None:
    import os

    controller, terminal = os.openpty()
    try:
        command = [sys.executable, "-m", "daemon.cli", "decode", "--protocol", "angel_eye"]
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert process.stderr is not None
        hint = process.stderr.readline().decode()  # printed before the first read
        assert "reading reader bytes from the terminal" in hint
        os.write(controller, b"\x04")  # Ctrl-D at the start of a line: end of input
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        assert out == b""
    finally:
        os.close(controller)
        os.close(terminal)


def test_simulate_writes_a_fixture_and_replay_checks_it(tmp_path: Path) -> None:
    out = tmp_path / "lines.fixture.jsonl"
    assert main(["simulate", "--protocol", "ascii_lines", "--hands", "3", "--seed", "4",
                 "--fault", "misread@2", "--fixture", str(out), "--expected"]) == 0  # fmt: skip
    fixture = load_fixture(out)
    assert fixture.header.generator["faults"] == ["misread@2"]
    assert (tmp_path / "lines.expected.jsonl").is_file()
    assert main(["replay", str(out), "--check"]) == 0
    expected = tmp_path / "lines.expected.jsonl"
    expected.write_text(expected.read_text().replace('"hand": 2', '"hand": 7', 1))
    assert main(["replay", str(out), "--check"]) == 1


def test_simulate_refuses_bad_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--fault", "misred@2", "--fixture", "/dev/null"]) == 2
    assert "unknown fault 'misred'" in capsys.readouterr().err
    assert (
        main(["simulate", "--protocol", "usb_hid", "--fault", "bad_checksum@2", "--fixture", "/dev/null"])
        == 2
    )


def test_simulate_plays_into_a_pty_a_reader_can_open(tmp_path: Path) -> None:
    link = tmp_path / "shoe"
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "simulate", "--protocol", "ascii_lines", "--hands", "2",
         "--link", str(link), "--speed", "50"],
        cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdin is not None
        assert "virtual ascii_lines shoe on" in process.stdout.readline().decode()
        import serial

        port = serial.serial_for_url(str(link), timeout=0.5)
        process.stdin.write(b"\n")
        process.stdin.flush()
        received = b""
        deadline = time.monotonic() + 30
        while received.count(b"\n") < 8 and time.monotonic() < deadline:
            received += port.read(256)
        port.close()
    finally:
        process.wait(timeout=60)
    assert received.count(b"\r\n") >= 8  # indicator, burns and two rounds of lines
    assert process.returncode == 0


def test_record_a_live_serial_device_then_replay_it(tmp_path: Path) -> None:
    device = PtyDevice(tmp_path / "shoe")
    out = tmp_path / "live.fixture.jsonl"
    argv = ["record", "--driver", "angel_eye", "--url", device.path, "--out", str(out), "--duration", "4"]
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", *argv], cwd=REPO_ROOT, stderr=subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        assert "recording angel_eye" in process.stderr.readline().decode()
        assert "device connected" in process.stderr.readline().decode()  # opened (and flushed) the port
        device.write(P1_8S * 3 + b"noise")
        time.sleep(0.2)
        device.write(VERDICT * 3)
    finally:
        process.wait(timeout=60)
        device.close()
    assert process.returncode == 0
    fixture = load_fixture(out)
    assert fixture.header.origin == "recorded"
    assert b"".join(s.data or b"" for s in fixture.steps) == P1_8S * 3 + b"noise" + VERDICT * 3
    inputs: list[object] = []
    replay_fixture(fixture, inputs.append, final_tick=False)
    kinds = [type(i).__name__ for i in inputs]
    assert kinds == ["DeviceConnection", "CardRead", "ShoeVerdict"]


@pytest.mark.parametrize(
    ("protocol", "data", "trailer", "reason"),
    [
        # nothing but garbage: no frame start at all
        ("angel_eye", b"garbage", b"garbage", "bytes outside any frame"),
        # garbage after the last whole frame
        ("angel_eye", P1_8S + b"garbage", b"garbage", "bytes outside any frame"),
        # a last line never ended
        ("ascii_lines", b"8S\r\nno newline", b"no newline", "incomplete frame at end of input"),
    ],
)
def test_decode_reports_the_bytes_after_the_last_frame(
    protocol: str, data: bytes, trailer: bytes, reason: str
) -> None:
    result = cli("decode", "--protocol", protocol, "-", stdin=data)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert lines, "the trailing bytes were dropped silently"
    last = lines[-1]
    assert last["status"] == "rejected"
    assert bytes.fromhex(last["raw"]) == trailer
    assert last["reason"] == reason
    decoded = [line for line in lines if line["status"] == "input"]
    assert len(decoded) == (0 if data == trailer else 1)


def _start_record(tmp_path: Path, device: PtyDevice, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "live.fixture.jsonl"
    argv = ["record", "--driver", "angel_eye", "--url", device.path, "--out", str(out), *extra]
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", *argv], cwd=REPO_ROOT, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    assert "recording angel_eye" in process.stderr.readline().decode()
    assert "device connected" in process.stderr.readline().decode()  # opened (and flushed) the port
    return process, out


def _wait_for_recorded(out: Path, data: bytes, timeout: float = 30.0) -> None:
    """Until the file on disk holds ``data``: the recorder writes as it captures."""
    deadline = time.monotonic() + timeout
    while True:
        recorded = b"".join(s.data or b"" for s in load_fixture(out).steps)
        if recorded == data:
            return
        assert time.monotonic() < deadline, recorded
        time.sleep(0.05)


def test_record_with_protocol_settings_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    settings = tmp_path / "shoe.yaml"
    settings.write_text("command_bcc_includes_stx: false\ndedup_window: 2\n")
    device = PtyDevice(tmp_path / "shoe")
    process, out = _start_record(tmp_path, device, "--settings", str(settings))
    try:
        device.write(P1_8S * 3 + b"noise")
        _wait_for_recorded(out, P1_8S * 3 + b"noise")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert process.stderr is not None
        assert "stopped by SIGTERM" in process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)
        device.close()
    fixture = load_fixture(out)
    assert fixture.header.origin == "recorded"
    assert fixture.header.protocol_settings["command_bcc_includes_stx"] is False
    assert fixture.header.protocol_settings["dedup_window"] == 2
    assert b"".join(s.data or b"" for s in fixture.steps) == P1_8S * 3 + b"noise"


def test_a_killed_recorder_leaves_a_readable_fixture(tmp_path: Path) -> None:
    device = PtyDevice(tmp_path / "shoe")
    process, out = _start_record(tmp_path, device)
    try:
        device.write(P1_8S * 3)
        _wait_for_recorded(out, P1_8S * 3)
        device.write(VERDICT * 3)
        _wait_for_recorded(out, P1_8S * 3 + VERDICT * 3)
        process.kill()  # no clean-up at all
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)
        device.close()
    fixture = load_fixture(out)
    inputs: list[object] = []
    replay_fixture(fixture, inputs.append, final_tick=False)
    assert [type(i).__name__ for i in inputs] == ["DeviceConnection", "CardRead", "ShoeVerdict"]


def test_record_refuses_bad_protocol_settings_before_touching_the_device(tmp_path: Path) -> None:
    settings = tmp_path / "shoe.yaml"
    settings.write_text("dedup_windw: 2\n")
    out = tmp_path / "never.fixture.jsonl"
    result = cli(
        "record", "--driver", "angel_eye", "--url", str(tmp_path / "no-shoe"),
        "--out", str(out), "--settings", str(settings), "--duration", "1",
    )  # fmt: skip
    assert result.returncode == 2
    assert f"{settings}: dedup_windw: Extra inputs are not permitted" in result.stderr.decode()
    assert not out.exists()


def test_replay_write_expected_makes_the_expected_stream_the_golden_test_reads(tmp_path: Path) -> None:
    source = REPO_ROOT / "hw-fixtures" / "angel_eye-clean.fixture.jsonl"
    fixture = tmp_path / source.name
    fixture.write_bytes(source.read_bytes())
    result = cli("replay", str(fixture), "--write-expected")
    assert result.returncode == 0, result.stderr
    written = tmp_path / "angel_eye-clean.expected.jsonl"
    assert f"to {written}" in result.stderr.decode()
    assert result.stdout == b""
    assert written.read_bytes() == (REPO_ROOT / "hw-fixtures" / "angel_eye-clean.expected.jsonl").read_bytes()
    assert cli("replay", str(fixture), "--check").returncode == 0
