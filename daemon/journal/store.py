"""The journal: an SQLite file (WAL, ``synchronous=FULL``) holding every engine input and
every validated event, committed before anything is published.

* :meth:`Journal.append` writes the inputs and the events they produced in one transaction
  and assigns each event a gapless per-table ``seq`` and a stable ``event_id``.
* The publisher drains :meth:`Journal.pending` in ``seq`` order and calls
  :meth:`Journal.mark_delivered` on PUBACK (or :meth:`Journal.mark_dead_letter`).
* On restart the engine is rebuilt by folding :meth:`Journal.events`.
* :meth:`Journal.compact` removes delivered events of finished shoes after the audit
  retention; :meth:`Journal.capacity` and :meth:`Journal.admits_new_round` implement the
  full policy. Nothing validated is ever deleted before it was delivered.
* Opening checks the file (:mod:`daemon.journal.integrity`: a damaged one is refused, never
  replaced) and its continuity (:mod:`daemon.journal.continuity`: every open of an existing
  journal starts a new epoch, so no ``event_id`` is ever issued twice); :attr:`Journal.continuity`
  says what was found. Every event is chained to the one before it (:mod:`daemon.journal.chain`);
  the server's acknowledgement is judged against that chain (:meth:`Journal.check_acknowledged`,
  :mod:`daemon.journal.rollbacks`).

One connection is shared by the engine, publisher and network threads behind a lock; every
call is short.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from common.inputs import EngineInput
from daemon.journal import appending, chain, delivery_alerts, reading, rollbacks, server_ack
from daemon.journal.ack_judge import Acknowledged, Standing, judge_acknowledgement
from daemon.journal.appending import RowsToWrite
from daemon.journal.codec import dumps_input
from daemon.journal.compaction import CompactionRun
from daemon.journal.continuity import (
    MARKER_INTERVAL_S,
    Continuity,
    ContinuityKind,
    JournalPosition,
    MarkerKeeper,
    MarkerUnreadable,
    judge,
    marker_path_for,
    read_marker,
    start_epoch,
)
from daemon.journal.errors import JournalError
from daemon.journal.integrity import check_file
from daemon.journal.nonces import NonceVerdict, remember_nonce
from daemon.journal.opening import open_error, set_up
from daemon.journal.records import (
    ORIGIN_DELIVERY,
    ORIGIN_ENGINE,
    Capacity,
    DeliveryEvent,
    JournalableEvent,
    JournaledEvent,
)
from daemon.journal.rollbacks import AckStatus, Rollback
from daemon.journal.server_ack import ServerAck
from daemon.journal.settings import FullPolicy, JournalSettings
from daemon.journal.snapshots import SnapshotStore
from daemon.journal.transaction import Transaction


class Journal:
    """The durable journal of one table."""

    def __init__(
        self,
        settings: JournalSettings,
        table_id: str,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.table_id = table_id
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.RLock()
        # Kept in memory so the per-card "may a new round open?" check costs no SQL: the
        # undelivered count follows every append/mark (rebuilt once on open); so does the
        # journaled_at of the first undelivered event (set by an append when nothing was
        # pending, re-read by a mark that took events off); the file size is stat()ed at most
        # every ``size_check_interval_s``.
        self._undelivered = 0
        self._oldest_undelivered_at: float | None = None
        self._size_bytes = 0
        self._size_checked_at: float | None = None
        self._last_seq = 0
        settings.path.parent.mkdir(parents=True, exist_ok=True)
        created = check_file(settings.path)
        self._db = sqlite3.connect(settings.path, isolation_level=None, check_same_thread=False, timeout=5.0)
        self.snapshots = SnapshotStore(self._db, self._lock)
        """The engine-state snapshots kept in this file (:mod:`daemon.journal.snapshots`)."""
        try:
            fresh = self._init_db()
            self.continuity: Continuity = self._check_continuity(created or fresh)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise open_error(settings.path, exc) from None
        except BaseException:
            self._db.close()
            raise

    # -- set-up ---------------------------------------------------------------------------

    def _init_db(self) -> bool:
        """Set the file up (or check it) and load what the journal keeps in memory; True when
        the file held no table yet (a new journal)."""
        opened = set_up(self._db, self.settings, self.table_id, self._lock, self._clock)
        chain.add_chain_columns(self._db)
        self._db.executescript(rollbacks.ROLLBACK_SCHEMA)
        self._chain_tip = chain.read_tip(self._db, self.table_id)
        meta = opened.meta
        self.journal_id: str = meta["journal_id"]
        """The current epoch's id: it enters every new ``event_id``."""
        self.epoch = int(meta["epoch"])
        self._lineage_id = meta["lineage_id"]
        self._last_seq = int(meta["next_seq"]) - 1
        self._undelivered = int(
            self._db.execute(
                "SELECT count(*) FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL"
            ).fetchone()[0]
        )
        self._oldest_undelivered_at = self._read_oldest_undelivered_at()
        return opened.fresh

    def _check_continuity(self, created: bool) -> Continuity:
        """Compare the journal with its marker, start a new epoch (every open of an existing
        journal), record a rollback found, and write the marker (required: without it the next
        check proves nothing)."""
        path = marker_path_for(self.settings.path)
        self.marker = MarkerKeeper(path, self.table_id, self._lineage_id, self._monotonic, MARKER_INTERVAL_S)
        problem: str | None = None
        try:
            marker = read_marker(self.marker.path)
        except MarkerUnreadable as exc:
            marker, problem = None, f"the marker is unreadable ({exc})"
        position = JournalPosition(self._lineage_id, self.journal_id, self.epoch, self._last_seq, created)
        verdict = judge(position, marker, problem)
        old_epoch, old_id = self.epoch, self.journal_id
        lost: Rollback | None = None
        if marker is not None and verdict.kind in (ContinuityKind.ROLLBACK, ContinuityKind.REPLACED):
            if created and verdict.kind is ContinuityKind.REPLACED:
                self._continue_after(marker.seq)  # a new file: seq goes on, never back
            lost = Rollback(
                kind=verdict.kind.value,
                detected_by="open",
                restore_seq=self._last_seq,
                lost_through_seq=marker.seq,
                lost_epoch=marker.journal_id,
            )
            rollbacks.record(self._db, self._lock, lost, at=self._clock())
        if verdict.new_epoch:
            after = 0 if marker is None else marker.epoch
            self.journal_id, self.epoch = start_epoch(self._db, self._lock, self._clock(), after)
        elif created:
            with self._transaction():  # the file's first epoch: where its history starts
                rollbacks.record_epoch(
                    self._db,
                    self.journal_id,
                    number=self.epoch,
                    first_seq=self._last_seq + 1,
                    at=self._clock(),
                )
        self._write_marker_or_fail()
        return Continuity(
            kind=verdict.kind,
            journal_seq=self._last_seq,
            marker_seq=None if marker is None else marker.seq,
            old_epoch=old_epoch,
            new_epoch=self.epoch,
            old_journal_id=old_id,
            new_journal_id=self.journal_id,
            detail=verdict.detail,
            restore_seq=None if lost is None else lost.restore_seq,
            lost_through_seq=None if lost is None else lost.lost_through_seq,
            lost_epoch=None if lost is None else lost.lost_epoch,
        )

    def _continue_after(self, seq: int) -> None:
        """A new file replacing another journal goes on from ``seq`` + 1: the server never sees
        a ``seq`` go back (the old file's events above it are lost; the alert says so)."""
        with self._transaction():
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'next_seq'", (str(seq + 1),))
            self._db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('compaction_log_from_seq', ?)",
                (str(seq + 1),),
            )
        self._last_seq = seq

    def _write_marker_or_fail(self) -> None:
        try:
            self.marker.write(self.journal_id, self.epoch, self._last_seq)
        except OSError as exc:
            raise JournalError(
                f"journal {self.settings.path}: cannot write its marker {self.marker.path} ({exc}): "
                "without it a rollback of the journal could not be detected"
            ) from None

    def check_acknowledged(
        self, seq: int, event_id: str, ack_hash: str | None = None, ack_epoch: str | None = None
    ) -> tuple[AckStatus, Continuity | None]:
        """Judge the server's acknowledgement of ``seq`` as ``(event_id, ack_hash)`` against the
        event chain (:func:`daemon.journal.ack_judge.judge_acknowledgement`).

        ``ON_CHAIN``: the journal holds that event (an open rollback is settled once the server
        acknowledges above its restore point). ``RECOGNISED``: the lost history of the open
        rollback, already signalled. ``ROLLBACK``: the journal lost events the server saw (a
        restore the marker could not see, e.g. a whole-disk revert): recorded (durably, so no
        restart alerts it again) and returned as a :class:`Continuity` (kept in
        :attr:`continuity`) for the one critical alert. The current epoch's ids are fresh
        (every open starts one), so nothing else changes."""
        with self._lock:
            standing = Standing(self._last_seq, self.marker.written_seq, self.epoch, self.journal_id)
            ack = Acknowledged(seq, event_id, ack_hash, ack_epoch)
            status, found = judge_acknowledgement(self._db, self._lock, ack, standing, now=self._clock())
            if found is not None:
                self.continuity = found
            return status, found

    def open_rollback(self) -> Rollback | None:
        """The rollback the server has not yet followed (None: none open)."""
        with self._lock:
            return rollbacks.open_rollback(self._db)

    # -- the game server's acknowledgement (daemon/journal/server_ack.py) --------------------

    def server_ack(self) -> ServerAck:
        """What the server acknowledged, and whether compaction must wait for it."""
        with self._lock:
            return server_ack.read(self._db)

    def require_server_ack(self, required: bool) -> None:
        """Whether events must wait for the server's acknowledgement (compaction keeps them)."""
        server_ack.set_required(self._db, self._lock, required)

    def record_server_ack(self, seq: int, event_id: str) -> None:
        """Store the server's newer acknowledgement of ``seq`` (checked by the caller)."""
        server_ack.write(self._db, self._lock, seq, event_id)

    def _transaction(self) -> Transaction:
        return Transaction(self._db, self._lock)

    def close(self) -> None:
        """Write the marker (best effort: a lagging marker is safe) and close the file."""
        with self._lock:
            with contextlib.suppress(OSError, sqlite3.Error):
                self.marker.write(self.journal_id, self.epoch, self._last_seq)
            self._db.close()

    # -- writing ----------------------------------------------------------------------------

    def append(
        self, inputs: Sequence[EngineInput], events: Sequence[JournalableEvent]
    ) -> list[JournaledEvent]:
        """Durably record ``inputs`` and the engine ``events`` they produced, in one transaction.

        Returns the events with their assigned ``seq``/``event_id``. When this returns, the
        rows are on disk (WAL fsynced): only then may they be published.
        """
        return self._append(inputs, events, ORIGIN_ENGINE)

    def append_delivery_event(self, event: DeliveryEvent) -> JournaledEvent:
        """Record an event raised by the delivery side (dead letter, journal full)."""
        return self._append((), (event,), ORIGIN_DELIVERY)[0]

    def _append(
        self, inputs: Sequence[EngineInput], events: Sequence[JournalableEvent], origin: str
    ) -> list[JournaledEvent]:
        now = self._clock()
        input_rows = [(type(i).__name__, float(i.at), dumps_input(i), now) for i in inputs]
        bodies = [e.to_dict() for e in events]
        body_texts = [json.dumps(b, separators=(",", ":"), sort_keys=True, allow_nan=False) for b in bodies]
        out: list[JournaledEvent] = []
        with self._lock:
            with self._transaction():
                tip = appending.write_rows(
                    self._db,
                    RowsToWrite(input_rows, events, bodies, body_texts, origin, now),
                    table_id=self.table_id,
                    journal_id=self.journal_id,
                    chain_tip=self._chain_tip,
                    out=out,
                )
            self._chain_tip = tip  # committed
            # Counted after COMMIT (still under the lock): a failed transaction never counts.
            self._undelivered += len(out)
            if out:
                if self._oldest_undelivered_at is None:
                    self._oldest_undelivered_at = now
                self._last_seq = out[-1].seq
                self.marker.committed(self.journal_id, self.epoch, self._last_seq)
        return out

    def mark_delivered(self, seqs: Iterable[int], at: float | None = None) -> None:
        """Record the broker's acknowledgement of these events.

        Losing this write in a crash only means the events are published again: consumers
        deduplicate by ``event_id``.
        """
        stamp = self._clock() if at is None else at
        rows = [(stamp, int(s)) for s in seqs]
        if not rows:
            return
        with self._lock:
            # No fsync for delivery marks (WAL + synchronous=NORMAL stays consistent, only the
            # newest marks may be lost on power loss): one fsync per PUBACK would cap delivery
            # near 1,000 events/s. Appends stay synchronous=FULL.
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._transaction():
                    marked = self._db.executemany(
                        "UPDATE events SET delivered_at = ? WHERE seq = ? "
                        "AND delivered_at IS NULL AND dead_letter IS NULL",
                        rows,
                    ).rowcount
                self._after_marks(marked)
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    def mark_dead_letter(self, seq: int, reason: str) -> None:
        """The broker refused this event: keep it for audit, stop retrying it."""
        with self._lock:
            with self._transaction():
                marked = self._db.execute(
                    "UPDATE events SET dead_letter = ? WHERE seq = ? "
                    "AND delivered_at IS NULL AND dead_letter IS NULL",
                    (reason, seq),
                ).rowcount
            self._after_marks(marked)

    def _after_marks(self, marked: int) -> None:
        """Follow a committed delivery/dead-letter mark of ``marked`` events (under the lock)."""
        if marked <= 0:
            return
        self._undelivered -= marked
        self._oldest_undelivered_at = self._read_oldest_undelivered_at() if self._undelivered > 0 else None

    def _read_oldest_undelivered_at(self) -> float | None:
        """``journaled_at`` of the first undelivered event: one row of the partial index."""
        row = self._db.execute(
            "SELECT journaled_at FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL "
            "ORDER BY seq LIMIT 1"
        ).fetchone()
        return None if row is None else float(row[0])

    # -- reading ----------------------------------------------------------------------------

    def _meta(self, key: str) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise JournalError(f"journal {self.settings.path}: meta key {key!r} missing")
        return str(row[0])

    def last_seq(self) -> int:
        """The highest ``seq`` ever assigned (0 when none)."""
        with self._lock:
            return int(self._meta("next_seq")) - 1

    def pending(self, after_seq: int = 0, limit: int = 100) -> list[JournaledEvent]:
        """Undelivered, not dead-lettered events with ``seq > after_seq``, in ``seq`` order."""
        with self._lock:
            return reading.pending(self._db, after_seq, limit)

    def delivered_between(self, first: int, last: int, limit: int) -> list[JournaledEvent]:
        """Events of ``first..last`` the broker acknowledged (not dead-lettered), in ``seq``
        order: what is published again for the game server (:mod:`daemon.mqtt.resend`)."""
        with self._lock:
            return reading.delivered_between(self._db, first, last, limit)

    def get(self, seq: int) -> JournaledEvent | None:
        with self._lock:
            return reading.event_at(self._db, seq)

    def events(self, after_seq: int = 0, origin: str | None = ORIGIN_ENGINE) -> Iterator[JournaledEvent]:
        """Every stored event with ``seq > after_seq`` in order (engine events only by default):
        fold these with ``Engine.restore`` (``Event.from_dict(e.body)``) after a restart."""
        cursor = after_seq
        while True:
            with self._lock:
                page = reading.events_page(self._db, cursor, origin)
            if not page:
                return
            cursor = page[-1].seq
            yield from page

    def inputs(self, after_id: int = 0) -> Iterator[tuple[int, EngineInput]]:
        """Every stored input with its row id, in the order it was journaled."""
        cursor = after_id
        while True:
            with self._lock:
                page = reading.inputs_page(self._db, cursor)
            if not page:
                return
            cursor = page[-1][0]
            yield from page

    def input_count(self) -> int:
        """Number of inputs ever journaled (including compacted ones)."""
        with self._lock:
            row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'inputs'").fetchone()
        return 0 if row is None else int(row[0])

    def open_delivery_alerts(self) -> dict[str, str]:
        """The delivery side's alerts raised and not cleared, ``{code: alert_id}``: one
        look-up of a small table kept as they are journaled (:mod:`daemon.journal.delivery_alerts`)."""
        with self._lock:
            return delivery_alerts.open_alerts(self._db)

    def dead_letters(self) -> list[JournaledEvent]:
        with self._lock:
            return reading.dead_letters(self._db)

    # -- limits -------------------------------------------------------------------------------

    def size_bytes(self) -> int:
        """The database file plus its WAL, stat()ed now."""
        total = 0
        for suffix in ("", "-wal"):
            path = Path(str(self.settings.path) + suffix)
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    def _recent_size_bytes(self) -> int:
        """:meth:`size_bytes`, re-measured at most every ``size_check_interval_s``."""
        now = self._monotonic()
        checked = self._size_checked_at
        if checked is None or now - checked >= self.settings.size_check_interval_s or now < checked:
            self._size_bytes = self.size_bytes()
            self._size_checked_at = now
        return self._size_bytes

    def undelivered_count(self) -> int:
        """Events journaled but neither acknowledged nor dead-lettered (kept in memory)."""
        return self._undelivered

    def capacity(self) -> Capacity:
        """How full the journal is, now: the in-memory undelivered count and oldest undelivered
        ``journaled_at`` (no SQL) and the recent file size."""
        with self._lock:
            undelivered = self._undelivered
            oldest = self._oldest_undelivered_at
        return Capacity(
            size_bytes=self._recent_size_bytes(),
            max_bytes=self.settings.max_bytes,
            undelivered=undelivered,
            max_undelivered=self.settings.max_undelivered_events,
            oldest_undelivered_at=oldest,
            max_undelivered_age_s=self.settings.max_undelivered_age_s,
            now=self._clock(),
            warn_fraction=self.settings.warn_fraction,
        )

    def admits_new_round(self) -> bool:
        """False when the journal is full and the policy is ``refuse_new_rounds``.

        Cheap enough to ask for every card: no SQL, one clock read, at most one stat() pair
        per ``size_check_interval_s``."""
        if self.settings.on_full is FullPolicy.ALERT_ONLY:
            return True
        if self._undelivered >= self.settings.max_undelivered_events:
            return False
        oldest = self._oldest_undelivered_at
        if oldest is not None and self._clock() - oldest >= self.settings.max_undelivered_age_s:
            return False
        return self._recent_size_bytes() < self.settings.max_bytes

    def compact(self, now: float | None = None) -> int:
        """Delete delivered (or dead-lettered) events of finished shoes journaled before the
        audit retention, and inputs older than every remaining event; give the freed pages
        back to the file system. Returns events deleted.

        The current shoe (that of the newest engine event) is never compacted, nor anything
        at or after the first undelivered event, nor any event of a shoe that has one waiting.
        Rules and cost: :mod:`daemon.journal.compaction`.
        """
        run = self.compaction_run(now)
        while not run.done:
            run.step()
        self.forget_size()
        return run.events_deleted

    def compaction_run(self, now: float | None = None, *, tight: bool = False) -> CompactionRun:
        """A compaction (the rules of :meth:`compact`) to be done a slice per
        :meth:`CompactionRun.step`, each a short transaction under the journal lock; ``tight``
        for a nearly full disk (small slices, the WAL truncated after each). Call
        :meth:`forget_size` when it is done."""
        stamp = self._clock() if now is None else now
        cutoff = stamp - self.settings.audit_retention_days * 86400.0
        return CompactionRun(self._db, self._lock, cutoff, tight=tight)

    def forget_size(self) -> None:
        """The file may have shrunk: measure it again at the next capacity check."""
        self._size_checked_at = None

    # -- command nonces ---------------------------------------------------------------------

    def remember_nonce(
        self, nonce: str, ts: float, now: float, horizon_s: float, max_entries: int
    ) -> NonceVerdict:
        """Record a command nonce durably; REUSED if it was seen before (see
        :func:`daemon.journal.nonces.remember_nonce`)."""
        with self._transaction():
            return remember_nonce(self._db, nonce, ts, now, horizon_s, max_entries)
