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
    daemon.start()
    main = threading.Thread(target=daemon.run_until_stopped, daemon=True)
    main.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(m == "WATCHDOG=1" for _, m in messages) < 3:
            time.sleep(0.05)
        assert sum(m == "WATCHDOG=1" for _, m in messages) >= 3, messages
        assert daemon.liveness.all_progressing()
        daemon.drivers["reader"].stop()  # the reader thread is gone
        stopped_at = time.monotonic()
        time.sleep(1.5)  # several ping periods (0.2 s each)
        late = [m for t, m in messages if m == "WATCHDOG=1" and t > stopped_at + 0.5]
        assert late == [], "no WATCHDOG=1 may follow once a worker has stopped"
        stalled = [s.name for s in daemon.liveness.states() if s.stalled]
        assert stalled == ["reader"]
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
