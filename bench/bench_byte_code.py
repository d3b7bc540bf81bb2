"""Start-up cost of never reading byte code from the installed tree: Popen -> ``READY=1`` of the
real daemon, interleaved, in the same run:

- ``tree``: byte code read from the source tree's ``__pycache__`` folders, compiled beforehand
  (how the package ran when its postinst byte-compiled the venv);
- ``prefix``: as the systemd unit runs it now, ``python -B`` with ``PYTHONPYCACHEPREFIX`` pointing
  at a fresh, empty folder for every start: every module (the standard library's too, whose
  ``__pycache__`` is ignored as well) is compiled from source at each start.

The daemon is this checkout's (``python -m daemon.cli run``), with a pty reader and a mosquitto
of its own; the figure it prints is the median and p99 of each, and the ratio prefix / tree.

    nice -n 10 .venv/bin/python -m bench.bench_byte_code [--runs 7] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ms, report
from bench.rig import REPO, Broker, NotifySocket, TimedPty, write_config

TABLE_ID = "BYTECODE-1"


def time_to_ready(workdir: Path, config: Path, prefix: Path | None, timeout: float = 120.0) -> float:
    """Seconds from Popen to ``READY=1`` (``prefix``: a fresh byte code folder, with -B)."""
    notify = NotifySocket(workdir / "notify.sock")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "PYTHONPYCACHEPREFIX")
    }
    env["NOTIFY_SOCKET"] = str(notify.path)
    flags: list[str] = []
    if prefix is not None:
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
        flags = ["-B"]
    with open(workdir / "daemon.log", "ab") as log:
        started = time.monotonic()
        daemon = subprocess.Popen(
            [sys.executable, *flags, "-m", "daemon.cli", "run", "--config", str(config)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            ready = notify.wait_ready(timeout)
            if ready is None:
                raise RuntimeError(f"no READY within {timeout} s: see {workdir / 'daemon.log'}")
            return ready - started
        finally:
            daemon.terminate()
            daemon.wait(30)
            notify.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-byte-code-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            pty = TimedPty(tmp / "shoe")
            try:
                config = write_config(tmp / "table", TABLE_ID, pty.path, broker.port)
                time_to_ready(tmp / "table", config, None)  # compiles the tree's __pycache__ once
                times: dict[str, list[float]] = {"tree": [], "prefix": []}
                for _ in range(args.runs):  # interleaved: the same load for both
                    times["tree"].append(time_to_ready(tmp / "table", config, None))
                    times["prefix"].append(time_to_ready(tmp / "table", config, tmp / "run/pycache"))
            finally:
                pty.close()
    tree, prefix = ms(times["tree"]), ms(times["prefix"])
    report(
        "byte code: start -> READY, tree __pycache__ vs a fresh PYTHONPYCACHEPREFIX with -B",
        {
            "ready_ms": {"tree": tree.as_dict(1), "prefix": prefix.as_dict(1)},
            "runs_s": {k: [round(v, 3) for v in vs] for k, vs in times.items()},
            "ratio_prefix_tree_median": round(prefix.median / tree.median, 3),
            "added_ms_median": round(prefix.median - tree.median, 1),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
