"""A SIGTERM or SIGINT at any moment of a start (before the journal is open, while the engine
is restored, at READY, just after) ends the daemon, and the journal stays consistent.

The daemon is started again and again as ``baccarat-edge run`` (:mod:`tests.support.stop_series`:
20 times as a program of its own, then 120 times forked from one process that imported it
once), against a real mosquitto and a pty reader, and signalled after a random delay that
spans its start, two in five within 50 ms after READY. The long series (300 starts of each
kind) is ``bench/bench_stop_anywhere.py``.
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

SERIES = [(["--exec"], 20), ([], 120)]
"""20 starts of the program itself, then 120 forked from one process that imported the daemon
once (the same ``baccarat-edge run``, without the interpreter's start-up each time)."""


@pytest.mark.mosquitto
def test_a_signal_at_any_moment_of_a_start_stops_the_daemon(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _events_key, _command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    results = []
    try:
        for how, starts in SERIES:
            done = subprocess.run(
                [sys.executable, "-m", "tests.support.stop_series", "--config", str(config),
                 "--starts", str(starts), "--stop-timeout", "20", "--seed", "23", *how],
                cwd=REPO_ROOT, capture_output=True, text=True, timeout=starts * 25, check=True,
            )  # fmt: skip
            results.append((starts, json.loads(done.stdout)))
    finally:
        shoe.close()
    for starts, result in results:
        assert result["starts"] == starts
        assert result["hung"] == 0, result
        assert result["stopped"] == starts, result  # exit 0 (130: SIGINT), or the signal's default
        # the signals fell on both sides of READY, and between the handlers and READY
        assert result["after_ready"] >= starts // 5, result
        assert starts - result["after_ready"] >= starts // 5, result
    assert sum(result["during_start"] for _, result in results) >= 5, results
    verified = verify_journal(tmp_path / "state" / "journal.sqlite3")
    assert verified.ok, verified
