"""The engine back from the journal: the newest usable snapshot plus the events after it.

* Start-up (and the rebuild after an engine failure) uses the newest snapshot whose key (fold
  code, table settings) is the running one's and whose covered event is still in the journal
  with the same id and body, then folds only the engine events after it: the time to READY does
  not grow with the journal. A snapshot that is missing, stale (other settings or daemon
  version), corrupt or describes other events is never used: the whole journal is folded
  instead, with one ``engine_snapshot_unusable`` log line naming why, and a snapshot of the
  result is stored at once so the next start is quick again. A snapshot row whose own checksum
  does not match (damaged in storage, yet still valid JSON) is also an ``engine_snapshot_unusable``
  alert, journaled and published: the state it holds may look right and be wrong.
* :class:`SnapshotTaker` stores a snapshot after the append that ends a shoe, and after
  :data:`SNAPSHOT_EVERY_EVENTS` engine events without one (a shoe that never ends).
* :func:`verify_snapshots` (``baccarat-edge journal verify``) re-folds the events read-only and
  compares each snapshot with the fold.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from daemon.alerts import AlertCode
from daemon.engine.checkpoint import (
    CheckpointError,
    EngineCheckpoint,
    capture,
    fold_key,
    key_difference,
    state_differences,
)
from daemon.engine.events import Event, EventKind
from daemon.engine.settings import TableSettings
from daemon.engine.state import TableState
from daemon.engine.table import Engine
from daemon.journal.errors import JournalError
from daemon.journal.records import ORIGIN_ENGINE, JournaledEvent
from daemon.journal.snapshots import StoredSnapshot, covered_event_problem, list_snapshots, row_problem
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_raised
from daemon.rules.variants import Variant, load_variant_by_name

log = structlog.get_logger("baccarat_edge.runner")

PROGRESS_EVERY_EVENTS = 50_000
"""A full fold reports its progress this often (the runner extends systemd's start timeout:
after an upgrade or a settings change, a large journal is folded whole once)."""
SNAPSHOT_EVERY_EVENTS = 2000
"""A snapshot is also stored after this many engine events without one (a clean 8-deck shoe
is ~730 events, and ends with one): restart folds at most about this many events."""


@dataclass(frozen=True, slots=True)
class Restored:
    """The engine rebuilt from the journal, and how."""

    engine: Engine
    snapshot_seq: int | None
    """The last event the snapshot it started from covers (None: the whole journal was folded)."""
    events_folded: int
    last_seq: int
    """The last engine event folded or covered (0: none)."""
    last_at: float
    """That event's time."""
    unusable: list[str] = field(default_factory=list)
    """Why each snapshot found was not used."""


def restore_from_journal(
    journal: Journal,
    table: TableSettings,
    variant: Variant,
    progress: Callable[[int], None] | None = None,
    *,
    progress_every: int = PROGRESS_EVERY_EVENTS,
) -> Restored:
    """The engine as the journal's engine events leave it, from the newest usable snapshot.

    ``progress(events_read)`` is called every ``progress_every`` events read."""
    started = time.perf_counter()
    wanted = fold_key(table)
    unusable: list[str] = []
    for stored in journal.snapshots.newest_first():
        damage = row_problem(stored)
        if damage is not None and stored.row_sha256 is not None:
            _alert_damaged(journal, stored, damage)
        why = damage or _unusable(journal, stored, wanted)
        checkpoint: EngineCheckpoint | None = None
        if why is None:
            try:
                checkpoint = EngineCheckpoint.from_json(stored.body)
                restored = _fold(
                    journal,
                    table,
                    variant,
                    checkpoint,
                    after_seq=stored.seq,
                    progress=progress,
                    progress_every=progress_every,
                )
            except CheckpointError as exc:
                why = f"it cannot be read: {exc}"
            except Exception as exc:  # a snapshot that decodes but cannot be folded on: never fatal
                why = f"folding the events after it failed ({type(exc).__name__}: {exc})"
            else:
                if unusable:
                    log.warning(
                        "engine_snapshot_unusable",
                        reasons=unusable,
                        action=f"the snapshot at seq {stored.seq} was used instead",
                    )
                _log_restored(journal, restored, started)
                return restored
        unusable.append(f"snapshot at seq {stored.seq}: {why}")
    restored = _fold(
        journal, table, variant, None, after_seq=0, progress=progress, progress_every=progress_every
    )
    restored = Restored(
        restored.engine, None, restored.events_folded, restored.last_seq, restored.last_at, unusable
    )
    if unusable:
        log.warning(
            "engine_snapshot_unusable",
            reasons=unusable,
            action="the whole journal was folded instead; a new snapshot is stored now",
        )
    _log_restored(journal, restored, started)
    if restored.last_seq > 0:
        save_snapshot(journal, restored.engine, restored.last_seq, restored.last_at)
    return restored


