"""Compaction on a real SQLite file: the file really shrinks, nothing undelivered goes, and
with nothing to delete it reads indexes only (no table scan under the append lock)."""

from __future__ import annotations

from pathlib import Path

from common.inputs import Tick
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.journal.compaction import BATCH_ROWS, TIGHT_BATCH_ROWS
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


def _plans(journal: Journal, statements: list[str]) -> list[tuple[str, list[str]]]:
    out = []
    for query in statements:
        if not query.lstrip().upper().startswith(("SELECT", "DELETE")):
            continue
        plan = journal._db.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
        out.append((query, [str(row[3]) for row in plan]))
    return out


def test_every_query_of_a_compaction_with_work_is_an_index_range_or_look_up(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    fill(journal, [f"old{i}" for i in range(4)], 600)
    waiting = journal.append([Tick(1.0)], [card("held", 0), card("held", 1)])
    journal.mark_delivered([waiting[1].seq])  # "held" has an event waiting: it stays whole
    journal.append([Tick(1.0)], [card("newer", 0)])
    journal.mark_delivered(range(waiting[1].seq + 1, journal.last_seq() + 1))
    clock.now += 2 * DAY
    current = journal.append([Tick(2.0)], [card("current", n) for n in range(100)])
    journal.mark_delivered(e.seq for e in current)
    statements: list[str] = []
    journal._db.set_trace_callback(statements.append)

    assert journal.compact() == 2400

    journal._db.set_trace_callback(None)
    plans = _plans(journal, statements)
    assert any(q.lstrip().upper().startswith("DELETE FROM EVENTS") for q, _ in plans)
    assert any(q.lstrip().upper().startswith("DELETE FROM INPUTS") for q, _ in plans)
    for query, plan in plans:
        for step in plan:
            # every step on events or inputs is a SEARCH (an index range or look-up), or a
            # SCAN of an index that stops at its first row (ORDER BY ... LIMIT 1)
            if step.startswith("SCAN") and ("events" in step or "inputs" in step):
                assert "INDEX" in step, (query, plan)
                assert query.rstrip().endswith("LIMIT 1"), (query, plan)
    kept = [e.shoe_id for e in journal.events(origin=None)]
    assert kept[:3] == ["held", "held", "newer"]
    assert set(kept[3:]) == {"current"}


def test_a_backlog_is_compacted_in_short_slices(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    fill(journal, [f"old{i}" for i in range(10)], 1000)
    clock.now += 2 * DAY
    fill(journal, ["current"], 50)
    run = journal.compaction_run()
    deleted_after: list[int] = []
    while not run.done:
        run.step()
        deleted_after.append(run.events_deleted)
    journal.forget_size()
    assert run.events_deleted == 10_000
    # no slice deleted more than a batch, and the deletions came in many slices
    steps = [b - a for a, b in zip([0, *deleted_after], deleted_after, strict=False)]
    assert max(steps) <= BATCH_ROWS
    assert sum(1 for step in steps if step) >= 10_000 // BATCH_ROWS
    assert run.pages_freed > 0
    assert journal._db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert [e.shoe_id for e in journal.events(origin=None)] == ["current"] * 50


def test_a_tight_run_keeps_the_wal_to_one_slice(tmp_path: Path) -> None:
    clock = Clock()
    journal = open_journal(tmp_path, clock)
    fill(journal, [f"old{i}" for i in range(6)], 1000)
    clock.now += 2 * DAY
    fill(journal, ["current"], 50)
    journal.compact(now=clock.now - 10 * DAY)  # nothing old enough: the WAL is as appends left it
    wal = Path(f"{journal.settings.path}-wal")
    run = journal.compaction_run(tight=True)
    sizes: list[int] = []
    while not run.done:
        run.step()
        sizes.append(wal.stat().st_size if wal.exists() else 0)
    assert run.events_deleted == 6000
    assert max(sizes) == 0  # truncated after every slice
    assert run.slices >= 6000 // TIGHT_BATCH_ROWS
