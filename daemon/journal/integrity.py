"""Is this journal file whole? Cheap checks on every open, a thorough :func:`verify_journal`.

On open (no scan, bounded work): the file is an SQLite database (a 0-byte or foreign file is
refused, never replaced by a new journal), its meta keys are present and sane, no event lies
at or beyond the ``next_seq`` counter, and no row is missing among the last
:data:`TAIL_WINDOW` seqs at or after the first undelivered event.

:func:`verify_journal` (``baccarat-edge journal verify``, ``check-config``): ``PRAGMA
integrity_check``, the meta, every ``seq`` from 1 to the last one issued (a missing one must
have been removed by compaction: logged in ``compacted_seqs``, or, below the seq from which
the log is kept, before every undelivered event), every event body is JSON, and every input an
event names exists.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from daemon.journal.chain import verify_chain
from daemon.journal.errors import JournalError

SQLITE_HEADER = b"SQLite format 3\x00"
REQUIRED_META = ("schema_version", "table_id", "journal_id", "next_seq", "created_at")
TAIL_WINDOW = 1000
"""How many of the newest seqs the open-time check looks at (an index range, no scan)."""
LISTED = 10
"""At most this many holes / missing inputs are named one by one."""


def way_out(path: Path, delivered_through: int | None) -> str:
    """What the technician does with a damaged journal: never repaired or replaced in place."""
    moved = f"{path}.damaged"
    step = (
        f"stop the daemon, move it aside with its -wal and -shm files (mv {path} {moved}; the same "
        "for -wal and -shm) and start the daemon, which begins a new journal"
    )
    if delivered_through is None:
        return (
            f"{step}; the events it still holds are in the moved file: export them with "
            f"`baccarat-edge journal export {moved}`"
        )
    return (
        f"{step}; the table's events up to seq {delivered_through} were delivered, the unsent ones "
        f"are in the moved file: export them with `baccarat-edge journal export {moved} "
        f"--from-seq {delivered_through + 1}`"
    )


def damaged(path: Path, what: str, delivered_through: int | None = None) -> JournalError:
    """The error for a damaged journal: the file, what is wrong, and the way out."""
    return JournalError(
        f"journal {path} is damaged: {what}. It is not replaced: {way_out(path, delivered_through)}"
    )


def check_file(path: Path) -> bool:
    """Refuse a file that cannot be a journal; True when there is no file yet (a new journal).

    A 0-byte file, a file that is not SQLite, or a WAL without its database is damage to
    report, never a reason to start again at seq 1."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise damaged(path, f"the database file is missing but its WAL {wal} is there") from None
        return True
    except OSError as exc:
        raise JournalError(f"journal {path} cannot be read: {exc}") from None
    if not head:
        raise damaged(path, "the file is empty (0 bytes): truncated, or lost in a file-system repair")
    if head != SQLITE_HEADER:
        raise damaged(path, "the file is not an SQLite database (its header is wrong)")
    return False


def meta_problem(meta: dict[str, str]) -> str | None:
    """What is wrong with a journal's meta (a missing key, a counter that is not a number), or None."""
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        return f"meta keys missing: {', '.join(missing)}"
    # epoch and compaction_log_from_seq are added on open to journals made without them
    for key, lowest in (("schema_version", 1), ("next_seq", 1), ("epoch", 0), ("compaction_log_from_seq", 1)):
        if key not in meta:
            continue
        try:
            value = int(meta[key])
        except ValueError:
            return f"meta {key} is {meta[key]!r}, not a number"
        if value < lowest:
            return f"meta {key} is {value}, below {lowest}"
    return None


def check_tail(db: sqlite3.Connection, path: Path, next_seq: int) -> None:
    """No event at or past ``next_seq``; no row missing at or after the first undelivered event
    among the newest :data:`TAIL_WINDOW` seqs. Index look-ups only."""
    top = db.execute("SELECT max(seq) FROM events").fetchone()[0]
    first_pending = db.execute(
        "SELECT seq FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL ORDER BY seq LIMIT 1"
    ).fetchone()
    delivered_through = next_seq - 1 if first_pending is None else int(first_pending[0]) - 1
    if top is not None and int(top) >= next_seq:
        raise damaged(
            path, f"event seq {top} is at or past the seq counter ({next_seq}): meta was rolled back", None
        )
    if first_pending is None:
        return
    low = max(int(first_pending[0]), next_seq - TAIL_WINDOW)
    present = db.execute("SELECT count(*) FROM events WHERE seq >= ?", (low,)).fetchone()[0]
    if present != next_seq - low:
        raise damaged(
            path,
            f"{next_seq - low - present} undelivered event row(s) missing between seq {low} and "
            f"{next_seq - 1}",
            delivered_through,
        )


@dataclass
class JournalReport:
    """What :func:`verify_journal` found."""

    path: Path
    readable: bool = True
    problems: list[str] = field(default_factory=list)
    table_id: str | None = None
    journal_id: str | None = None
    epoch: int | None = None
    last_seq: int | None = None
    events: int = 0
    undelivered: int = 0
    delivered_through: int | None = None
    """Every event up to this seq was delivered (or dead-lettered), as far as could be read."""
    chain_checked: int = 0
    """Chained events whose hash and link were recomputed (:mod:`daemon.journal.chain`)."""
    chain_break_seq: int | None = None
    """The first row whose chain does not hold (None: it holds)."""

    @property
    def ok(self) -> bool:
        return self.readable and not self.problems


