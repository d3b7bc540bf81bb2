"""A reader whose device node the kernel refuses (EPERM, the strict-devices drop-in after a
replug) or whose permissions deny the service user (EACCES) says what to do, once.

Under ``DevicePolicy=closed`` the device cgroup answers ``open()`` of a node outside
``DeviceAllow=`` with EPERM: a shoe replugged onto a new node looks exactly like this from
the reader. The test replugs a pty shoe (a fresh pty is a new node) and makes the reopen
fail with the exception pyserial raises for that errno; a container cannot set up a device
cgroup, so the refusal itself is simulated at the driver's ``_open``.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import serial
from structlog.testing import capture_logs

from common.inputs import DeviceConnection, EngineInput
from drivers.base import EACCES_HINT, EPERM_HINT, open_failure_hint
from drivers.pty_device import PtyDevice
from drivers.serial_reader import AngelEyeReader
from drivers.settings import AngelEyeReaderSettings, ReconnectSettings


def _until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _pyserial_refusal(path: str, code: int) -> serial.SerialException:
    """What ``serial.Serial.open`` raises when ``os.open`` fails with ``code``."""
    cause = OSError(code, os.strerror(code), path)
    return serial.SerialException(cause.errno, f"could not open port {path}: {cause}")


def test_hint_by_errno() -> None:
    assert open_failure_hint(_pyserial_refusal("/dev/baccarat-shoe", errno.EPERM)) == EPERM_HINT
    assert open_failure_hint(_pyserial_refusal("/dev/baccarat-shoe", errno.EACCES)) == EACCES_HINT
    assert open_failure_hint(_pyserial_refusal("/dev/baccarat-shoe", errno.ENOENT)) is None
    assert open_failure_hint(ValueError("bad url")) is None
    assert "systemctl restart baccarat-edge" in EPERM_HINT
    assert "dialout" in EACCES_HINT


@pytest.mark.parametrize("code", [errno.EPERM, errno.EACCES])
def test_a_refused_reopen_after_a_replug_is_logged_once_with_its_hint(tmp_path: Path, code: int) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    inputs: list[EngineInput] = []
    settings = AngelEyeReaderSettings(
        url=shoe.path,
        device_name="reader",
        read_timeout=0.05,
        reconnect=ReconnectSettings(initial_delay=0.01, max_delay=0.05, jitter=0),
    )
    reader = AngelEyeReader(settings, inputs.append, time.time)
    refusing = threading.Event()
    refused_opens: list[int] = []
    real_open = reader._open

    def open_port() -> Any:
        if refusing.is_set():
            refused_opens.append(code)
            raise _pyserial_refusal(shoe.path, code)
        return real_open()

    reader._open = open_port  # type: ignore[method-assign]
    with capture_logs() as logs:
        reader.start()
        try:
            assert reader.wait_until_connected(True, 10)
            refusing.set()
            shoe.unplug()
            shoe.plug()  # back on a new pty: a new device node
            _until(lambda: len(refused_opens) >= 5, "several refused reopen attempts")
            health = reader.health()
            assert health["connected"] is False
            hint = EPERM_HINT if code == errno.EPERM else EACCES_HINT
            last_error = health["last_error"]
            assert last_error is not None
            assert last_error.startswith(f"cannot open {shoe.path}: [Errno {code}]")
            assert last_error.endswith(hint)
            refusing.clear()  # the technician restarted the service / fixed the group
            assert reader.wait_until_connected(True, 10)
        finally:
            reader.stop()
            shoe.close()
    refused = [entry for entry in logs if entry["event"] == "device open refused"]
    assert len(refused) == 1  # not once per retry
    assert refused[0]["errno"] == code
    assert refused[0]["hint"] == hint
    assert refused[0]["device"] == "reader"
    # the engine heard: away once (the read error of the unplug), back once
    connections = [i.connected for i in inputs if isinstance(i, DeviceConnection)]
    assert connections == [True, False, True]
