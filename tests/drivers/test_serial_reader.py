"""Serial driver on real ptys and a real TCP serial server: reads, unplug/replug, exclusive open."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import serial

from common.inputs import CardRead, DeviceConnection, ReadFailed
from drivers.protocols.angel_eye import encode_command
from drivers.protocols.angel_eye_codec import ACK, encode_frame
from drivers.pty_device import PtyDevice
from drivers.serial_reader import AngelEyeReader, AsciiLineReader
from drivers.settings import AngelEyeReaderSettings, AsciiLineReaderSettings, ReconnectSettings
from tests.drivers.collect import Collector, clock
from tests.drivers.rfc2217_server import Rfc2217Server

FAST = {"initial_delay": 0.02, "max_delay": 0.1, "jitter": 0.5}
P1_8S = encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))
B1_KH = encode_frame(ord("2"), "D", bytes([0x91, 0xCD]))


@pytest.fixture
def device(tmp_path: Path) -> Iterator[PtyDevice]:
    dev = PtyDevice(tmp_path / "baccarat-shoe")
    try:
        yield dev
    finally:
        dev.close()


def angel_eye(url: str, sink: Collector, **extra: object) -> AngelEyeReader:
    settings = AngelEyeReaderSettings.model_validate({"url": url, "reconnect": FAST, **extra})
    return AngelEyeReader(settings, sink, clock, rng=random.Random(1))


def test_reads_frames_drops_repeats_and_reports_health(device: PtyDevice) -> None:
    sink = Collector()
    reader = angel_eye(device.path, sink)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 10)
        data = P1_8S * 3 + b"garbage" + B1_KH * 3
        device.write(data)
        assert reader.wait_until_received(len(data), 10)
        assert sink.cards() == ["8s", "Kh"]
        health = reader.health()
        assert health["connected"] is True
        assert health["frames"] == 2
        assert health["duplicates"] == 4
        assert health["rejects"] == 1
        assert health["bytes"] == len(data)
        assert health["last_read_at"] is not None
        assert health["url"] == device.path
    finally:
        reader.stop()
    assert sink.connections() == [True]


def test_unplug_mid_frame_discards_partial_and_reconnects(device: PtyDevice) -> None:
    sink = Collector()
    reader = angel_eye(device.path, sink)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 10)
        device.write(P1_8S + B1_KH[:4])
        assert reader.wait_until_received(len(P1_8S) + 4, 10)
        device.unplug()
        assert reader.wait_until_connected(False, 10)
        device.plug()
        assert reader.wait_until_connected(True, 10)
        device.write(B1_KH[4:] + B1_KH)  # the tail of the cut frame, then the shoe's resend
        assert sink.wait_for(lambda items: len([i for i in items if isinstance(i, CardRead)]) == 2)
        assert reader.wait_until_received(len(P1_8S) + len(B1_KH) * 2, 10)
    finally:
        reader.stop()
    assert sink.cards() == ["8s", "Kh"]
    assert sink.connections() == [True, False, True]
    away = next(i for i in sink.items if isinstance(i, DeviceConnection) and not i.connected)
    assert "readiness to read but returned no data" in (away.detail or "")
    health = reader.health()
    assert health["reconnects"] == 1
    assert health["discarded_partials"] == 1
    assert health["rejects"] == 2  # the discarded partial and the orphan tail


def test_missing_device_alerts_once_then_connects_when_it_appears(tmp_path: Path) -> None:
    sink = Collector()
    link = tmp_path / "shoe"
    reader = angel_eye(str(link), sink)
    reader.start()
    try:
        assert reader.wait_until_connected(False, 10)
        assert sink.wait_for(lambda items: len(items) >= 1)
        dev = PtyDevice(link)
        try:
            assert reader.wait_until_connected(True, 10)
            dev.write(P1_8S)
            assert sink.wait_for(lambda items: any(isinstance(i, CardRead) for i in items))
        finally:
            reader.stop()
            dev.close()
    finally:
        reader.stop()
    assert sink.connections() == [False, True]
    assert "cannot open" in (sink.items[0].detail or "")  # type: ignore[union-attr]


def test_exclusive_open_keeps_a_second_process_out(device: PtyDevice) -> None:
    holder = serial.Serial(device.slave_name, exclusive=True)
    sink = Collector()
    reader = angel_eye(device.slave_name, sink)
    reader.start()
    try:
        assert reader.wait_until_connected(False, 10)
        holder.close()
        assert reader.wait_until_connected(True, 10)
    finally:
        reader.stop()
        holder.close()


def test_ascii_line_reader_on_pty(device: PtyDevice) -> None:
    sink = Collector()
    settings = AsciiLineReaderSettings.model_validate({"url": device.path, "reconnect": FAST})
    reader = AsciiLineReader(settings, sink, clock)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 10)
        data = b"S08\r\nS08\nQQ\nH13\n"
        device.write(data)
        assert reader.wait_until_received(len(data), 10)
    finally:
        reader.stop()
    assert sink.cards() == ["8s", "8s", "Kh"]
    assert sum(isinstance(i, ReadFailed) for i in sink.items) == 1


def test_send_command_gets_the_shoes_ack(device: PtyDevice) -> None:
    sink = Collector()
    reader = angel_eye(device.path, sink, protocol={"command_bcc_includes_stx": True})
    received: list[bytes] = []

    def shoe() -> None:
        data = b""
        while len(data) < 10:
            data += device.read()
        received.append(data)
        device.write(bytes([ACK]))

    responder = threading.Thread(target=shoe, daemon=True)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 10)
        responder.start()
        reply = reader.send_command("LK", 2, timeout=10)
    finally:
        reader.stop()
    assert received == [encode_command("LK", 2)]
    assert reply is not None
    assert reply.ok


def test_socket_url_serial_server_drop_and_reconnect() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    sink = Collector()
    reader = angel_eye(f"socket://127.0.0.1:{port}", sink)
    reader.start()
    try:
        conn, _ = server.accept()
        # pyserial flushes its input when it opens a port: the shoe's next transmission is what counts
        assert reader.wait_until_connected(True, 10)
        conn.sendall(P1_8S)
        assert sink.wait_for(lambda items: len([i for i in items if isinstance(i, CardRead)]) == 1)
        conn.sendall(B1_KH[:3])
        assert reader.wait_until_received(len(P1_8S) + 3, 10)
        conn.close()  # the serial server drops the line
        conn, _ = server.accept()  # the driver dials again
        assert reader.wait_until_connected(True, 10)
        conn.sendall(B1_KH)
        assert sink.wait_for(lambda items: len([i for i in items if isinstance(i, CardRead)]) == 2)
        conn.close()
    finally:
        reader.stop()
        server.close()
    assert sink.cards() == ["8s", "Kh"]
    assert sink.connections()[:3] == [True, False, True]


def test_backoff_grows_caps_and_jitters() -> None:
    backoff = ReconnectSettings(initial_delay=1, max_delay=8, factor=2, jitter=0.25).backoff(random.Random(3))
    delays = [backoff.next_delay() for _ in range(6)]
    for delay, base in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert base * 0.75 <= delay <= base * 1.25
    assert len(set(delays)) == 6  # jittered: no two retries in step
    backoff.reset()
    assert 0.75 <= backoff.next_delay() <= 1.25


def test_settings_refuse_unknown_keys_and_credentials() -> None:
    with pytest.raises(ValueError, match="baudrat"):
        AngelEyeReaderSettings.model_validate({"url": "/dev/x", "baudrat": 4800})
    with pytest.raises(ValueError, match="credentials"):
        AngelEyeReaderSettings.model_validate({"url": "rfc2217://user:pw@host:1"})
    with pytest.raises(ValueError, match="stop bits"):
        AngelEyeReaderSettings.model_validate({"url": "/dev/x", "stopbits": 3})


PYSERIAL_RFC2217_DEPRECATIONS = "ignore:set(Daemon|Name)\\(\\) is deprecated:DeprecationWarning"


@pytest.mark.filterwarnings(PYSERIAL_RFC2217_DEPRECATIONS)  # pyserial's own client code
def test_rfc2217_url_through_a_real_rfc2217_server(device: PtyDevice) -> None:
    server = Rfc2217Server(device.slave_name)
    sink = Collector()
    reader = angel_eye(server.url, sink)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 10)
        device.write(P1_8S * 3)
        assert sink.wait_for(lambda items: any(isinstance(i, CardRead) for i in items))
        server.drop()
        assert reader.wait_until_connected(False, 10)
    finally:
        reader.stop()
        server.close()
    assert sink.cards() == ["8s"]
    assert sink.connections()[:2] == [True, False]


def _wait_for_progress_after(reader: AngelEyeReader, mark: float, timeout: float = 10.0) -> float:
    """The reader loop's next recorded turn after ``mark`` (time.monotonic())."""
    done = threading.Event()
    while not done.wait(0.05):
        last = reader.last_progress()
        assert last is not None, "the reader thread is not running"
        if last > mark:
            return last
        assert time.monotonic() - mark < timeout, "the reader loop stopped turning"
    raise AssertionError("unreachable")


def test_last_progress_advances_idle_and_while_waiting_to_reconnect(
    tmp_path: Path, device: PtyDevice
) -> None:
    """The watchdog's view of a reader: an idle shoe and a long reconnect wait both keep turning."""
    idle = angel_eye(device.path, Collector())
    assert idle.last_progress() is None  # not started
    idle.start()
    try:
        assert idle.wait_until_connected(True, 10)
        mark = time.monotonic()
        _wait_for_progress_after(idle, mark)  # no byte sent: the read timeout turns the loop
    finally:
        idle.stop()
    assert idle.last_progress() is None  # stopped

    sink = Collector()
    slow = {"initial_delay": 30.0, "max_delay": 30.0, "jitter": 0.0}  # one wait far beyond a stall limit
    away = angel_eye(str(tmp_path / "no-shoe"), sink, reconnect=slow)
    away.start()
    try:
        assert away.wait_until_connected(False, 10)
        mark = time.monotonic()
        first = _wait_for_progress_after(away, mark)
        _wait_for_progress_after(away, first)  # a second turn inside the same 30 s wait
        assert sink.connections() == [False]  # still the first wait: no second open attempt
    finally:
        away.stop()
