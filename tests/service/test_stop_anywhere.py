"""A SIGTERM or SIGINT at any moment of a start (before the journal is open, while the engine
is restored, at READY, just after) ends the daemon, and the journal stays consistent.

The daemon is started again and again, each time as ``python -m daemon.cli run`` (a program
of its own, :mod:`tests.support.stop_series` with ``--exec``), against a real mosquitto and a
pty reader, and signalled after a random delay that spans its start, two in five within
50 ms after READY. The long series (hundreds of starts) is ``bench/bench_stop_anywhere.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.journal.integrity import verify_journal
from drivers.pty_device import PtyDevice
from tests.conftest import REPO_ROOT
from tests.service.harness import dealt_shoe, write_config
from tests.support.broker import MosquittoBroker

STARTS = 40


@pytest.mark.mosquitto
def test_a_signal_at_any_moment_of_a_start_stops_the_daemon(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _events_key, _command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.stop_series", "--config", str(config),
             "--starts", str(STARTS), "--stop-timeout", "20", "--seed", "23", "--exec"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=STARTS * 25, check=True,
        )  # fmt: skip
    finally:
        shoe.close()
    result = json.loads(done.stdout)
    assert result["starts"] == STARTS
    assert result["hung"] == 0, result
    assert result["stopped"] == STARTS, result  # exit 0, or the signal's default before the handlers
    # the signals fell on both sides of READY
    assert result["after_ready"] >= 5, result
    assert STARTS - result["after_ready"] >= 5, result
    verified = verify_journal(tmp_path / "state" / "journal.sqlite3")
    assert verified.ok, verified
