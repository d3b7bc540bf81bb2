"""120 days of a table dealing 120 rounds an hour around the clock, on the default journal
limits and audit retention, in compressed time: the journal never refuses a round, never gives
its early warning, and the file stays under its size limit, levelled off by the retention.

The bytes a round costs are measured first, in this test: real shoes dealt by the rules
through a real engine into a real journal, one append per input as the daemon does (file
size, indexes included, over the rounds completed). The long run then journals each day as
one event carrying that many bytes per round (a row per card would take most of an hour of
SQLite work; the size limit, compaction and retention see bytes, shoes and timestamps, not
row counts), checks the size limit before compaction (the daily peak), marks the day
delivered as the publisher does and compacts. The journal's clock jumps a day per append.

The day's bytes and the size limit are both divided by :data:`SCALE` (the default 4 GiB limit
against ~19 MB a day would write ~2.5 GB per run): every figure the assertions compare is a
ratio of the two, and SQLite's fixed costs (schema, index roots, the first WAL frame) weigh
more in the smaller file, so the scaled run is the stricter one. ``LONG_RUN_SCALE=1`` runs it
full size (~2.5 GB written, in RAM when /dev/shm has room).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.rules.variants import load_variant_by_name
from tests.engine.reference import deal_shoe, shuffled_shoe
from tests.engine.support import engine
from tests.support.clock import DAY, Clock

ROUNDS_PER_HOUR = 120
ROUNDS_PER_SHOE = 80  # an 8-deck shoe deals 75-85 rounds
DAYS = 120
SCALE = int(os.environ.get("LONG_RUN_SCALE", "32"))


@pytest.fixture
def fast_dir() -> Iterator[Path]:
    """A RAM-backed folder where there is room for the run (~2.5 GB / SCALE), else a temp folder."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and shutil.disk_usage(shm).free > 4 * 1024**3 // SCALE else None
    path = Path(tempfile.mkdtemp(prefix="journal-long-run-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def measured_bytes_per_round(directory: Path) -> float:
    """Journal bytes per completed round of real shoes through the real engine."""
    eng = engine(unneeded_card_window_s=0)
    variant = load_variant_by_name("standard")
    clock = Clock(1_800_000_000.0)
    path = directory / "measure.sqlite3"
    journal = Journal(JournalSettings(path=path), "LONG-1", clock=clock)
    rounds = 0
    try:
        rng = random.Random(16)
        for shoe in range(3):
            dealt = deal_shoe(eng.settings, variant, shuffled_shoe(8, rng), cut_at=380, shoe_id=f"M{shoe}")
            for item in dealt.inputs:
                events = eng.handle(item)
                rounds += sum(1 for e in events if e.kind == "round_completed")
                out = journal.append([item], events)
                journal.mark_delivered(e.seq for e in out)
                clock.now += 1.0
    finally:
        journal.close()  # the last connection checkpoints the WAL into the file and removes it
    return path.stat().st_size / rounds


@pytest.mark.slow
def test_120_days_at_120_rounds_an_hour_fit_the_default_limits(fast_dir: Path) -> None:
    per_round = measured_bytes_per_round(fast_dir)
    assert 3000 < per_round < 20000, per_round  # the figure the README's arithmetic uses: ~6-7 kB
    day_bytes = per_round * ROUNDS_PER_HOUR * 24 / SCALE
    day_body = "x" * round(day_bytes)
    clock = Clock(1_800_000_000.0)
    default_limit = JournalSettings().max_bytes
    settings = JournalSettings(path=fast_dir / "journal.sqlite3", max_bytes=default_limit // SCALE)
    assert settings.model_dump(exclude={"path", "max_bytes"}) == JournalSettings().model_dump(
        exclude={"path", "max_bytes"}
    )  # every other limit, the warning fraction and the retention at their defaults
    journal = Journal(settings, "LONG-1", clock=clock, monotonic=clock)
    refused_days: list[int] = []
    largest = 0
    try:
        for day in range(DAYS):
            shoe = f"S{day * 24 * ROUNDS_PER_HOUR // ROUNDS_PER_SHOE}"
            rounds = DeliveryEvent(kind="day_of_rounds", at=clock.now, data={"b": day_body}, shoe_id=shoe)
            out = journal.append([], [rounds])
            clock.now += DAY
            journal.mark_delivered(e.seq for e in out)
            largest = max(largest, journal.size_bytes())  # the peak: before compaction
            if not journal.admits_new_round():
                refused_days.append(day)
            journal.compact()
        capacity = journal.capacity()
    finally:
        journal.close()

    assert refused_days == []
    assert largest < settings.max_bytes
    assert capacity.warning is None  # not even the early warning after 120 days
    # Retention really bounds it: at the peak, 90 days, the day just journaled, and that day
    # again in the WAL until the next checkpoint.
    kept_days = largest / day_bytes
    assert settings.audit_retention_days <= kept_days < settings.audit_retention_days + 5, kept_days
