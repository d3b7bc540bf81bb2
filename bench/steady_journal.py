"""A journal in its steady state: a table dealing around the clock for ``--days`` simulated
days, built by the project's own writer, on the shipped journal defaults.

How it is built: the decoded inputs of a 25-shoe Angel Eye stream (``bench_recovery``'s
template: real decoder, clean 8-deck shoes) go through the real engine again and again; each
shoe is committed with ``Journal.append`` (one transaction a shoe, the rows the daemon writes
one input at a time) at the simulated time it ends, shoes following each other at
:data:`ROUNDS_PER_HOUR` rounds an hour, every event marked delivered as the publisher does,
the daemon's own :class:`~daemon.service.engine_restore.SnapshotTaker` storing snapshots,
one ``mqtt_delivery_failing`` episode (raised and cleared) a day, and
:meth:`Journal.compact` once a simulated day with the shipped ``audit_retention_days`` (90):
from day 90 on the file holds 90 days, as a table's does. Then half a shoe more (a restart
mid-shoe).

Built once and cached under ``$TMPDIR/bench-recovery-cache/steady-v{format}-{days}d`` (never
committed); building 120 days takes tens of minutes of one core: run it under ``nice``.

    nice -n 10 .venv/bin/python -m bench.steady_journal [--days 120]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_recovery import T0, TABLE_ID, _settings, template_inputs
from common.inputs import EngineInput
from daemon.alerts import AlertCode
from daemon.engine.events import Event, EventKind
from daemon.engine.table import Engine
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.rules.variants import load_variant_by_name
from daemon.service.engine_restore import SnapshotTaker

ROUNDS_PER_HOUR = 117
DAY = 86400.0
STEADY_FORMAT = 1


def template_shoes(seed: int) -> list[list[EngineInput]]:
    """The template stream cut after each input that ends a shoe (the inputs before a shoe's
    first card belong to it)."""
    inputs, _span = template_inputs(seed)
    settings = _settings()
    probe = Engine(settings, load_variant_by_name(settings.variant))
    shoes: list[list[EngineInput]] = []
    current: list[EngineInput] = []
    for inp in inputs:
        current.append(inp)
        if any(e.kind == EventKind.SHOE_ENDED for e in probe.handle(inp)):
            shoes.append(current)
            current = []
    return shoes


class SimClock:
    """The journal's clock: simulated seconds, set by the builder."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def build(path: Path, days: float, seed: int, log_every_days: int = 5) -> dict[str, Any]:
    """Write ``days`` simulated days of dealing into a new journal at ``path``."""
    started = time.monotonic()
    settings = _settings()
    engine = Engine(settings, load_variant_by_name(settings.variant))
    shoes = template_shoes(seed)
    clock = SimClock(T0)
    defaults = JournalSettings(path=path)
    journal = Journal(defaults, TABLE_ID, clock=clock)
    taker = SnapshotTaker(journal)
    end = T0 + days * DAY
    next_compaction = T0 + DAY
    next_alert = T0 + DAY / 2
    shoe_count = rounds = compactions = deleted = 0
    try:
        while clock.now < end:
            template = shoes[shoe_count % len(shoes)]
            shift = clock.now - template[0].at
            batch = [inp._replace(at=inp.at + shift) for inp in template]
            events: list[Event] = []
            for inp in batch:
                events.extend(engine.handle(inp))
            shoe_rounds = sum(1 for e in events if e.kind == EventKind.ROUND_COMPLETED)
            clock.now += shoe_rounds * 3600.0 / ROUNDS_PER_HOUR
            journaled = journal.append(batch, events)
            taker.after_append(engine, journaled)
            journal.mark_delivered(e.seq for e in journaled)
            shoe_count += 1
            rounds += shoe_rounds
            if clock.now >= next_alert:
                next_alert += DAY
                alert_id, raised = alert_raised(
                    AlertCode.MQTT_DELIVERY_FAILING, "broker away (simulated)", {}, clock.now
                )
                first = journal.append_delivery_event(raised)
                second = journal.append_delivery_event(
                    alert_cleared(alert_id, AlertCode.MQTT_DELIVERY_FAILING, "broker back", clock.now)
                )
                journal.mark_delivered([first.seq, second.seq])
            if clock.now >= next_compaction:
                next_compaction += DAY
                deleted += journal.compact()
                compactions += 1
                day = int((clock.now - T0) / DAY)
                if day % log_every_days == 0:
                    print(
                        f"day {day}: {shoe_count} shoes, seq {journal.last_seq()}, "
                        f"{journal.size_bytes() / 1e6:.0f} MB, {time.monotonic() - started:.0f} s",
                        file=sys.stderr,
                        flush=True,
                    )
        # half a shoe more: the restart comes mid-shoe
        template = shoes[shoe_count % len(shoes)]
        half = template[: len(template) // 2]
        shift = clock.now - half[0].at
        batch = [inp._replace(at=inp.at + shift) for inp in half]
        events = []
        for inp in batch:
            events.extend(engine.handle(inp))
        journaled = journal.append(batch, events)
        taker.after_append(engine, journaled)
        journal.mark_delivered(e.seq for e in journaled)
        held = journal._db.execute("SELECT count(*), min(seq) FROM events").fetchone()
        facts = {
            "days": days,
            "shoes": shoe_count,
            "rounds": rounds,
            "rounds_per_hour": ROUNDS_PER_HOUR,
            "events_journaled": journal.last_seq(),
            "events_held": int(held[0]),
            "first_seq_held": int(held[1]),
            "compactions": compactions,
            "events_compacted": deleted,
            "sim_end": clock.now,
            "size_mb": round(journal.size_bytes() / 1e6, 1),
            "build_s": round(time.monotonic() - started, 1),
        }
    finally:
        journal.close()
    return facts


def cached_steady_journal(days: float = 120, seed: int = 1) -> tuple[Path, dict[str, Any]]:
    """The steady-state journal (built once, kept under the temp dir) and its build facts."""
    folder = (
        Path(tempfile.gettempdir()) / "bench-recovery-cache" / f"steady-v{STEADY_FORMAT}-{days:g}d-{seed}"
    )
    path = folder / "journal.sqlite3"
    facts = folder / "facts.json"
    if not facts.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        built = build(path, days, seed)
        facts.write_text(json.dumps(built))
    return path, dict(json.loads(facts.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=float, default=120)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    path, facts = cached_steady_journal(args.days, args.seed)
    print(json.dumps({"path": str(path), **facts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
