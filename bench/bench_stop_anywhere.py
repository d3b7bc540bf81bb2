"""SIGTERM/SIGINT at any moment of a start, hundreds of times: no hang, the journal consistent.

The daemon (``python -m daemon.cli run``, each start a program of its own; ``--fork``: a
fork of one process that imported the daemon once, :mod:`tests.support.stop_series`) runs
against its own mosquitto and a pty reader; two signals in five come within 50 ms after
READY, the others at a random moment of the start.
A stop that takes longer than ``--stop-timeout`` (the unit's ``TimeoutStopSec``, 30 s) is a
hang. Afterwards ``journal verify`` checks the journal every start wrote into.

    nice -n 10 .venv/bin/python -m bench.bench_stop_anywhere [--starts 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, report
from daemon.journal.integrity import verify_journal
from drivers.pty_device import PtyDevice
from tests.service.harness import dealt_shoe, write_config
from tests.support.broker import MosquittoBroker

REPO = Path(__file__).resolve().parents[1]
LOG_DIR = Path(tempfile.gettempdir()) / "bench-stop-anywhere-logs"
"""Each start's output (kept: a hung start's thread stacks are in its file)."""


def run(starts: int, stop_timeout: float, seed: int, *, fork: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-stop-") as name:
        tmp = Path(name)
        broker = MosquittoBroker(tmp / "broker").start()
        shoe = PtyDevice(tmp / "shoe")
        try:
            shutil.rmtree(LOG_DIR, ignore_errors=True)
            LOG_DIR.mkdir(parents=True)
            deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
            config, _events_key, _command_key = write_config(tmp, shoe.path, broker.port, deal)
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "tests.support.stop_series", "--config", str(config),
                 "--starts", str(starts), "--stop-timeout", str(stop_timeout), "--seed", str(seed),
                 "--log-dir", str(LOG_DIR), *([] if fork else ["--exec"])],
                cwd=REPO, capture_output=True, text=True, check=True,
            )  # fmt: skip
            took = time.monotonic() - started
            verified = verify_journal(tmp / "state" / "journal.sqlite3")
        finally:
            shoe.close()
            broker.stop()
    result: dict[str, Any] = json.loads(done.stdout)
    return {
        "starts_as": "fork" if fork else "exec",
        **result,
        "series_s": round(took, 1),
        "journal_verify_ok": verified.ok,
        "verdict": "no hang" if result["hung"] == 0 and result["stopped"] == result["starts"] else "FAILED",
        "machine": machine(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--stop-timeout", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fork", action="store_true", help="fork each start from one process (faster)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report(
        "signal at any moment of a start",
        run(args.starts, args.stop_timeout, args.seed, fork=args.fork),
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
