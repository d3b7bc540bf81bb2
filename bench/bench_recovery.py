"""Crash recovery: time from (re)start to READY, cold (page cache dropped, as after a reboot)
and warm, with journals of 25 and 2,000 shoes and a table's 90-day steady state.

The shoe journals are made by the production pieces run fast in this process: the Angel Eye
decoder and the engine over clean 8-deck shoes (a 25-shoe template stream, repeated with its
times shifted), committed with ``Journal.append`` one shoe per transaction (the rows are the
ones the daemon writes one input at a time; only ``input_id`` names the shoe's last input),
with the daemon's own :class:`~daemon.service.engine_restore.SnapshotTaker` storing a snapshot
at every shoe's end, then half a shoe more (a restart mid-shoe), every event marked delivered as
after a normal day. The steady state is :mod:`bench.steady_journal`'s: 120 simulated days of
24 h dealing at 117 rounds an hour on the shipped defaults, compacted daily (it holds the
last 90 days). All are cached under ``$TMPDIR/bench-recovery-cache`` and copied for each run
of this script; each copy is started once before the figures (a journal from an older
version is migrated on its first open).

Then the real daemon (``python -m daemon.cli run``) is started again and again with
``NOTIFY_SOCKET`` pointing at a socket this script binds: the figure is Popen -> ``READY=1``,
interleaved over the sizes, each size once right after ``echo 3 > /proc/sys/vm/drop_caches``
(cold: root only) and once again at once (warm), and a *baseline* (the same daemon on an
empty journal). Every ratio (cold and warm READY medians, each size against 25 shoes) must
be <= 1.3.

In process, per size: opening the journal, the start path (newest snapshot + the events after
it), and what start-up did before snapshots (reading and folding every event; for the sizes up
to ``--full-fold-max``), and ``journal verify``'s whole-file check (O(size), on demand only).

    nice -n 10 .venv/bin/python -m bench.bench_recovery [--shoes 25,2000] [--steady-days 120]
        [--runs 5] [--json]       (as root: the cold starts drop the page cache)
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

from bench.common import machine, ms, report
from bench.rig import Broker, DaemonProcess, NotifySocket, TimedPty, forwarded, shoe_stream, write_config
from common.inputs import EngineInput
from daemon.engine.checkpoint import EngineCheckpoint, capture, fold_key
from daemon.engine.events import Event, EventKind
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal.integrity import verify_journal
from daemon.journal.settings import JournalSettings
from daemon.journal.snapshots import row_problem
from daemon.journal.store import Journal
from daemon.rules.variants import load_variant_by_name
from daemon.service.engine_restore import (
    SnapshotTaker,
    drop_snapshots,
    restore_from_journal,
    verify_snapshots,
)
from drivers.protocols.angel_eye import AngelEyeDecoder

TABLE_ID = "RECOVER-1"
TEMPLATE_SHOES = 25
CACHE_FORMAT = 1
T0 = 1_700_000_000.0


def _settings() -> TableSettings:
    return TableSettings(device_starts_shoe=True, unneeded_card_window_s=0)


def template_inputs(seed: int) -> tuple[list[EngineInput], float]:
    """The decoded inputs of a ``TEMPLATE_SHOES``-shoe stream, and its span in seconds."""
    decoder = AngelEyeDecoder()
    inputs: list[EngineInput] = []
    steps = shoe_stream(TEMPLATE_SHOES, seed).steps
    for step in steps:
        assert step.data is not None
        inputs.extend(forwarded(decoder.feed(step.data, T0 + step.t)))
    return inputs, steps[-1].t + 60.0


def build_journal(path: Path, shoes: int, seed: int) -> dict[str, Any]:
    """Write ``shoes`` dealt shoes and half a shoe into a journal at ``path``."""
    started = time.monotonic()
    settings = _settings()
    engine = Engine(settings, load_variant_by_name(settings.variant))
    template, span = template_inputs(seed)
    journal = Journal(JournalSettings(path=path), TABLE_ID)
    taker = SnapshotTaker(journal)
    batch: list[EngineInput] = []
    events: list[Event] = []
    ended = 0
    count_inputs = 0
    try:
        repeat = 0
        while ended < shoes:
            for inp in template:
                if ended >= shoes:
                    break
                shifted = inp._replace(at=inp.at + repeat * span)
                batch.append(shifted)
                out = engine.handle(shifted)
                events.extend(out)
                if any(e.kind == EventKind.SHOE_ENDED for e in out):
                    ended += 1
                    taker.after_append(engine, journal.append(batch, events))
                    count_inputs += len(batch)
                    batch, events = [], []
            repeat += 1
        # half a shoe more: the restart comes mid-shoe
        shoe_inputs = next_shoe_half(template, ended % TEMPLATE_SHOES, engine)
        for inp in shoe_inputs:
            shifted = inp._replace(at=inp.at + repeat * span + span)
            batch.append(shifted)
            events.extend(engine.handle(shifted))
        taker.after_append(engine, journal.append(batch, events))
        count_inputs += len(batch)
        last = journal.last_seq()
        for first in range(1, last + 1, 20000):
            journal.mark_delivered(range(first, min(last, first + 19999) + 1))
        snapshots = len(journal.snapshots.newest_first())
    finally:
        journal.close()
    return {
        "events": last,
        "inputs": count_inputs,
        "snapshots_taken": taker.taken,
        "snapshots_kept": snapshots,
        "build_s": round(time.monotonic() - started, 1),
    }


def next_shoe_half(template: list[EngineInput], shoe: int, engine: Engine) -> list[EngineInput]:
    """About half of template shoe ``shoe``'s inputs (from its first card)."""
    probe = Engine(engine.configured_settings, engine.configured_variant)
    starts: list[int] = []
    for i, inp in enumerate(template):
        if any(e.kind == EventKind.SHOE_STARTED for e in probe.handle(inp)):
            starts.append(i)
    first = starts[shoe]
    end = starts[shoe + 1] if shoe + 1 < len(starts) else len(template)
    return template[first : first + (end - first) // 2]


def cached_journal(shoes: int, seed: int) -> tuple[Path, dict[str, Any]]:
    """The journal for ``shoes`` (built once, kept under the temp dir) and its build figures.

    Its newest snapshot is brought up to date first: when the engine's fold code changed since
    it was built, the start path folds it whole once and stores a new one (as the daemon does)."""
    folder = Path(tempfile.gettempdir()) / "bench-recovery-cache" / f"v{CACHE_FORMAT}-{shoes}-{seed}"
    path = folder / "journal.sqlite3"
    facts = folder / "facts.json"
    if not facts.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        built = build_journal(path, shoes, seed)
        facts.write_text(json.dumps(built))
    refresh_snapshot(path)
    return path, dict(json.loads(facts.read_text()))


def refresh_snapshot(path: Path) -> None:
    """When the engine's fold code changed since the journal was built (its snapshots' key is
    stale, or they were stored before snapshot rows had a checksum), store the snapshot the
    daemon would have stored: at the last shoe's end (the half
    shoe after it is the tail a restart folds). One pass over the events."""
    settings = _settings()
    variant = load_variant_by_name(settings.variant)
    journal = Journal(JournalSettings(path=path), TABLE_ID)
    try:
        newest = journal.snapshots.newest_first()
        if newest and newest[0].key == fold_key(settings) and row_problem(newest[0]) is None:
            return
        engine = Engine(settings, variant)
        last_end: tuple[int, EngineCheckpoint] | None = None
        for journaled in journal.events():
            engine.apply(Event.from_dict(journaled.body))
            if journaled.kind == EventKind.SHOE_ENDED:
                last_end = (journaled.seq, capture(engine, journaled.at))
    finally:
        journal.close()
    drop_snapshots(path)
    if last_end is not None:
        journal = Journal(JournalSettings(path=path), TABLE_ID)
        try:
            seq, checkpoint = last_end
            journal.snapshots.save(seq, checkpoint.key, checkpoint.to_json(), time.time())
        finally:
            journal.close()


def copy_journal(source: Path, target_dir: Path) -> Path:
    target_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", ".marker"):
        src = Path(f"{source}{suffix}")
        if src.exists():
            shutil.copyfile(src, target_dir / f"journal.sqlite3{suffix}")
    return target_dir / "journal.sqlite3"


def time_to_ready(workdir: Path, config: Path, timeout: float = 180.0) -> float:
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


def in_process(path: Path, full_fold: bool) -> dict[str, Any]:
    """Where start-up time goes, measured in this process on a copy of the journal."""
    settings = _settings()
    variant = load_variant_by_name(settings.variant)
    out: dict[str, Any] = {}
    start = time.perf_counter()
    journal = Journal(JournalSettings(path=path), TABLE_ID)
    out["open_journal_ms"] = round((time.perf_counter() - start) * 1000, 1)
    try:
        start = time.perf_counter()
        restored = restore_from_journal(journal, settings, variant)
        out["start_path_snapshot_plus_tail_ms"] = round((time.perf_counter() - start) * 1000, 1)
        out["events_folded_at_start"] = restored.events_folded
        out["from_snapshot_seq"] = restored.snapshot_seq
        if full_fold:
            start = time.perf_counter()
            history = [Event.from_dict(e.body) for e in journal.events()]
            read_s = time.perf_counter() - start
            start = time.perf_counter()
            full = Engine.restore(settings, variant, history)
            out["before_read_all_events_ms"] = round(read_s * 1000, 1)
            out["before_fold_all_events_ms"] = round((time.perf_counter() - start) * 1000, 1)
            out["same_state_as_full_fold"] = full.state.comparable() == restored.engine.state.comparable()
    finally:
        journal.close()
    if full_fold:
        start = time.perf_counter()
        verified = verify_journal(path)
        out["on_demand_verify_journal_ms"] = round((time.perf_counter() - start) * 1000, 1)
        start = time.perf_counter()
        snaps = verify_snapshots(path)
        out["on_demand_verify_snapshots_ms"] = round((time.perf_counter() - start) * 1000, 1)
        out["verify_ok"] = verified.ok and not snaps.problems
    return out


def drop_page_cache() -> None:
    """Empty the kernel's page cache (root only): the next start reads everything from disk,
    as after a reboot."""
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run(sizes: list[int], runs: int, seed: int, full_fold_max: int, steady_days: float) -> dict[str, Any]:
    built: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    for shoes in sizes:
        sources[f"{shoes}_shoes"], built[f"{shoes}_shoes"] = cached_journal(shoes, seed)
    if steady_days > 0:
        from bench.steady_journal import cached_steady_journal  # it builds on this module's template

        key = f"steady_{steady_days:g}_days"
        sources[key], built[key] = cached_steady_journal(steady_days, seed)
        refresh_snapshot(sources[key])
    names = list(sources)
    with tempfile.TemporaryDirectory(
        prefix="bench-recovery-", dir=sources[names[-1]].parent.parent
    ) as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            pty = TimedPty(tmp / "shoe")
            try:
                configs: dict[str, Path] = {}
                sizes_mb: dict[str, float] = {}
                for name in names:
                    configs[name] = write_config(tmp / name, TABLE_ID, pty.path, broker.port)
                    copied = copy_journal(sources[name], tmp / name / "state")
                    sizes_mb[name] = round(copied.stat().st_size / 1e6, 1)
                    time_to_ready(tmp / name, configs[name])  # the first start migrates an older file
                empty = write_config(tmp / "empty", TABLE_ID, pty.path, broker.port)
                cold: dict[str, list[float]] = {n: [] for n in names}
                warm: dict[str, list[float]] = {n: [] for n in names}
                empty_times: list[float] = []
                for _ in range(runs):  # interleaved, same load for all
                    shutil.rmtree(tmp / "empty" / "state", ignore_errors=True)
                    empty_times.append(time_to_ready(tmp / "empty", empty))
                    for name in names:
                        drop_page_cache()
                        cold[name].append(time_to_ready(tmp / name, configs[name]))
                        warm[name].append(time_to_ready(tmp / name, configs[name]))
                split = {
                    name: in_process(
                        tmp / name / "state" / "journal.sqlite3",
                        name.endswith("_shoes") and int(name.split("_")[0]) <= full_fold_max,
                    )
                    for name in names
                }
            finally:
                pty.close()
    rows: dict[str, Any] = {}
    for name in names:
        rows[name] = {
            "journal_mb": sizes_mb[name],
            **built[name],
            "ready_cold": ms(cold[name]).text(),
            "ready_warm": ms(warm[name]).text(),
            "ready_cold_median_ms": round(ms(cold[name]).median, 1),
            "ready_warm_median_ms": round(ms(warm[name]).median, 1),
            "in_process": split[name],
        }
    out: dict[str, Any] = {"baseline_start_to_ready_empty_journal": ms(empty_times).text(), **rows}
    base = f"{min(sizes)}_shoes" if sizes else None
    if base is not None:
        for name in names:
            if name == base:
                continue
            for kind, times in (("cold", cold), ("warm", warm)):
                ratio = ms(times[name]).median / ms(times[base]).median
                out[f"ratio_{kind}_{name}_to_{base}"] = round(ratio, 3)
        worst = max(v for k, v in out.items() if k.startswith("ratio_"))
        out["target_every_ratio_at_most_1.3"] = "met" if worst <= 1.3 else "NOT met"
    out["machine"] = machine()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", default="25,2000", help="comma-separated journal sizes in shoes")
    parser.add_argument(
        "--steady-days",
        type=float,
        default=120,
        help="also the steady-state journal of bench.steady_journal after this many days (0: not)",
    )
    parser.add_argument("--runs", type=int, default=5, help="starts of each size (interleaved)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--full-fold-max", type=int, default=400, help="measure the full fold up to this many shoes"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.shoes.split(",")})
    report(
        "restart to READY by journal size",
        run(sizes, args.runs, args.seed, args.full_fold_max, args.steady_days),
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
