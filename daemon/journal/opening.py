"""Setting a journal file up on open, or checking the one that is there.

A new file gets ``auto_vacuum=INCREMENTAL`` (before its first table), WAL mode, the schema
and its meta; an existing one is checked (:mod:`daemon.journal.integrity`: tables and meta
present, schema version, table id, the newest seqs) and given what a journal made by an
older version lacks. Nothing that looks damaged is ever turned into a new journal.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.journal import delivery_alerts
from daemon.journal.compaction import COMPACTION_SCHEMA
from daemon.journal.errors import JournalError
from daemon.journal.faults import FaultKind, classify_storage_error
from daemon.journal.integrity import check_tail, damaged, meta_problem
from daemon.journal.settings import JournalSettings
from daemon.journal.snapshots import SNAPSHOT_SCHEMA, migrate_snapshots
from daemon.journal.transaction import Transaction

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inputs(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    at REAL NOT NULL,
    body TEXT NOT NULL,
    journaled_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    shoe_id TEXT,
    hand INTEGER,
    source TEXT NOT NULL,
    origin TEXT NOT NULL,
    body TEXT NOT NULL,
    input_id INTEGER,
    journaled_at REAL NOT NULL,
    delivered_at REAL,
    dead_letter TEXT
);
CREATE INDEX IF NOT EXISTS events_undelivered ON events(seq)
    WHERE delivered_at IS NULL AND dead_letter IS NULL;
CREATE TABLE IF NOT EXISTS command_nonces(
    nonce TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    seen_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS command_nonces_ts ON command_nonces(ts);
"""


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """The journal's meta after set-up, and whether the file held no table before."""

    meta: dict[str, str]
    fresh: bool


def set_up(
    db: sqlite3.Connection,
    settings: JournalSettings,
    table_id: str,
    lock: threading.RLock,
    clock: Callable[[], float],
) -> OpenedFile:
    """Prepare the connection and the file; raise :class:`JournalError` for a file that is
    damaged, newer than this daemon, or another table's."""
    path = settings.path
    db.execute(f"PRAGMA busy_timeout={int(settings.busy_timeout_ms)}")
    tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    fresh = not tables
    missing = {"meta", "events", "inputs"} - tables
    if not fresh and missing:
        # Creating them would turn a damaged journal (or another database) into a new one.
        raise damaged(path, f"tables missing: {', '.join(sorted(missing))}")
    if fresh:
        # Must precede the first table so deleted pages can be returned to the file system.
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise JournalError(f"journal {path}: cannot switch to WAL mode (got {mode})")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA foreign_keys=ON")
    db.executescript(_SCHEMA)
    db.executescript(COMPACTION_SCHEMA)
    db.executescript(SNAPSHOT_SCHEMA)
    db.executescript(delivery_alerts.DELIVERY_ALERTS_SCHEMA)
    with Transaction(db, lock):
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if not meta and not fresh:
            raise damaged(path, "the meta table is empty")
        if not meta:
            db.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("table_id", table_id),
                    ("journal_id", str(uuid.uuid4())),
                    ("next_seq", "1"),
                    ("created_at", repr(clock())),
                ],
            )
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        problem = meta_problem(meta)
        if problem is not None:
            raise damaged(path, problem)
        # Journals made before epochs and the compaction log get them here: their first
        # epoch is 0 under their own id, and compactions are logged from now on.
        db.executemany(
            "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
            [
                ("lineage_id", meta["journal_id"]),
                ("epoch", "0"),
                ("compaction_log_from_seq", meta["next_seq"]),
            ],
        )
        # Added tables are filled from the history once (each migration notes it in meta).
        delivery_alerts.migrate(db, int(meta["next_seq"]))
        migrate_snapshots(db)
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if int(meta["schema_version"]) > SCHEMA_VERSION:
        raise JournalError(
            f"journal {path} has schema version {meta['schema_version']}, "
            f"newer than this daemon's {SCHEMA_VERSION}"
        )
    if meta["table_id"] != table_id:
        raise JournalError(
            f"journal {path} belongs to table {meta['table_id']!r}, "
            f"not {table_id!r}: refusing to mix two tables' events"
        )
    check_tail(db, path, int(meta["next_seq"]))
    return OpenedFile(meta=meta, fresh=fresh)


def open_error(path: Path, exc: sqlite3.DatabaseError) -> JournalError:
    """The :class:`JournalError` for an SQLite error met while opening: a damaged file gets the
    way out, anything else the classifier's hint."""
    fault = classify_storage_error(exc)
    if fault.kind is FaultKind.CORRUPT:
        return damaged(path, str(exc))
    return JournalError(f"journal {path}: {exc} ({fault.hint})")