def verify_journal(path: Path) -> JournalReport:
    """Check the whole file, read-only (the daemon may be running). Never raises on damage."""
    report = JournalReport(path=path)
    try:
        if check_file(path):
            report.readable = False
            report.problems.append(f"{path}: no such file")
            return report
    except JournalError as exc:
        report.readable = False
        report.problems.append(str(exc))
        return report
    try:
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0, isolation_level=None
        )
    except sqlite3.Error as exc:
        report.readable = False
        report.problems.append(f"{path}: cannot open: {exc}")
        return report
    try:
        # One read transaction: every query sees the same moment of the file, so rows a
        # running daemon commits (or compacts) meanwhile never look like damage.
        db.execute("BEGIN")
        _verify(db, report)
    except sqlite3.Error as exc:
        report.problems.append(f"reading the file failed: {exc}")
    finally:
        db.close()  # ends the read transaction (nothing was written)
    return report


def _verify(db: sqlite3.Connection, report: JournalReport) -> None:
    try:
        rows = db.execute(f"PRAGMA integrity_check({LISTED})").fetchall()
    except sqlite3.DatabaseError as exc:
        rows = [(str(exc),)]
    checked = [line for row in rows for line in str(row[0]).splitlines() if line.strip()]
    if checked != ["ok"]:
        report.problems.extend(f"integrity_check: {line}" for line in checked[:LISTED])
    tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t for t in ("meta", "events", "inputs") if t not in tables]
    if missing:
        report.problems.append(f"tables missing: {', '.join(missing)}")
        return
    meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta").fetchall()}
    problem = meta_problem(meta)
    if problem is not None:
        report.problems.append(problem)
        return
    report.table_id = meta["table_id"]
    report.journal_id = meta["journal_id"]
    report.epoch = int(meta.get("epoch", "0"))
    next_seq = int(meta["next_seq"])
    report.last_seq = next_seq - 1
    log_from = int(meta["compaction_log_from_seq"]) if "compaction_log_from_seq" in meta else None
    logged = _logged_ranges(db, tables)
    holes, lowest_pending = _scan_events(db, report, next_seq)
    report.delivered_through = next_seq - 1 if lowest_pending is None else lowest_pending - 1
    unexplained = [
        part
        for hole in holes
        for part in _uncovered(hole, logged)
        if not _legacy_compaction(part, log_from, lowest_pending)
    ]
    for first, last in unexplained[:LISTED]:
        what = f"seq {first}" if first == last else f"seq {first}-{last}"
        report.problems.append(f"{what} missing: not removed by compaction (a deleted or lost row)")
    if len(unexplained) > LISTED:
        report.problems.append(f"... and {len(unexplained) - LISTED} more missing seq range(s)")
    _check_inputs(db, report)
    _check_chain(db, report, meta["table_id"])


def _check_chain(db: sqlite3.Connection, report: JournalReport, table_id: str) -> None:
    """Recompute the event chain: one altered byte of any chained row breaks it there."""
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(events)")}
    if "hash" not in columns:
        return  # a journal from before the chain
    report.chain_checked, broken = verify_chain(db, table_id)
    if broken is not None:
        report.chain_break_seq = broken.seq
        report.problems.append(f"event chain broken at {broken}")


def _scan_events(
    db: sqlite3.Connection, report: JournalReport, next_seq: int
) -> tuple[list[tuple[int, int]], int | None]:
    """Walk every event in seq order: the holes (first, last) and the lowest undelivered seq."""
    holes: list[tuple[int, int]] = []
    lowest_pending: int | None = None
    expected = 1
    bad_bodies = 0
    for seq, pending, body in db.execute(
        "SELECT seq, delivered_at IS NULL AND dead_letter IS NULL, body FROM events ORDER BY seq"
    ):
        report.events += 1
        if seq > expected:
            holes.append((expected, seq - 1))
        expected = seq + 1
        if pending:
            report.undelivered += 1
            if lowest_pending is None:
                lowest_pending = int(seq)
        try:
            json.loads(body)
        except (TypeError, ValueError):
            bad_bodies += 1
            if bad_bodies <= LISTED:
                report.problems.append(f"seq {seq}: the stored event body is not JSON")
    if expected > next_seq:
        report.problems.append(f"event seq {expected - 1} is at or past the seq counter ({next_seq})")
    elif expected < next_seq:
        holes.append((expected, next_seq - 1))
    return holes, lowest_pending


def _logged_ranges(db: sqlite3.Connection, tables: set[str]) -> list[tuple[int, int]]:
    if "compacted_seqs" not in tables:
        return []
    rows = db.execute("SELECT first_seq, last_seq FROM compacted_seqs ORDER BY first_seq")
    return [(int(a), int(b)) for a, b in rows]


def _uncovered(hole: tuple[int, int], logged: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The parts of ``hole`` that no logged compaction range covers."""
    first, last = hole
    for lo, hi in logged:
        if hi < first:
            continue
        if lo > last:
            break
        if lo > first:
            yield first, lo - 1
        first = hi + 1
        if first > last:
            return
    if first <= last:
        yield first, last


def _legacy_compaction(part: tuple[int, int], log_from: int | None, lowest_pending: int | None) -> bool:
    """A hole below the seq from which compactions are logged (a journal older than the log)
    may be an unlogged compaction, unless it lies after an undelivered event: compaction never
    deletes anything at or after the first undelivered one."""
    last = part[1]
    if log_from is not None and last >= log_from:
        return False
    return lowest_pending is None or last < lowest_pending


def _check_inputs(db: sqlite3.Connection, report: JournalReport) -> None:
    rows = db.execute(
        "SELECT e.seq, e.input_id FROM events e WHERE e.input_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM inputs i WHERE i.id = e.input_id) ORDER BY e.seq"
    ).fetchall()
    for seq, input_id in rows[:LISTED]:
        report.problems.append(f"seq {seq} names input {input_id}, which is missing")
    if len(rows) > LISTED:
        report.problems.append(f"... and {len(rows) - LISTED} more events whose input is missing")