def _alert_damaged(journal: Journal, stored: StoredSnapshot, why: str) -> None:
    """Journal the ``engine_snapshot_unusable`` alert for a snapshot row found damaged."""
    _alert_id, event = alert_raised(
        AlertCode.ENGINE_SNAPSHOT_UNUSABLE,
        f"the engine snapshot at seq {stored.seq} was not used: {why}; the state is folded from the events",
        {"snapshot_seq": stored.seq, "reason": why},
        time.time(),
    )
    try:
        journal.append_delivery_event(event)
    except (sqlite3.Error, JournalError) as exc:  # the fold goes on; the log line says it all
        log.error("engine_snapshot_alert_not_stored", seq=stored.seq, error=str(exc))


def _unusable(journal: Journal, stored: StoredSnapshot, wanted: str) -> str | None:
    if stored.key != wanted:
        return key_difference(stored.key, wanted)
    return journal.snapshots.problem(stored)


def _fold(
    journal: Journal,
    table: TableSettings,
    variant: Variant,
    checkpoint: EngineCheckpoint | None,
    *,
    after_seq: int,
    progress: Callable[[int], None] | None,
    progress_every: int,
) -> Restored:
    tail: list[Event] = []
    last_seq, last_at = after_seq, 0.0 if checkpoint is None else checkpoint.at
    for journaled in journal.events(after_seq=after_seq):
        tail.append(Event.from_dict(journaled.body))
        last_seq, last_at = journaled.seq, journaled.at
        if progress is not None and len(tail) % progress_every == 0:
            progress(len(tail))
    engine = Engine.restore(
        table, variant, tail, load_variant_by_name, start=checkpoint, table_id=journal.table_id
    )
    return Restored(engine, None if checkpoint is None else after_seq, len(tail), last_seq, last_at)


def _log_restored(journal: Journal, restored: Restored, started: float) -> None:
    log.info(
        "engine_restored",
        table_id=journal.table_id,
        events=restored.events_folded,
        from_snapshot_seq=restored.snapshot_seq,
        last_seq=journal.last_seq(),
        ms=round((time.perf_counter() - started) * 1000, 1),
    )


def save_snapshot(journal: Journal, engine: Engine, seq: int, at: float) -> bool:
    """Store a snapshot of ``engine``, whose state is the fold of the engine events up to
    ``seq`` (at time ``at``). A failure is logged, never raised: the events are stored, and
    the next start folds more of them."""
    try:
        checkpoint = capture(engine, at)
        journal.snapshots.save(seq, checkpoint.key, checkpoint.to_json(), time.time())
    except (CheckpointError, sqlite3.Error, JournalError, ValueError) as exc:
        log.warning("engine_snapshot_not_stored", seq=seq, error=str(exc))
        return False
    return True


class SnapshotTaker:
    """Stores a snapshot after the append that ends a shoe (or after
    :data:`SNAPSHOT_EVERY_EVENTS` engine events without one). Engine thread only."""

    def __init__(self, journal: Journal, every_events: int = SNAPSHOT_EVERY_EVENTS) -> None:
        self._journal = journal
        self._every = every_events
        self._since = 0
        self.taken = 0

    def after_append(self, engine: Engine, journaled: list[JournaledEvent]) -> None:
        """``journaled``: what the append of ``engine``'s last input stored (its state is
        the fold of everything up to the last engine event among them)."""
        last: JournaledEvent | None = None
        ends_shoe = False
        for event in journaled:
            if event.origin == ORIGIN_ENGINE:
                last = event
                self._since += 1
                ends_shoe = ends_shoe or event.kind == EventKind.SHOE_ENDED
        if last is None or not (ends_shoe or self._since >= self._every):
            return
        self._since = 0
        if save_snapshot(self._journal, engine, last.seq, last.at):
            self.taken += 1


