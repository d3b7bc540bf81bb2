"""Journal compaction: delete what the audit retention no longer needs, and give the space
back to the file system, in short slices that never hold the journal long.

What may go: delivered (or dead-lettered) events journaled before the retention cutoff,
below the first undelivered event and, while the game server's acknowledgement is required
(``delivery.server_ack.enabled``, :mod:`daemon.journal.server_ack`), at or below the ``seq``
the server acknowledged, whose shoe is neither the current one (that of the newest engine
event) nor a shoe that still has an event waiting; then inputs older than the cutoff and
older than the input of every event kept. A PUBACK is only the broker's word: an event the
server has not acknowledged may still have to be sent again.

How (:class:`CompactionRun`): the events are walked in ``seq`` order from the oldest, along
the primary key, and the walk ends at the first event journaled at or after the cutoff (an
event of a clock stepped back waits for a later run: compaction may keep too much, never
delete too much); whether a shoe must stay whole is one look-up of the ``events_shoe``
index per shoe met. Inputs are walked by id the same way, then free pages are returned to
the file system. No query scans a table: every one is an index range or look-up (a test
checks their ``EXPLAIN QUERY PLAN``), and the cost of a run follows what it deletes, not
the size of the journal.

Each :meth:`CompactionRun.step` is one slice: one short transaction under the journal lock,
sized so it takes about :data:`SLICE_BUDGET_S` (the rows per slice adapt to the measured
time), so an append (a card) waits at most about one slice. The service runs the slices on
a thread of their own with a pause after each (:mod:`daemon.service.journal_housekeeping`).
The WAL is checkpointed and truncated whenever it passes :data:`WAL_TRUNCATE_BYTES`, and
after every slice in a *tight* run (a nearly full disk): the WAL then never holds more than
one slice's pages, so compaction itself never fills the disk it is freeing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from daemon.journal import server_ack
from daemon.journal.records import ORIGIN_ENGINE
from daemon.journal.reserve import free_bytes
from daemon.journal.transaction import Transaction

BATCH_ROWS = 2000
"""The most rows one slice deletes (its rows adapt below this to the time budget)."""
TIGHT_BATCH_ROWS = 200
"""The most rows one slice deletes in a tight run (a nearly full disk: a small WAL each)."""
FIRST_SLICE_ROWS = 200
FIRST_SLICE_PAGES = 32
VACUUM_PAGES = 1000
"""The most pages one slice returns to the file system."""
SLICE_BUDGET_S = 0.010
"""The time one slice aims at (measured, adapted): a card waits about this long at most."""
WAL_TRUNCATE_BYTES = 1024 * 1024
"""A run checkpoints and truncates the WAL whenever it grows past this."""
TIGHT_MARGIN_BYTES = 256 * 1024
"""Free space a tight slice leaves alone (SQLite's own bookkeeping, the WAL index)."""
MAX_FULL_FAILURES = 20
"""A tight run gives up after this many slices failed for a full disk (tried again later)."""

# Created on every open (IF NOT EXISTS), so journals made before they existed get them too.
# compacted_seqs logs every seq compaction deleted, as merged ranges: a missing seq outside
# them is a lost or deleted row (daemon/journal/integrity.py), not compaction's doing.
COMPACTION_SCHEMA = """
CREATE INDEX IF NOT EXISTS events_journaled_at ON events(journaled_at);
CREATE INDEX IF NOT EXISTS events_shoe ON events(shoe_id, seq) WHERE shoe_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS compacted_seqs(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS compacted_seqs_last ON compacted_seqs(last_seq);
"""


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction removed."""

    events_deleted: int
    inputs_deleted: int
    pages_freed: int


def compact(db: sqlite3.Connection, lock: threading.RLock, cutoff: float) -> CompactionResult:
    """Remove events and inputs journaled before ``cutoff`` that the rules above allow, and
    shrink the file by the pages they held: every slice of a :class:`CompactionRun` at once."""
    run = CompactionRun(db, lock, cutoff)
    while not run.done:
        run.step()
    return run.result()


class Phase(Enum):
    """Where a run is."""

    EVENTS = "events"
    INPUTS = "inputs"
    VACUUM = "vacuum"
    DONE = "done"


class CompactionRun:
    """One compaction, done a slice per :meth:`step` (each a short transaction under ``lock``).

    ``tight``: the disk is nearly full: smaller slices and the WAL truncated after every one.
    ``wal_path``: the WAL file, watched for :data:`WAL_TRUNCATE_BYTES` (None: the main
    database's name plus ``-wal``)."""

    def __init__(
        self,
        db: sqlite3.Connection,
        lock: threading.RLock,
        cutoff: float,
        *,
        tight: bool = False,
        budget_s: float = SLICE_BUDGET_S,
    ) -> None:
        self._db = db
        self._lock = lock
        self.cutoff = cutoff
        self.tight = tight
        self._budget = budget_s
        self._max_rows = TIGHT_BATCH_ROWS if tight else BATCH_ROWS
        self._rows = min(FIRST_SLICE_ROWS, self._max_rows)
        self._pages = FIRST_SLICE_PAGES
        self.phase = Phase.EVENTS
        self.events_deleted = 0
        self.inputs_deleted = 0
        self.pages_freed = 0
        self.slices = 0
        self.longest_slice_s = 0.0
        self._cursor = 0
        self._limit_seq: int | None = None
        self._shoes: dict[str, bool] = {}
        """Shoe id -> whether it must stay whole (looked up once per run)."""
        self._input_below: int | None = None
        self._input_cursor = 0
        self._wal = _wal_path(db)
        self._dirty = False
        self._full_failures = 0

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def result(self) -> CompactionResult:
        return CompactionResult(self.events_deleted, self.inputs_deleted, self.pages_freed)

    def step(self) -> None:
        """Do one slice of the run (nothing once :attr:`done`)."""
        if self.phase is Phase.DONE:
            return
        started = time.perf_counter()
        if self.tight:
            self._fit_to_free_space()
        phase = self.phase
        try:
            with self._lock:
                if phase is Phase.EVENTS:
                    worked = self._events_slice()
                elif phase is Phase.INPUTS:
                    worked = self._inputs_slice()
                else:
                    worked = self._vacuum_slice()
                if self._dirty and (self.tight or self.done or self._wal_bytes() > WAL_TRUNCATE_BYTES):
                    truncate_wal(self._db, self._lock)  # counted in the slice: the lock is held
                    self._dirty = False
        except sqlite3.OperationalError as exc:
            if not self.tight or "full" not in str(exc):
                raise
            # The disk filled under the slice (it was rolled back): empty the WAL and go on
            # with a smaller one; a run that cannot move even one page gives up until next time.
            self._full_failures += 1
            self._rows = max(1, self._rows // 4)
            self._pages = max(1, self._pages // 4)
            truncate_wal(self._db, self._lock)
            if self._full_failures > MAX_FULL_FAILURES:
                self.phase = Phase.DONE
            return
        took = time.perf_counter() - started
        self.slices += 1
        self.longest_slice_s = max(self.longest_slice_s, took)
        self._adapt(took, worked, vacuum=phase is Phase.VACUUM)

    def _fit_to_free_space(self) -> None:
        """In a tight run, no slice may need more WAL than the file system has free: about a
        page for each row it deletes or page it moves, twice over, with a margin."""
        if self._wal is None:
            return
        try:
            free = free_bytes(self._wal.parent)
        except OSError:
            return
        page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        fits = max(1, (free - TIGHT_MARGIN_BYTES) // (2 * page_size))
        self._rows = min(self._rows, fits)
        self._pages = min(self._pages, fits)

    def _adapt(self, took: float, worked: bool, *, vacuum: bool) -> None:
        """Halve the slice when it took longer than the budget, double it when it took less than
        half (within the run's maximum); rows and pages each by their own slices."""
        if not worked:
            return
        if vacuum:
            if took > self._budget:
                self._pages = max(1, self._pages // 2)
            elif took < self._budget / 2:
                self._pages = min(VACUUM_PAGES, self._pages * 2)
        elif took > self._budget:
            self._rows = max(10, self._rows // 2)
        elif took < self._budget / 2:
            self._rows = min(self._max_rows, self._rows * 2)

    def _wal_bytes(self) -> int:
        if self._wal is None:
            return 0
        try:
            return os.stat(self._wal).st_size
        except FileNotFoundError:
            return 0

    # -- events ---------------------------------------------------------------------------

    def _plan(self) -> int:
        """The ``seq`` compaction stays below: the first undelivered event (or the next seq),
        and the server's acknowledgement when it is required. Three index look-ups."""
        first_pending = self._db.execute(
            "SELECT seq FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL ORDER BY seq LIMIT 1"
        ).fetchone()
        if first_pending is None:
            last = self._db.execute("SELECT value FROM meta WHERE key = 'next_seq'").fetchone()
            limit_seq = int(last[0])
        else:
            limit_seq = int(first_pending[0])
        server_limit = server_ack.compaction_limit(self._db)
        if server_limit is not None:
            limit_seq = min(limit_seq, server_limit)
        current = self._current_shoe()
        if current is not None:
            self._shoes[current] = True
        return limit_seq

    def _current_shoe(self) -> str | None:
        """The shoe of the newest engine event that names one: a walk back along the primary
        key from the newest event, a page at a time (past the few delivery events at the end)."""
        below = 1 << 62
        while True:
            rows = self._db.execute(
                "SELECT seq, shoe_id, origin FROM events WHERE seq < ? ORDER BY seq DESC LIMIT 100", (below,)
            ).fetchall()
            for seq, shoe_id, origin in rows:
                if origin == ORIGIN_ENGINE and shoe_id is not None:
                    return str(shoe_id)
                below = int(seq)
            if len(rows) < 100:
                return None

    def _kept(self, shoe_id: str, limit_seq: int) -> bool:
        """Whether ``shoe_id`` must stay whole: the current shoe, or one with an event at or
        after ``limit_seq`` (waiting, or newer than something waiting). One index look-up."""
        known = self._shoes.get(shoe_id)
        if known is None:
            later = self._db.execute(
                "SELECT 1 FROM events WHERE shoe_id = ? AND seq >= ? LIMIT 1", (shoe_id, limit_seq)
            ).fetchone()
            known = self._shoes[shoe_id] = later is not None
        return known

    def _events_slice(self) -> bool:
        if self._limit_seq is None:
            oldest = self._db.execute(
                "SELECT journaled_at FROM events ORDER BY journaled_at LIMIT 1"
            ).fetchone()
            if oldest is None or oldest[0] >= self.cutoff:  # nothing old enough: one index look-up
                self.phase = Phase.INPUTS
                return False
            self._limit_seq = self._plan()
        limit_seq = self._limit_seq
        rows = self._db.execute(
            "SELECT seq, shoe_id, journaled_at, delivered_at IS NOT NULL OR dead_letter IS NOT NULL "
            "FROM events WHERE seq > ? AND seq < ? ORDER BY seq LIMIT ?",
            (self._cursor, limit_seq, self._rows),
        ).fetchall()
        doomed: list[int] = []
        finished = len(rows) < self._rows
        for seq, shoe_id, journaled_at, settled in rows:
            if journaled_at >= self.cutoff:
                finished = True
                break
            self._cursor = int(seq)
            if not settled or (shoe_id is not None and self._kept(str(shoe_id), limit_seq)):
                continue
            doomed.append(int(seq))
        if doomed:
            self._db.execute("PRAGMA synchronous=NORMAL")  # a lost deletion is redone next run
            try:
                with Transaction(self._db, self._lock):
                    _log_deleted(self._db, doomed)
                    self._db.execute(
                        "DELETE FROM events WHERE seq IN (SELECT value FROM json_each(?))",
                        (json.dumps(doomed),),
                    )
            finally:
                self._db.execute("PRAGMA synchronous=FULL")
            self.events_deleted += len(doomed)
            self._dirty = True
        if finished:
            self.phase = Phase.INPUTS
        return bool(rows)

    # -- inputs ---------------------------------------------------------------------------

    def _inputs_slice(self) -> bool:
        if self._input_below is None:
            oldest = self._db.execute(
                "SELECT journaled_at FROM inputs WHERE id = (SELECT min(id) FROM inputs)"
            ).fetchone()
            if oldest is None or oldest[0] >= self.cutoff:  # nothing old enough: one look-up
                self.phase = Phase.VACUUM
                return False
            needed = self._first_needed_input()
            self._input_below = (1 << 62) if needed is None else needed
        rows = self._db.execute(
            "SELECT id, journaled_at FROM inputs WHERE id > ? AND id < ? ORDER BY id LIMIT ?",
            (self._input_cursor, self._input_below, self._rows),
        ).fetchall()
        first = last = None
        finished = len(rows) < self._rows
        for row_id, journaled_at in rows:
            if journaled_at >= self.cutoff:
                finished = True
                break
            first = int(row_id) if first is None else first
            last = self._input_cursor = int(row_id)
        if first is not None and last is not None:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with Transaction(self._db, self._lock):
                    count = self._db.execute(
                        "DELETE FROM inputs WHERE id >= ? AND id <= ?", (first, last)
                    ).rowcount
            finally:
                self._db.execute("PRAGMA synchronous=FULL")
            self.inputs_deleted += count
            self._dirty = True
        if finished:
            self.phase = Phase.VACUUM
        return bool(rows)

    def _first_needed_input(self) -> int | None:
        """Input ids grow with seq, so the first event that names an input names the oldest
        input still needed: a walk of the primary key, a page at a time, to that event."""
        after = 0
        while True:
            rows = self._db.execute(
                "SELECT seq, input_id FROM events WHERE seq > ? ORDER BY seq LIMIT 100", (after,)
            ).fetchall()
            for seq, input_id in rows:
                if input_id is not None:
                    return int(input_id)
                after = int(seq)
            if len(rows) < 100:
                return None

    # -- free pages -----------------------------------------------------------------------

    def _vacuum_slice(self) -> bool:
        self._db.execute("PRAGMA synchronous=NORMAL")  # pages moved again by the next run if lost
        try:
            freed = release_some_pages(self._db, self._pages)
        finally:
            self._db.execute("PRAGMA synchronous=FULL")
        self.pages_freed += max(0, freed)
        if freed > 0:
            self._dirty = True
        if freed <= 0 or int(self._db.execute("PRAGMA freelist_count").fetchone()[0]) == 0:
            self.phase = Phase.DONE
        return freed > 0


def _wal_path(db: sqlite3.Connection) -> Path | None:
    row = db.execute("PRAGMA database_list").fetchone()
    if row is None or not row[2]:
        return None
    return Path(f"{row[2]}-wal")


def truncate_wal(db: sqlite3.Connection, lock: threading.RLock) -> None:
    """Checkpoint the WAL into the file and truncate it, if no reader holds it now.

    A TRUNCATE checkpoint waits for readers (``journal verify``, ``export``, ``check-config``)
    up to the busy timeout, under the journal lock: it runs with no wait instead, and when a
    reader is there it stays undone until the next slice or run (SQLite's automatic
    checkpoints go on meanwhile)."""
    with lock:
        (timeout,) = db.execute("PRAGMA busy_timeout").fetchone()
        db.execute("PRAGMA busy_timeout=0")
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            db.execute(f"PRAGMA busy_timeout={int(timeout)}")


def _log_deleted(db: sqlite3.Connection, seqs: list[int]) -> None:
    """Add the deleted ``seqs`` to ``compacted_seqs``, merging each run with the ranges it touches."""
    ordered = sorted(seqs)
    runs: list[tuple[int, int]] = []
    for seq in ordered:
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    for first, last in runs:
        before = db.execute(
            "SELECT first_seq FROM compacted_seqs WHERE last_seq = ?", (first - 1,)
        ).fetchone()
        after = db.execute("SELECT last_seq FROM compacted_seqs WHERE first_seq = ?", (last + 1,)).fetchone()
        if after is not None:
            db.execute("DELETE FROM compacted_seqs WHERE first_seq = ?", (last + 1,))
            last = int(after[0])
        if before is not None:
            db.execute("UPDATE compacted_seqs SET last_seq = ? WHERE first_seq = ?", (last, int(before[0])))
        else:
            db.execute("INSERT INTO compacted_seqs(first_seq, last_seq) VALUES (?, ?)", (first, last))


def release_some_pages(db: sqlite3.Connection, pages: int) -> int:
    """Return up to ``pages`` of the file's free pages to the file system
    (``auto_vacuum=INCREMENTAL``); how many went (0 in a file made without incremental vacuum).

    ``PRAGMA incremental_vacuum`` frees one page per step of its statement, and Python's
    ``execute`` steps a statement that returns no rows only once: it must run through
    ``executescript``, which steps it to the end."""
    before = int(db.execute("PRAGMA freelist_count").fetchone()[0])
    if before == 0:
        return 0
    db.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
    after = int(db.execute("PRAGMA freelist_count").fetchone()[0])
    return before - after


def release_free_pages(db: sqlite3.Connection, lock: threading.RLock) -> int:
    """Return every free page of the file to the file system, :data:`VACUUM_PAGES` per hold
    of ``lock``; how many went."""
    freed = 0
    while True:
        with lock:
            step = release_some_pages(db, VACUUM_PAGES)
        if step <= 0:
            return freed
        freed += step
