"""A table that has just started is not a table whose reader is away.

The first health report goes out as soon as the broker answers, which can be before the
reader's first open attempt has a result. Until then the reader's block says ``state:
opening`` (``connected`` false): the fleet view raises no "reader disconnected" and the
monitor shows "reader opening". Once the attempt fails, the block says ``disconnected`` and
the fleet view's critical problem is there, as it must be. Real driver, real TCP sockets, the
payloads checked against the contract schema by the fleet's own parser.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from daemon.fleet.tables import Fleet, summarize
from daemon.mqtt.envelope import encode, signed_message
from daemon.service.health import device_health
from daemon.service.table_text import render
from daemon.service.table_view import TableView
from drivers.device import Device, ReaderHealth
from drivers.registry import load
from tests.fleet.synthetic import SyntheticTable


@pytest.fixture
def closed_port() -> int:
    """A TCP port nothing listens on: a reader pointed at it fails to open at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        yield server.getsockname()[1]


def _reader(port: int) -> Device:
    settings = {"url": f"socket://127.0.0.1:{port}", "reconnect": {"initial_delay": 30, "max_delay": 30}}
    return load("angel_eye").build(settings, lambda _input: None, time.time)


def _reader_block(device: Device) -> ReaderHealth:
    block = device_health(device)
    assert "state" in block, block
    return block  # type: ignore[return-value]


def test_a_reader_is_opening_until_its_first_open_attempt_fails(closed_port: int) -> None:
    reader = _reader(closed_port)
    before = _reader_block(reader)
    assert (before["state"], before["connected"], before["last_error"]) == ("opening", False, None)
    reader.start()
    try:
        assert reader.wait_until_connected(False, 30)  # type: ignore[attr-defined]
        after = _reader_block(reader)
    finally:
        reader.stop()
    assert (after["state"], after["connected"]) == ("disconnected", False)
    assert after["last_error"] is not None


def test_a_reader_is_connected_once_its_first_open_attempt_succeeds(listening_port: int) -> None:
    reader = _reader(listening_port)
    reader.start()
    try:
        assert reader.wait_until_connected(True, 30)  # type: ignore[attr-defined]
        block = _reader_block(reader)
    finally:
        reader.stop()
    assert (block["state"], block["connected"]) == ("connected", True)


def _health_payload(reader: ReaderHealth) -> bytes:
    """A table's retained health, as the daemon signs it, with this reader block."""
    body = json.loads(SyntheticTable("T7").health(time.time()))
    body["devices"] = {"reader": reader}
    return encode(signed_message(body, None))


def _views(reader: ReaderHealth) -> tuple[list[tuple[str, str]], str]:
    """What the fleet view and the monitor make of a health report with this reader block."""
    payload = _health_payload(reader)
    fleet = Fleet()
    fleet.receive("baccarat/v1/T7/health", payload)
    [record] = fleet.records()
    assert record.slots["health"].problem is None, record.slots["health"].problem
    view = TableView("T7")
    view.apply("baccarat/v1/T7/health", payload)
    return list(summarize(record, time.time()).problems), render(view, colour=False)


def test_the_fleet_and_the_monitor_show_an_opening_reader_as_starting(closed_port: int) -> None:
    reader = _reader(closed_port)
    problems, monitor = _views(_reader_block(reader))
    assert not [p for p in problems if "reader disconnected" in p[1]], problems
    assert "reader opening" in monitor
    assert "DISCONNECTED" not in monitor
    reader.start()
    try:
        assert reader.wait_until_connected(False, 30)  # type: ignore[attr-defined]
        problems, monitor = _views(_reader_block(reader))
    finally:
        reader.stop()
    assert ("critical", "reader disconnected: reader") in problems
    assert "reader DISCONNECTED" in monitor
