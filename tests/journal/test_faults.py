"""The storage-error classifier on errors SQLite and the OS really raise."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from common.inputs import Tick
from daemon.journal import DeliveryEvent, FaultKind, Journal, JournalSettings, classify_storage_error


def test_not_a_database_is_corruption_that_no_retry_repairs(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"\x00garbage" * 1000)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError) as raised:
        db.execute("SELECT * FROM sqlite_master").fetchall()
    fault = classify_storage_error(raised.value)
    assert fault.kind is FaultKind.CORRUPT
    assert not fault.retry_may_help
    assert "journal verify" in fault.hint
    assert "journal export" in fault.hint
    assert "free disk space" not in fault.hint


def test_a_full_database_is_disk_full_with_the_free_space_hint(tmp_path: Path) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    page_count = journal._db.execute("PRAGMA page_count").fetchone()[0]
    journal._db.execute(f"PRAGMA max_page_count={page_count}")  # SQLite's own "disk is full"
    event = DeliveryEvent("card_dealt", 1.0, {"pad": "x" * 20000})
    with pytest.raises(sqlite3.OperationalError) as raised:
        journal.append([Tick(1.0)], [event])
    fault = classify_storage_error(raised.value)
    assert fault.kind is FaultKind.DISK_FULL
    assert fault.retry_may_help
    assert "free disk space" in fault.hint
    assert journal.last_seq() == 0


def test_a_locked_database_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t(x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as raised:
        other.execute("BEGIN IMMEDIATE")
    assert classify_storage_error(raised.value).kind is FaultKind.BUSY


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sqlite3.OperationalError("disk I/O error"), FaultKind.IO_ERROR),
        (sqlite3.DatabaseError("database disk image is malformed"), FaultKind.CORRUPT),
        (sqlite3.OperationalError("database or disk is full"), FaultKind.DISK_FULL),
        (sqlite3.OperationalError("attempt to write a readonly database"), FaultKind.READ_ONLY),
        (OSError(errno.ENOSPC, "No space left on device"), FaultKind.DISK_FULL),
        (OSError(errno.EIO, "Input/output error"), FaultKind.IO_ERROR),
        (OSError(errno.EROFS, "Read-only file system"), FaultKind.READ_ONLY),
        (ValueError("Out of range float values are not JSON compliant"), FaultKind.OTHER),
    ],
)
def test_errors_without_a_code_are_told_by_errno_or_sqlites_fixed_message(
    error: BaseException, kind: FaultKind
) -> None:
    fault = classify_storage_error(error)
    assert fault.kind is kind
    assert fault.error == str(error)


def test_the_cause_of_a_wrapping_error_is_classified() -> None:
    wrapped = RuntimeError("append failed")
    wrapped.__cause__ = sqlite3.DatabaseError("file is not a database")
    assert classify_storage_error(wrapped).kind is FaultKind.CORRUPT
