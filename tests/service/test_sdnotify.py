"""sd_notify over a real unix datagram socket bound as NOTIFY_SOCKET."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.service.sdnotify import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def _fields(sock: socket.socket) -> dict[str, str]:
    data = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.splitlines())


def test_ready_watchdog_and_stopping_reach_the_socket(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.ready(status="reader connected")
    ready = _fields(sock)
    assert ready["READY"] == "1"
    assert ready["MAINPID"] == str(os.getpid())
    assert ready["STATUS"] == "reader connected"
    assert notifier.watchdog()
    assert _fields(sock) == {"WATCHDOG": "1"}
    assert notifier.stopping()
    assert _fields(sock) == {"STOPPING": "1"}
    notifier.close()


def test_a_long_start_asks_for_more_time(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
    assert notifier.extend_timeout(60, "folding the whole journal: 50000 events read")
    assert _fields(sock) == {
        "EXTEND_TIMEOUT_USEC": "60000000",
        "STATUS": "folding the whole journal: 50000 events read",
    }
    notifier.close()


def test_abstract_namespace_socket() -> None:
    name = f"baccarat-edge-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(5)
    try:
        notifier = SystemdNotifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.watchdog()
        assert _fields(sock) == {"WATCHDOG": "1"}
    finally:
        sock.close()


def test_without_notify_socket_every_call_is_a_no_op() -> None:
    notifier = SystemdNotifier({})
    assert not notifier.enabled
    assert not notifier.ready()
    assert not notifier.watchdog()
    assert notifier.watchdog_interval is None


def test_vanished_socket_does_not_raise(tmp_path: Path) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert notifier.watchdog() is False


def test_watchdog_interval_from_environment() -> None:
    mine = SystemdNotifier({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())})
    assert mine.watchdog_interval == 30.0
    other = SystemdNotifier({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"})
    assert other.watchdog_interval is None
