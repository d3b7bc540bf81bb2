"""Compaction on a real SQLite file: the file really shrinks, nothing undelivered goes, and
with nothing to delete it reads indexes only (no table scan under the append lock)."""

from __future__ import annotations

from pathlib import Path

from common.inputs import Tick
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.journal.compaction import BATCH_ROWS
from tests.support.clock import DAY, Clock


def card(shoe: str, n: int) -> DeliveryEvent:
    # About the size of a real card_dealt body, so page counts resemble a table's.
    return DeliveryEvent(kind="card_dealt", at=float(n), data={"n": n, "pad": "x" * 300}, shoe_id=shoe)


def fill(journal: Journal, shoes: list[str], events_per_shoe: int) -> None:
    for shoe in shoes:
        for start in range(0, events_per_shoe, 50):
            batch = [card(shoe, n) for n in range(start, min(start + 50, events_per_shoe))]
            journal.append([Tick(float(start))] * len(batch), batch)
    journal.mark_delivered(range(1, journal.last_seq() + 1))


def open_journal(tmp_path: Path, clock: Clock) -> Journal:
    settings = JournalSettings(path=tmp_path / "j.sqlite3", audit_retention_days=1, size_check_interval_s=60)
    return Journal(settings, "T1", clock=clock, monotonic=clock)


def test_compaction_returns_the_space_to_the_file_system(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    fill(journal, [f"old{i}" for i in range(6)], 1000)
    clock.now += 2 * DAY
    fill(journal, ["current"], 200)
    before = journal.size_bytes()

    assert journal.compact() == 6000
    after = journal.size_bytes()

    assert after < before * 0.2, (before, after)
    assert journal._db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert [e.shoe_id for e in journal.events(origin=None)] == ["current"] * 200
    assert journal.capacity().size_bytes == after  # re-measured at once, not after the interval


def test_compaction_deletes_in_batches_and_keeps_every_undelivered_event(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    total = 2 * BATCH_ROWS + 7
    for start in range(0, total, 500):
        journal.append([], [card("A", n) for n in range(start, min(start + 500, total))])
    journal.mark_delivered(range(1, total + 1))
    waiting = journal.append([], [card("B", 0), card("B", 1)])
    journal.append([], [card("C", 0)])
    journal.mark_delivered([waiting[1].seq, waiting[1].seq + 1])  # B's first event still waits
    clock.now += 2 * DAY

    assert journal.compact() == total  # A goes; B has one event waiting; C is current
    assert [(e.shoe_id, e.delivered_at is None) for e in journal.events(origin=None)] == [
        ("B", True),
        ("B", False),
        ("C", False),
    ]


def test_compaction_with_nothing_to_do_reads_indexes_only(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    fill(journal, ["S1", "S2"], 300)
    statements: list[str] = []
    journal._db.set_trace_callback(statements.append)

    assert journal.compact() == 0

    journal._db.set_trace_callback(None)
    queries = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "DELETE"))]
    assert queries, "compaction ran no query at all"
    for query in queries:
        plan = journal._db.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
        scans = [row[3] for row in plan if row[3].startswith("SCAN") and "INDEX" not in row[3]]
        assert not scans, (query, plan)
    assert not any(s.lstrip().upper().startswith("DELETE") for s in statements)
