"""Crash recovery: time from (re)start to READY with a journal holding 100 shoes.

The journal is made by the production pieces run fast in this process: the Angel Eye
decoder and the engine over ``--shoes`` clean 8-deck shoes, committed with ``Journal.append``
(a few dozen inputs per transaction, to write it quickly; the rows are the same ones the
daemon writes one input at a time), every event then marked delivered, as after a normal
day. Then the real daemon (``python -m daemon.cli run``) is started again and again with
``NOTIFY_SOCKET`` pointing at a socket this script binds: the figure is Popen → ``READY=1``.

Baseline in the same run (interleaved): the same daemon starting on an empty journal. The
restart cost is split in-process too: reading the journal's events and ``Engine.restore``,
beside reading and folding the current shoe only (a proposed fix; same snapshot checked).

    .venv/bin/python -m bench.bench_recovery [--shoes 100] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ms, report
from bench.rig import Broker, DaemonProcess, NotifySocket, TimedPty, forwarded, shoe_stream, write_config
from common.inputs import EngineInput
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.rules.variants import load_variant_by_name
from drivers.protocols.angel_eye import AngelEyeDecoder

TABLE_ID = "RECOVER-1"
BATCH_INPUTS = 50


def _settings() -> TableSettings:
    return TableSettings(device_starts_shoe=True, unneeded_card_window_s=0)


def build_journal(path: Path, shoes: int, seed: int) -> tuple[int, int, float]:
    """Write ``shoes`` dealt shoes into a journal at ``path``; (events, inputs, seconds)."""
    started = time.monotonic()
    settings = _settings()
    engine = Engine(settings, load_variant_by_name(settings.variant))
    decoder = AngelEyeDecoder()
    journal = Journal(JournalSettings(path=path), TABLE_ID)
    inputs: list[EngineInput] = []
    events: list[Event] = []
    count_inputs = 0
    try:
        for step in shoe_stream(shoes, seed).steps:
            assert step.data is not None
            for inp in forwarded(decoder.feed(step.data, 1_700_000_000.0 + step.t)):
                inputs.append(inp)
                events.extend(engine.handle(inp))
            if len(inputs) >= BATCH_INPUTS:
                journal.append(inputs, events)
                count_inputs += len(inputs)
                inputs, events = [], []
        if inputs:
            journal.append(inputs, events)
            count_inputs += len(inputs)
        last = journal.last_seq()
        for first in range(1, last + 1, 5000):
            journal.mark_delivered(range(first, min(last, first + 4999) + 1))
    finally:
        journal.close()
    return last, count_inputs, time.monotonic() - started


def time_to_ready(workdir: Path, config: Path, timeout: float = 120.0) -> float:
    """Seconds from Popen of the daemon to its READY=1; the daemon is then stopped."""
    notify = NotifySocket(workdir / "notify.sock")
    daemon = DaemonProcess(config, workdir / "daemon.log", notify_socket=notify.path)
    try:
        ready = notify.wait_ready(timeout)
        if ready is None:
            raise RuntimeError(f"no READY within {timeout} s:\n{daemon.tail()}")
        return ready - daemon.started
    finally:
        daemon.stop()
        notify.close()


def restore_split(path: Path) -> dict[str, Any]:
    """In-process: reading every engine event and folding them (what the runner does now),
    against reading and folding from the current shoe's ``shoe_started`` only (which
    ``Engine.restore`` supports); both must give the same engine snapshot."""
    settings = _settings()
    variant = load_variant_by_name(settings.variant)
    journal = Journal(JournalSettings(path=path), TABLE_ID)
    try:
        start = time.perf_counter()
        history = [Event.from_dict(e.body) for e in journal.events()]
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        full = Engine.restore(settings, variant, history)
        fold_s = time.perf_counter() - start
        start = time.perf_counter()
        row = journal._db.execute(
            "SELECT max(seq) FROM events WHERE kind = 'shoe_started' AND origin = 'engine'"
        ).fetchone()
        after = 0 if row[0] is None else int(row[0]) - 1
        shoe = [Event.from_dict(e.body) for e in journal.events(after_seq=after)]
        current = Engine.restore(settings, variant, shoe)
        shoe_s = time.perf_counter() - start
    finally:
        journal.close()
    return {
        "events_folded_now": len(history),
        "read_events_ms": round(read_s * 1000, 1),
        "engine_restore_ms": round(fold_s * 1000, 1),
        "current_shoe_only_events": len(shoe),
        "current_shoe_only_read_and_fold_ms": round(shoe_s * 1000, 1),
        "current_shoe_only_same_snapshot": current.snapshot() == full.snapshot(),
    }


def run(shoes: int, runs: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            pty = TimedPty(tmp / "shoe")
            try:
                full = write_config(tmp / "full", TABLE_ID, pty.path, broker.port)
                empty = write_config(tmp / "empty", TABLE_ID, pty.path, broker.port)
                journal_path = tmp / "full" / "state" / "journal.sqlite3"
                journal_path.parent.mkdir(parents=True)
                events, inputs, build_s = build_journal(journal_path, shoes, seed)
                size_mb = journal_path.stat().st_size / 1e6
                full_times: list[float] = []
                empty_times: list[float] = []
                for _ in range(runs):  # interleaved, same load for both
                    shutil.rmtree(tmp / "empty" / "state", ignore_errors=True)
                    empty_times.append(time_to_ready(tmp / "empty", empty))
                    full_times.append(time_to_ready(tmp / "full", full))
                split = restore_split(journal_path)
            finally:
                pty.close()
    full_ms, empty_ms = ms(full_times), ms(empty_times)
    return {
        "shoes": shoes,
        "journal_events": events,
        "journal_inputs": inputs,
        "journal_mb": round(size_mb, 1),
        "journal_build_s": round(build_s, 1),
        "start_to_ready_100_shoes": full_ms.text(),
        "baseline_start_to_ready_empty_journal": empty_ms.text(),
        "added_by_journal_median_ms": round(full_ms.median - empty_ms.median, 1),
        "ratio_median": round(full_ms.median / empty_ms.median, 2),
        "in_process_split": split,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5, help="starts of each kind (interleaved)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report("restart to READY with a full journal", run(args.shoes, args.runs, args.seed), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
