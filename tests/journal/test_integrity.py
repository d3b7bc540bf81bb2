"""Damaged journals on real files: refused on open (never replaced), named by verify with the
way out; compaction's own deletions are not damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from common.cards import Card
from common.inputs import CardRead, Tick
from daemon.journal import (
    ContinuityKind,
    DeliveryEvent,
    FaultKind,
    Journal,
    JournalError,
    JournalSettings,
    verify_journal,
)
from daemon.journal.faults import classify_storage_error
from tests.support.clock import DAY, Clock


def card(shoe: str, n: int) -> DeliveryEvent:
    return DeliveryEvent(kind="card_dealt", at=float(n), data={"n": n, "pad": "x" * 300}, shoe_id=shoe)


def open_journal(path: Path, clock: Clock | None = None) -> Journal:
    clock = clock or Clock()
    settings = JournalSettings(path=path, audit_retention_days=1)
    return Journal(settings, "T1", clock=clock, monotonic=clock)


def make_journal(path: Path, events: int, delivered: int = 0) -> None:
    journal = open_journal(path)
    for n in range(events):
        journal.append([CardRead(Card.parse("8s"), float(n))], [card("S1", n)])
    journal.mark_delivered(range(1, delivered + 1))
    journal.close()


def edit(path: Path, sql: str, *params: object) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(sql, params)
    db.close()


def test_a_zero_byte_journal_is_refused_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    path.touch()
    with pytest.raises(JournalError, match=r"is damaged: the file is empty \(0 bytes\).*move it aside"):
        open_journal(path)
    assert path.stat().st_size == 0
    report = verify_journal(path)
    assert not report.readable
    assert "empty" in report.problems[0]


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    path.write_bytes(b"this was overwritten by something else\n" * 100)
    with pytest.raises(JournalError, match=f"journal {path} is damaged: the file is not an SQLite database"):
        open_journal(path)
    assert path.read_bytes().startswith(b"this was overwritten")


def test_another_sqlite_database_is_not_turned_into_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    edit(path, "CREATE TABLE something(x)")
    with pytest.raises(JournalError, match="tables missing: events, inputs, meta"):
        open_journal(path)
    assert verify_journal(path).problems == ["tables missing: meta, events, inputs"]


def test_a_wal_without_its_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    Path(f"{path}-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(60))
    with pytest.raises(JournalError, match="the database file is missing but its WAL"):
        open_journal(path)
    assert not path.exists()


def test_a_corrupted_page_is_found_by_verify_and_refused_or_classified(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 600, delivered=300)
    assert verify_journal(path).ok
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(size // 2)
        f.write(b"\xa5" * 8192)

    report = verify_journal(path)
    assert report.readable
    assert not report.ok
    assert any("integrity_check" in p or "malformed" in p for p in report.problems), report.problems
    refused: JournalError | None = None
    try:
        journal = open_journal(path)
    except JournalError as exc:
        refused = exc
    if refused is not None:
        assert f"journal {path} is damaged" in str(refused)
        assert "move it aside" in str(refused)
    else:  # the damaged page is not one an open reads: the first read of it fails, named corrupt
        with pytest.raises(sqlite3.DatabaseError) as raised:
            list(journal.events())
        assert classify_storage_error(raised.value).kind is FaultKind.CORRUPT


def test_a_deleted_undelivered_row_is_a_hole_verify_names_and_open_refuses(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 20, delivered=10)
    edit(path, "DELETE FROM events WHERE seq = 15")

    report = verify_journal(path)
    assert report.problems == ["seq 15 missing: not removed by compaction (a deleted or lost row)"]
    assert report.delivered_through == 10
    with pytest.raises(
        JournalError, match=r"1 undelivered event row\(s\) missing.*up to seq 10 were delivered"
    ):
        open_journal(path)


def test_a_deleted_delivered_row_is_damage_but_compaction_is_not(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path, clock)
    for shoe in ("old1", "old2"):
        journal.append([Tick(1.0)], [card(shoe, n) for n in range(30)])
    journal.mark_delivered(range(1, 61))
    clock.now += 2 * DAY
    journal.append([Tick(2.0)], [card("current", n) for n in range(5)])
    assert journal.compact() == 60
    journal.append([Tick(3.0)], [card("current", 9)])
    journal.mark_delivered([61, 62])
    journal.close()
    assert verify_journal(path).ok, verify_journal(path).problems

    edit(path, "DELETE FROM events WHERE seq = 62")  # delivered, but not compaction's doing
    assert verify_journal(path).problems == [
        "seq 62 missing: not removed by compaction (a deleted or lost row)"
    ]


def test_meta_damage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 3)
    edit(path, "DELETE FROM meta WHERE key = 'next_seq'")
    with pytest.raises(JournalError, match="meta keys missing: next_seq"):
        open_journal(path)
    assert verify_journal(path).problems == ["meta keys missing: next_seq"]


@pytest.mark.parametrize(("key", "value"), [("next_seq", "0"), ("epoch", "two"), ("schema_version", "x")])
def test_a_meta_value_that_is_not_sane_is_refused(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 3)
    edit(path, "UPDATE meta SET value = ? WHERE key = ?", value, key)
    with pytest.raises(JournalError, match=f"is damaged: meta {key} is"):
        open_journal(path)
    assert verify_journal(path).problems[0].startswith(f"meta {key} is")


def test_an_event_past_the_seq_counter_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 5, delivered=5)
    edit(path, "UPDATE meta SET value = '3' WHERE key = 'next_seq'")
    with pytest.raises(JournalError, match="event seq 5 is at or past the seq counter"):
        open_journal(path)
    assert not verify_journal(path).ok


def test_an_event_whose_input_is_gone_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 4, delivered=4)
    edit(path, "DELETE FROM inputs WHERE id = 2")
    assert verify_journal(path).problems == ["seq 2 names input 2, which is missing"]


def test_a_journal_made_before_epochs_is_upgraded_and_whole(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 5, delivered=2)
    edit(path, "DELETE FROM meta WHERE key IN ('lineage_id', 'epoch', 'compaction_log_from_seq')")
    edit(path, "DROP TABLE compacted_seqs")
    Path(f"{path}.marker").unlink()
    journal = open_journal(path)
    assert journal.continuity.kind is ContinuityKind.UNPROVEN  # no marker kept before: a new epoch
    assert journal.epoch == 1
    journal.close()
    report = verify_journal(path)
    assert report.ok
    assert (report.events, report.last_seq, report.undelivered) == (5, 5, 3)


def test_compactions_are_logged_as_merged_ranges(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path, clock)
    for shoe in ("old1", "old2"):
        journal.append([Tick(1.0)], [card(shoe, n) for n in range(30)])
    journal.mark_delivered([*range(1, 45), *range(46, 61)])  # seq 45 of old2 still waiting
    clock.now += 2 * DAY
    journal.append([Tick(2.0)], [card("current", n) for n in range(5)])
    assert journal.compact() == 30
    journal.mark_delivered([45])
    assert journal.compact() == 30
    journal.close()

    db = sqlite3.connect(path)
    assert db.execute("SELECT first_seq, last_seq FROM compacted_seqs").fetchall() == [(1, 60)]
    db.close()
    report = verify_journal(path)
    assert report.ok, report.problems
    assert (report.events, report.last_seq) == (5, 65)


def test_verify_reads_one_moment_of_a_journal_the_daemon_writes_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify runs beside a dealing daemon (check-config, an auditor): a card appended and a
    compaction done between its reads must not look like damage."""
    import daemon.journal.integrity as integrity
    from tests.journal.test_compaction import card, fill
    from tests.journal.test_compaction import open_journal as open_compacting_journal

    clock = Clock()
    journal = open_compacting_journal(tmp_path, clock)
    fill(journal, ["old"], 300)
    clock.now += 2 * DAY
    fill(journal, ["current"], 10)
    read_logged_ranges = integrity._logged_ranges

    def daemon_works_meanwhile(db: Any, tables: Any) -> Any:
        ranges = read_logged_ranges(db, tables)
        journal.append([], [card("current", 999)])
        assert journal.compact() == 300
        return ranges

    monkeypatch.setattr(integrity, "_logged_ranges", daemon_works_meanwhile)
    report = integrity.verify_journal(journal.settings.path)
    assert report.problems == []
