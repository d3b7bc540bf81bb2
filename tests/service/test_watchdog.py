"""The watchdog is pinged only while every worker shows progress (in-process daemon, real parts)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from daemon.service.config import load_config
from daemon.service.logging import reset_logging
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.base import ReaderDriver
from drivers.pty_device import PtyDevice
from tests.service.harness import dealt_shoe, write_config
from tests.support.broker import MosquittoBroker

STALL_S = 1.0


@dataclass
class Watched:
    """A started daemon whose main loop runs in a thread, with what systemd would receive."""

    daemon: Daemon
    shoe: PtyDevice
    messages: list[tuple[float, str]]
    main: threading.Thread
    turns: list[bool] = field(default_factory=list)
    """The main loop's turns in order: each asks all_progressing(), then pings only on True."""

    def pings(self) -> int:
        return sum(m == "WATCHDOG=1" for _, m in self.messages)

    def wait_for_pings(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.pings() < count:
            assert time.monotonic() < deadline, self.messages
            time.sleep(0.05)

    def wait_for_stalled_turns(self, since: int, count: int, timeout: float = 10.0) -> list[bool]:
        deadline = time.monotonic() + timeout
        while self.turns[since:].count(False) < count:
            assert time.monotonic() < deadline, self.turns[since:]
            time.sleep(0.05)
        return self.turns[since:]


@pytest.fixture
def watched(tmp_path: Path, mosquitto: MosquittoBroker) -> Iterator[Watched]:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    loaded = load_config(config, environ={}, overrides={("service", "watchdog_stall_s"): STALL_S})
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    messages: list[tuple[float, str]] = []
    stop_reading = threading.Event()

    def read() -> None:
        while not stop_reading.is_set():
            try:
                messages.append((time.monotonic(), sock.recv(4096).decode()))
            except TimeoutError:
                continue

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    notifier = SystemdNotifier({"NOTIFY_SOCKET": sock_path, "WATCHDOG_USEC": "600000"})
    daemon = Daemon(loaded, notifier=notifier)
    main = threading.Thread(target=daemon.run_until_stopped, daemon=True)
    state = Watched(daemon, shoe, messages, main)
    checked = daemon.watchdog.liveness.all_progressing

    def all_progressing() -> bool:
        verdict = checked()
        state.turns.append(verdict)
        return verdict

    daemon.watchdog.liveness.all_progressing = all_progressing  # type: ignore[method-assign]
    daemon.start()
    main.start()
    try:
        yield state
    finally:
        daemon.stop_requested.set()
        main.join(10)
        daemon.stop()
        stop_reading.set()
        reader.join(5)
        sock.close()
        shoe.close()
        reset_logging()
    assert any(m.startswith("READY=1") for _, m in messages)


def _stop_main_loop_and_count(watched: Watched) -> None:
    """The pings systemd received are exactly the main loop's turns that found everyone progressing."""
    watched.daemon.stop_requested.set()
    watched.main.join(10)
    assert not watched.main.is_alive()
    deadline = time.monotonic() + 5
    while watched.pings() < watched.turns.count(True):
        assert time.monotonic() < deadline, (watched.messages, watched.turns)
        time.sleep(0.02)
    assert watched.pings() == watched.turns.count(True)


@pytest.mark.mosquitto
def test_watchdog_stops_when_the_reader_thread_dies(watched: Watched) -> None:
    daemon = watched.daemon
    watched.wait_for_pings(3)
    assert not [s.name for s in daemon.watchdog.liveness.states() if s.stalled]
    before = len(watched.turns)
    daemon.drivers["reader"].stop()  # the reader thread is gone
    after = watched.wait_for_stalled_turns(before, 5)
    stalled = [s.name for s in daemon.watchdog.liveness.states() if s.stalled]
    assert stalled == ["reader"]
    # once a turn finds the reader stalled, every later turn does: no ping can follow
    first_stalled = after.index(False)
    assert all(verdict is False for verdict in after[first_stalled:]), after
    _stop_main_loop_and_count(watched)


@pytest.mark.mosquitto
def test_watchdog_stops_while_the_reader_loop_is_blocked_with_its_thread_alive(watched: Watched) -> None:
    daemon = watched.daemon
    driver = daemon.drivers["reader"]
    assert isinstance(driver, ReaderDriver)
    watched.wait_for_pings(3)
    # an idle shoe (nothing dealt) still turns the loop at every read timeout: progressing
    assert not [s.name for s in daemon.watchdog.liveness.states() if s.stalled]
    release = threading.Event()
    entered = threading.Event()

    def blocked_read(_data: bytes, _at: float) -> None:  # the reader loop hangs inside a read
        entered.set()
        release.wait(60)

    driver.tap = blocked_read
    before = len(watched.turns)
    watched.shoe.write(b"\x05")  # one byte: the loop reads it and blocks
    try:
        assert entered.wait(10)
        after = watched.wait_for_stalled_turns(before, 5)
        assert driver.health()["running"]  # not dead: only its progress says it is stuck
        health = daemon.health()
        assert health["engine"]["stalled_workers"] == ["reader"]
        assert health["workers"]["reader"]["stalled"]
        assert not any(w["stalled"] for name, w in health["workers"].items() if name != "reader")
        first_stalled = after.index(False)
        assert all(verdict is False for verdict in after[first_stalled:]), after
        pings_while_blocked = watched.pings()
        watched.wait_for_stalled_turns(before, 10)
        assert watched.pings() == pings_while_blocked
    finally:
        release.set()
    # unblocked, the loop turns again and the pings resume
    resumed = len(watched.turns)
    deadline = time.monotonic() + 10
    while True not in watched.turns[resumed:]:
        assert time.monotonic() < deadline, watched.turns[resumed:]
        time.sleep(0.05)
    _stop_main_loop_and_count(watched)
