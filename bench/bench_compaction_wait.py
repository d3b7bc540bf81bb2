"""How long a card waits for the journal while compaction runs, at day 120 and after a table
was off for 7 and 35 days.

The journal is the steady-state one of :mod:`bench.steady_journal` (120 simulated days at
117 rounds an hour on the shipped defaults: it holds the last 90), copied for each scenario:

* ``hourly_day_120``: the journal clock one hour after the last round: the hourly run deletes
  about an hour of rounds;
* ``off_7_days`` / ``off_35_days``: the clock 7 / 35 days after the last round: the first
  run after the table comes back deletes that many days.

In each, the daemon's own :class:`~daemon.service.journal_housekeeping.JournalHousekeeping`
starts the compaction (on its thread, as in the daemon) while this process deals on: the
inputs of real shoes through a real engine, one ``Journal.append`` per input (a card), one
every :data:`CARD_EVERY_S`. A card's wait is its append's duration (the append's own fsync
included). The same dealing with no compaction, in the same run, is the baseline. The bound
this project states: no card waits more than 50 ms.

    nice -n 10 .venv/bin/python -m bench.bench_compaction_wait [--json]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_recovery import TABLE_ID, _settings, copy_journal
from bench.common import machine, ms, report
from bench.steady_journal import DAY, SimClock, cached_steady_journal, template_shoes
from common.inputs import EngineInput
from daemon.engine.table import Engine
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.mqtt.settings import DeliverySettings
from daemon.rules.variants import load_variant_by_name
from daemon.service.journal_housekeeping import FIRST_COMPACTION_AFTER_S, JournalHousekeeping

CARD_EVERY_S = 0.05
BOUND_MS = 50.0
SCENARIOS = {"hourly_day_120": 3600.0, "off_7_days": 7 * DAY, "off_35_days": 35 * DAY}


def deal(
    journal: Journal, inputs: list[EngineInput], engine: Engine, stop: threading.Event, at: float
) -> list[float]:
    """Append ``inputs`` one by one every CARD_EVERY_S until ``stop``; each append's seconds."""
    waits: list[float] = []
    shift = at - inputs[0].at
    index = 0
    while not stop.is_set():
        inp = inputs[index % len(inputs)]
        shifted = inp._replace(at=inp.at + shift + (index // len(inputs)) * 3600.0)
        events = engine.handle(shifted)
        started = time.perf_counter()
        journal.append([shifted], events)
        waits.append(time.perf_counter() - started)
        index += 1
        stop.wait(CARD_EVERY_S)
    return waits


def scenario(
    source: Path, sim_end: float, gap_s: float, tmp: Path, cards: list[EngineInput]
) -> dict[str, Any]:
    path = copy_journal(source, tmp / "scenario")
    clock = SimClock(sim_end + gap_s)
    journal = Journal(JournalSettings(path=path), TABLE_ID, clock=clock)
    settings = _settings()
    engine = Engine(settings, load_variant_by_name(settings.variant))
    delivery = DeliverySettings()
    keeper = JournalHousekeeping(journal, lambda: delivery, clock, lambda: None, reserve_bytes=0)
    try:
        # the baseline: the same dealing, no compaction (as long as the hourly run takes, >= 10 s)
        stop = threading.Event()
        timer = threading.Timer(10.0, stop.set)
        timer.start()
        baseline = deal(journal, cards, engine, stop, clock.now)
        size_before = journal.size_bytes()
        keeper.run(0.0)
        stop = threading.Event()
        waits: list[float] = []
        dealer = threading.Thread(
            target=lambda: waits.extend(deal(journal, cards, engine, stop, clock.now + 60))
        )
        dealer.start()
        started = time.monotonic()
        keeper.run(FIRST_COMPACTION_AFTER_S)  # starts the compaction on its thread
        while not keeper.wait_for_compaction(1.0):
            pass
        took = time.monotonic() - started
        stop.set()
        dealer.join()
        done = keeper.last_compaction
        assert done is not None
        during = ms(waits)
        base = ms(baseline)
        return {
            "events_deleted": done.events_deleted,
            "inputs_deleted": done.inputs_deleted,
            "pages_freed": done.pages_freed,
            "file_mb_before": round(size_before / 1e6, 1),
            "file_mb_after": round(journal.size_bytes() / 1e6, 1),
            "compaction_s": round(took, 1),
            "slices": done.slices,
            "longest_slice_ms": round(done.longest_slice_s * 1000, 1),
            "cards_during": len(waits),
            "card_wait_during": during.text(),
            "longest_card_wait_ms": round(max(waits) * 1000, 1),
            "card_wait_baseline": base.text(),
            "longest_card_wait_baseline_ms": round(max(baseline) * 1000, 1),
            "under_bound": max(waits) * 1000 <= BOUND_MS,
        }
    finally:
        keeper.stop()
        journal.close()
        shutil.rmtree(tmp / "scenario", ignore_errors=True)


def run(names: list[str], days: float) -> dict[str, Any]:
    source, facts = cached_steady_journal(days)
    cards = [inp for shoe in template_shoes(1) for inp in shoe]
    out: dict[str, Any] = {"journal": facts, "bound_ms": BOUND_MS}
    with tempfile.TemporaryDirectory(prefix="bench-compaction-", dir=source.parent.parent) as name:
        for scenario_name in names:
            out[scenario_name] = scenario(
                source, float(facts["sim_end"]), SCENARIOS[scenario_name], Path(name), cards
            )
    out["all_under_bound"] = all(out[n]["under_bound"] for n in names)
    out["machine"] = machine()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--days", type=float, default=120)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report("card waits while compaction runs", run(args.scenarios.split(","), args.days), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
