"""The watchdog is pinged only while every worker shows progress (in-process daemon, real parts)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from daemon.service.config import load_config
from daemon.service.logging import reset_logging
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.service.harness import dealt_shoe, write_config
from tests.support.broker import MosquittoBroker


@pytest.mark.mosquitto
def test_watchdog_stops_when_the_reader_thread_dies(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    loaded = load_config(config, environ={})
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
    # the main loop's turns in order: each asks all_progressing(), then pings only on True
    turns: list[bool] = []
    checked = daemon.liveness.all_progressing

    def all_progressing() -> bool:
        verdict = checked()
        turns.append(verdict)
        return verdict

    daemon.liveness.all_progressing = all_progressing  # type: ignore[method-assign]
    daemon.start()
    main = threading.Thread(target=daemon.run_until_stopped, daemon=True)
    main.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(m == "WATCHDOG=1" for _, m in messages) < 3:
            time.sleep(0.05)
        assert sum(m == "WATCHDOG=1" for _, m in messages) >= 3, messages
        assert checked()  # not through the recorder: only the main loop's turns go there
        daemon.drivers["reader"].stop()  # the reader thread is gone
        before = len(turns)
        deadline = time.monotonic() + 10
        while turns[before:].count(False) < 5:  # five turns of the loop found it stalled
            assert time.monotonic() < deadline, turns[before:]
            time.sleep(0.05)
        stalled = [s.name for s in daemon.liveness.states() if s.stalled]
        assert stalled == ["reader"]
        # once a turn finds the reader stalled, every later turn does: no ping can follow
        after = turns[before:]
        first_stalled = after.index(False)
        assert all(verdict is False for verdict in after[first_stalled:]), after
        daemon.stop_requested.set()
        main.join(10)
        # and the pings systemd received are exactly the turns that found everyone progressing
        deadline = time.monotonic() + 5
        while sum(m == "WATCHDOG=1" for _, m in messages) < turns.count(True):
            assert time.monotonic() < deadline, (messages, turns)
            time.sleep(0.02)
        assert sum(m == "WATCHDOG=1" for _, m in messages) == turns.count(True)
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