# ------------------------------------------------------------------ verify on demand
@dataclass
class SnapshotReport:
    """What :func:`verify_snapshots` found."""

    checked: list[int] = field(default_factory=list)
    """The ``seq`` of every snapshot found equal to the fold of the events."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def verify_snapshots(path: Path) -> SnapshotReport:
    """Re-fold the journal's engine events (read-only) and compare every stored snapshot with
    the fold at its ``seq``. History compacted before the oldest snapshot cannot be re-folded:
    that snapshot is then the base the newer ones are checked against (said in ``notes``)."""
    report = SnapshotReport()
    try:
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0, isolation_level=None
        )
    except sqlite3.Error as exc:
        report.problems.append(f"snapshots: cannot open {path}: {exc}")
        return report
    try:
        db.execute("BEGIN")  # one moment of the file, as verify_journal reads it
        _verify(db, report)
    except sqlite3.Error as exc:
        report.problems.append(f"snapshots: reading the file failed: {exc}")
    finally:
        db.close()
    return report


def _verify(db: sqlite3.Connection, report: SnapshotReport) -> None:
    stored = sorted(list_snapshots(db), key=lambda s: s.seq)
    if not stored:
        report.notes.append("no engine snapshot stored: a start folds the whole journal")
        return
    parsed: list[tuple[StoredSnapshot, EngineCheckpoint]] = []
    for snap in stored:
        damage = row_problem(snap)
        if damage is not None and snap.row_sha256 is not None:
            report.problems.append(f"snapshot at seq {snap.seq}: {damage}")
            continue
        why = damage or covered_event_problem(db, snap)
        try:
            checkpoint = EngineCheckpoint.from_json(snap.body)
            settings = checkpoint.table_settings()
            checkpoint.table_state(settings)
        except CheckpointError as exc:
            report.problems.append(f"snapshot at seq {snap.seq} cannot be read: {exc}")
            continue
        if why is not None:
            report.notes.append(f"snapshot at seq {snap.seq} is not used at start: {why}")
            continue
        parsed.append((snap, checkpoint))
    if not parsed:
        return
    first, first_cp = parsed[0]
    settings = first_cp.table_settings()
    if _history_complete(db, first.seq):
        state = TableState(settings)
        after = 0
    else:
        report.notes.append(
            f"events before the snapshot at seq {first.seq} were compacted: it is the base the newer "
            "ones are checked against"
        )
        state, after = first_cp.table_state(settings), first.seq
        report.checked.append(first.seq)
        parsed = parsed[1:]
    for snap, checkpoint in parsed:
        try:
            state = _fold_state(db, state, after, snap.seq)
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            report.problems.append(
                f"re-folding the engine events up to seq {snap.seq} failed ({type(exc).__name__}: {exc})"
            )
            return
        after = snap.seq
        if checkpoint.table_settings() != settings:
            report.notes.append(
                f"snapshot at seq {snap.seq} was taken under other table settings: not compared"
            )
            state, settings = checkpoint.table_state(checkpoint.table_settings()), checkpoint.table_settings()
            continue
        differs = state_differences(checkpoint.table_state(settings), state)
        if differs:
            report.problems.append(
                f"snapshot at seq {snap.seq} differs from the fold of the events in {', '.join(differs)}: "
                "a start would use a wrong state; remove the snapshots (baccarat-edge journal "
                "drop-snapshots FILE, daemon stopped) and the next start folds the whole journal"
            )
        else:
            report.checked.append(snap.seq)


def _history_complete(db: sqlite3.Connection, seq: int) -> bool:
    """True when no event up to ``seq`` was compacted (so a fold from nothing is the truth)."""
    tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if (
        "compacted_seqs" in tables
        and db.execute("SELECT 1 FROM compacted_seqs WHERE first_seq <= ? LIMIT 1", (seq,)).fetchone()
    ):
        return False
    low = db.execute("SELECT min(seq) FROM events").fetchone()[0]
    return low is None or int(low) == 1


def _fold_state(db: sqlite3.Connection, state: TableState, after: int, until: int) -> TableState:
    cursor = after
    while True:
        rows = db.execute(
            "SELECT seq, body FROM events WHERE seq > ? AND seq <= ? AND origin = ? ORDER BY seq LIMIT 1000",
            (cursor, until, ORIGIN_ENGINE),
        ).fetchall()
        if not rows:
            return state
        for seq, body in rows:
            state.apply(Event.from_dict(_json(body)))
            cursor = int(seq)


def _json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("an event body is not an object")
    return value


def drop_snapshots(path: Path) -> int:
    """Delete every stored snapshot (the daemon stopped): the next start folds the whole
    journal and stores a new one. Returns how many were deleted."""
    db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    try:
        present = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'"
        ).fetchone()
        if present is None:
            return 0
        return int(db.execute("DELETE FROM snapshots").rowcount)
    finally:
        db.close()
