"""Start the daemon again and again and send it SIGTERM (or SIGINT, one in five) at a random
moment of its start: two in five within 50 ms after its READY, the others at a random time up
to 1.2 times what a start takes (measured first, then followed as the load changes). Each
start is ``baccarat-edge run --config FILE`` in a process of its own, forked from this one
after the imports (a start then costs what the daemon does, not the interpreter's import
time, so many fit in a minute); this process must have no thread of its own when it forks, so
run it as a program:

    python -m tests.support.stop_series --config table.yaml --starts 300 [--max-delay 1.5]

It prints one JSON object: starts, how many stopped in time (exit status 0, or killed by the
signal itself when it came before the handlers were installed), how many hung (still alive
``--stop-timeout`` seconds after the signal: then SIGKILLed), how many signals came after
READY and how many during the start (handlers installed, READY not yet sent), and the
slowest stop.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def _child(config: Path, notify: str, log_dir: Path | None) -> None:
    """The forked start: ``baccarat-edge run``; never returns into the series' code."""
    code = 1
    try:
        os.environ["NOTIFY_SOCKET"] = notify
        if log_dir is None:
            out = os.open(os.devnull, os.O_WRONLY)
        else:
            out = os.open(log_dir / f"start-{os.getpid()}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            faulthandler.register(signal.SIGUSR1, file=out, all_threads=True)  # a hung start's stacks
        os.dup2(out, 1)
        os.dup2(out, 2)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked across the fork
        from daemon.cli import main

        code = main(["run", "--config", str(config)])
    except KeyboardInterrupt:  # SIGINT before the handlers: end as Python itself would
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(code)


def _fork_start(config: Path, notify: str, log_dir: Path | None) -> int:
    """Fork a start with SIGTERM/SIGINT blocked across the fork (a signal that comes at once
    waits the few microseconds until the child unblocks it, so it never lands in this
    process's code in the child)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid == 0:
        _child(config, notify, log_dir)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return pid


def _exec_start(config: Path, notify: str, log_dir: Path | None, keep: list[subprocess.Popen[bytes]]) -> int:
    """Start ``python -m daemon.cli run`` as a new program (no fork of this process)."""
    env = {**os.environ, "NOTIFY_SOCKET": notify}
    out = subprocess.DEVNULL if log_dir is None else (log_dir / f"exec-{len(keep)}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "run", "--config", str(config)], env=env, stdout=out, stderr=out
    )
    keep.append(proc)  # reaped with os.waitpid below; kept so it is not collected meanwhile
    return proc.pid


def _ready_seen(sock: socket.socket) -> bool:
    seen = False
    while True:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return seen
        seen = seen or b"READY=1" in data


def _wait_ready(sock: socket.socket, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if _ready_seen(sock):
            return True
        time.sleep(0.001)
    return False


def _time_to_ready(start: Callable[[], int], sock: socket.socket, timeout: float) -> float:
    """One start without a signal until READY: how long a start takes here (then stopped)."""
    _ready_seen(sock)
    started = time.monotonic()
    pid = start()
    took = timeout
    while time.monotonic() - started < timeout:
        if _ready_seen(sock):
            took = time.monotonic() - started
            break
        time.sleep(0.005)
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    return took


def series(
    config: Path,
    starts: int,
    max_delay: float,
    stop_timeout: float,
    seed: int,
    log_dir: Path | None = None,
    *,
    exec_starts: bool = False,
) -> dict[str, Any]:
    """Run the series (this process forks; call it from a process without threads)."""
    # imported once here, before the forks: what ``run`` imports when it starts
    import daemon.cli
    import daemon.service.runner  # noqa: F401
    from drivers.registry import load

    load("angel_eye")

    # A program started in the background by a shell without job control (``cmd &``) has
    # SIGINT ignored, and so would every start made from here: a SIGINT before the daemon
    # installs its handlers would then be lost, as the launcher asked. Starts get the usual
    # disposition instead (what systemd gives the daemon).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = random.Random(seed)
    started: list[subprocess.Popen[bytes]] = []
    folder = Path(tempfile.mkdtemp(prefix="stop-series-"))
    notify_path = str(folder / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    sock.setblocking(False)

    def start() -> int:
        if exec_starts:
            return _exec_start(config, notify_path, log_dir, started)
        return _fork_start(config, notify_path, log_dir)

    ready_s = _time_to_ready(start, sock, stop_timeout)
    out: dict[str, Any] = {
        "first_ready_s": round(ready_s, 3),
        "starts": 0,
        "stopped": 0,
        "hung": 0,
        "after_ready": 0,
        "during_start": 0,
        "by_signal_default": 0,
    }
    slowest = 0.0
    statuses: dict[str, int] = {}
    try:
        for _ in range(starts):
            _ready_seen(sock)  # drain
            pid = start()
            forked = time.monotonic()
            signum = signal.SIGTERM if rng.random() < 0.8 else signal.SIGINT
            if rng.random() < 0.4:  # right at READY: within 50 ms after it
                after = _wait_ready(sock, forked + stop_timeout)
                if after:
                    ready_s = 0.8 * ready_s + 0.2 * (time.monotonic() - forked)  # follows the load
                time.sleep(rng.uniform(0.0, 0.05))
            else:  # anywhere in the start as long as the last ones took
                time.sleep(rng.uniform(0.0, max_delay if max_delay > 0 else 1.2 * ready_s))
                after = _ready_seen(sock)
            out["after_ready"] += int(after)
            sent = time.monotonic()
            with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
                os.kill(pid, signum)
            status = None
            while time.monotonic() - sent < stop_timeout:
                _ready_seen(sock)  # read what it sends, as systemd does: a full socket blocks a sender
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                status = None
                time.sleep(0.005)
            out["starts"] += 1
            if status is None:
                out["hung"] += 1
                out.setdefault("hung_detail", []).append(
                    {
                        "signal": int(signum),
                        "after_ready": after,
                        "sent_after_fork_s": round(sent - forked, 3),
                    }
                )
                if log_dir is not None:
                    os.kill(pid, signal.SIGUSR1)
                    time.sleep(0.5)
                    out.setdefault("hung_logs", []).append(str(log_dir / f"start-{pid}.log"))
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                continue
            slowest = max(slowest, time.monotonic() - sent)
            if os.WIFSIGNALED(status):
                key = f"signal {os.WTERMSIG(status)}"
                out["by_signal_default"] += 1
            else:
                key = f"exit {os.WEXITSTATUS(status)}"
            statuses[key] = statuses.get(key, 0) + 1
            # exit 130: the command line's answer to an interrupt before the handlers were in
            # exit 1 on a SIGINT before READY: the interpreter's own start-up interrupted
            # ("Fatal Python error: init_import_site"), before any of the daemon's code
            early_sigint = signum == signal.SIGINT and key == "exit 1" and not after
            if (
                key in ("exit 0", f"signal {int(signum)}")
                or (key == "exit 130" and signum == signal.SIGINT)
                or early_sigint
            ):
                out["stopped"] += 1
            if key == "exit 0" and not after:
                out["during_start"] += 1
    finally:
        sock.close()
        with_files = list(folder.iterdir())
        for path in with_files:
            path.unlink()
        folder.rmdir()
    out["statuses"] = statuses
    out["slowest_stop_s"] = round(slowest, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--starts", type=int, default=100)
    parser.add_argument(
        "--max-delay",
        type=float,
        default=0.0,
        help="signal within this many seconds of the fork (0: 1.2 times a start's time to READY, followed)",
    )
    parser.add_argument("--stop-timeout", type=float, default=30.0, help="a stop slower than this is a hang")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="keep each start's output here (a hung one's thread stacks too)",
    )
    parser.add_argument(
        "--exec",
        dest="exec_starts",
        action="store_true",
        help="start each as a new program (python -m daemon.cli run) instead of a fork of this process",
    )
    args = parser.parse_args(argv)
    result = series(
        args.config,
        args.starts,
        args.max_delay,
        args.stop_timeout,
        args.seed,
        args.log_dir,
        exec_starts=args.exec_starts,
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
