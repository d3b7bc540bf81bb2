"""Continuity of a journal across restores: the marker file beside it and the journal epoch.

A journal restored from a backup, reverted with its VM snapshot or missing its WAL restarts
below ``seq`` numbers it already issued. Were ids derived from ``seq`` alone, the events it
journals next would carry ``event_id``\\ s the server already holds, and a server that
deduplicates by ``event_id`` (as the contract says) would drop them silently.

So event ids are derived from the journal's *epoch id* (meta ``journal_id``), and **every open
of an existing journal starts a new epoch** (a fresh random ``journal_id``, ``epoch`` + 1): no
revert, whatever it restores, can bring back an epoch id that will issue ids again. Every
event carries its epoch (:mod:`daemon.journal.chain`).

The *marker*, ``<journal>.marker``, tells a rollback from a restart on open: a small JSON file
written atomically (temp file, fsync, rename, fsync of the directory) that holds the
journal's lineage, epoch id, epoch and the highest ``seq`` committed. It is written only after
the rows it names were committed (fsynced), so it may lag the journal but is never ahead of it:
a marker ahead of the journal, or naming an epoch the journal does not have, means the journal
lost events it had issued, from the journal's end on (the restore point).

What the marker cannot see: a revert of the whole disk (journal and marker together), or a
rollback within its lag. The game server's acknowledgement of ``(seq, event_id, hash)``
catches that against the event chain (:mod:`daemon.journal.rollbacks`,
:meth:`Journal.check_acknowledged`, called by :mod:`daemon.mqtt.acknowledgement`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from daemon.journal.rollbacks import record_epoch
from daemon.journal.transaction import Transaction

MARKER_FORMAT = "baccarat-edge-journal-marker"
MARKER_VERSION = 1
MARKER_INTERVAL_S = 5.0
"""The marker is rewritten after an append at most this often (and at open, close and every
new epoch): two fsyncs every few seconds, never one per card."""


class ContinuityKind(Enum):
    """What the journal found about its own continuity."""

    FIRST_OPEN = "first_open"
    """A new journal file, and no marker of an earlier one."""
    NONE = "none"
    """Continuity proven: the marker names this epoch and a ``seq`` the journal holds."""
    ROLLBACK = "rollback"
    """The journal lost events it had issued (the marker or the server's acknowledgement is
    ahead of it or off its chain, or it is back in an earlier epoch). Critical."""
    REPLACED = "replaced"
    """The marker belongs to another journal (a new file after a damaged one was moved aside,
    or another journal's copy restored). A new file goes on from the marker's ``seq`` + 1 with
    a new chain. Critical."""
    UNPROVEN = "unproven"
    """An existing journal without a readable marker (first open by a version that keeps
    none, or the marker was lost): nothing proves no events were lost. Warning."""


@dataclass(frozen=True, slots=True)
class Continuity:
    """The typed record of one continuity check, for the service's alert."""

    kind: ContinuityKind
    journal_seq: int
    """The highest ``seq`` the journal holds (0 when none)."""
    marker_seq: int | None
    """The highest ``seq`` the marker says was committed (None: no readable marker)."""
    old_epoch: int
    new_epoch: int
    old_journal_id: str
    new_journal_id: str
    detail: str
    acknowledged_seq: int | None = None
    """The server's acknowledged ``seq`` that showed the rollback (:meth:`Journal.check_acknowledged`)."""
    restore_seq: int | None = None
    """Rollback/replaced: the last ``seq`` the journal holds from before it (the restore
    point); every event issued above it before is lost here."""
    lost_through_seq: int | None = None
    """Rollback/replaced: the highest ``seq`` known to have been issued before (the marker's,
    or the acknowledged one); more may have been."""
    lost_epoch: str | None = None
    """Rollback/replaced: the epoch id of the lost history, when known."""
    detected_by: str = "open"
    """``open`` (the marker, on open) or ``server_ack``."""

    @property
    def first_lost_seq(self) -> int | None:
        """The first ``seq`` whose event is lost (the restore point + 1)."""
        return None if self.restore_seq is None else self.restore_seq + 1

    @property
    def critical(self) -> bool:
        """True when events may have been lost or their ``seq`` reissued."""
        return self.kind in (ContinuityKind.ROLLBACK, ContinuityKind.REPLACED)

    @property
    def epoch_changed(self) -> bool:
        """True when event ids from now on come from a new epoch."""
        return self.new_journal_id != self.old_journal_id


@dataclass(frozen=True, slots=True)
class Marker:
    """What the marker file holds."""

    table_id: str
    lineage_id: str
    """The id of the journal file's first epoch: the same across epochs of one file."""
    journal_id: str
    """The epoch id that enters ``event_id``."""
    epoch: int
    seq: int
    """The highest ``seq`` committed when the marker was written (lags, never leads)."""


@dataclass(frozen=True, slots=True)
class JournalPosition:
    """Where the journal file itself stands, read from its meta."""

    lineage_id: str
    journal_id: str
    epoch: int
    seq: int
    created: bool
    """True when this open created the file."""


def marker_path_for(journal_path: Path) -> Path:
    """``<journal>.marker``, beside the journal file."""
    return Path(f"{journal_path}.marker")


class MarkerUnreadable(ValueError):
    """The marker file exists but does not hold a marker."""


def read_marker(path: Path) -> Marker | None:
    """The marker at ``path``; None when there is none. Raises :class:`MarkerUnreadable`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise MarkerUnreadable(f"{path}: {exc}") from None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT:
            raise ValueError("not a journal marker")
        marker = Marker(
            table_id=str(data["table_id"]),
            lineage_id=str(data["lineage_id"]),
            journal_id=str(data["journal_id"]),
            epoch=int(data["epoch"]),
            seq=int(data["seq"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise MarkerUnreadable(f"{path}: {exc}") from None
    return marker


def write_marker(path: Path, marker: Marker) -> None:
    """Replace the marker atomically: temp file, fsync, rename, fsync of the directory."""
    text = json.dumps(
        {
            "format": MARKER_FORMAT,
            "version": MARKER_VERSION,
            "table_id": marker.table_id,
            "lineage_id": marker.lineage_id,
            "journal_id": marker.journal_id,
            "epoch": marker.epoch,
            "seq": marker.seq,
        },
        sort_keys=True,
    )
    tmp = path.with_name(f"{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    try:
        os.write(fd, text.encode("utf-8") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`judge` decided: the kind and whether a new epoch must start."""

    kind: ContinuityKind
    new_epoch: bool
    detail: str


def judge(position: JournalPosition, marker: Marker | None, marker_problem: str | None) -> Verdict:
    """Decide continuity from the journal's position and its marker (pure).

    Proven only when the marker names this file's lineage and current epoch id and a ``seq``
    the journal holds. A marker of an *older* epoch of this file is the one case that is not
    a rollback: the epoch is started (committed) before its marker is written, so a crash in
    between leaves exactly that, with no id of the new epoch issued yet. Every verdict on an
    existing file starts a new epoch (``new_epoch``): ids are never issued twice.
    """
    verdict = _judge(position, marker, marker_problem)
    if position.created:
        return verdict
    return Verdict(verdict.kind, True, verdict.detail)


def _judge(position: JournalPosition, marker: Marker | None, marker_problem: str | None) -> Verdict:
    if marker is None:
        if position.created and marker_problem is None:
            return Verdict(ContinuityKind.FIRST_OPEN, False, "new journal")
        why = marker_problem or "no marker file"
        if position.created:
            return Verdict(ContinuityKind.UNPROVEN, False, f"new journal; {why}")
        return Verdict(
            ContinuityKind.UNPROVEN, True, f"{why}: continuity cannot be proven, new epoch started"
        )
    if marker.lineage_id != position.lineage_id:
        return Verdict(
            ContinuityKind.REPLACED,
            not position.created,
            f"the marker belongs to journal {marker.lineage_id} (epoch {marker.epoch}, seq "
            f"{marker.seq}), not to this file ({position.lineage_id}, seq {position.seq}): the "
            "journal was replaced",
        )
    if marker.journal_id == position.journal_id and marker.epoch == position.epoch:
        if marker.seq <= position.seq:
            return Verdict(ContinuityKind.NONE, False, "continuity proven by the marker")
        return Verdict(
            ContinuityKind.ROLLBACK,
            True,
            f"the marker says seq {marker.seq} was committed but the journal ends at seq "
            f"{position.seq}: the journal was rolled back (backup restore, snapshot revert or lost "
            "WAL); events after it are lost here and a new epoch was started",
        )
    if marker.epoch < position.epoch and marker.seq <= position.seq:
        return Verdict(ContinuityKind.NONE, False, "the marker lags one epoch start (crash at open)")
    return Verdict(
        ContinuityKind.ROLLBACK,
        True,
        f"the marker names epoch {marker.epoch} ({marker.journal_id}) at seq {marker.seq}, the "
        f"journal is at epoch {position.epoch} ({position.journal_id}) seq {position.seq}: the "
        "journal was rolled back to an earlier state; a new epoch was started",
    )


def new_epoch_id() -> str:
    """A fresh random epoch id: ids derived from it were never issued by any epoch."""
    return str(uuid.uuid4())


class MarkerKeeper:
    """Keeps the marker of one open journal: rewritten at most every ``interval_s`` after an
    append (so never one fsync per card), at every new epoch and at close.

    A failed rewrite after an append is kept in :attr:`error` and retried after the next
    interval: the append it follows is committed and must not look failed (a retry would
    journal its events twice); a lagging marker only narrows what a rollback check can see.
    """

    def __init__(
        self, path: Path, table_id: str, lineage_id: str, monotonic: Callable[[], float], interval_s: float
    ) -> None:
        self.path = path
        self._table_id = table_id
        self._lineage_id = lineage_id
        self._monotonic = monotonic
        self._interval_s = interval_s
        self._written_at: float | None = None
        self.written_seq = 0
        """The ``seq`` the marker file holds now."""
        self.error: str | None = None
        """The last rewrite's failure, None once one succeeds."""

    def write(self, journal_id: str, epoch: int, seq: int) -> None:
        """Write now; raises ``OSError`` (used where a marker is required: open, new epoch)."""
        write_marker(self.path, Marker(self._table_id, self._lineage_id, journal_id, epoch, seq))
        self._written_at = self._monotonic()
        self.written_seq = seq
        self.error = None

    def committed(self, journal_id: str, epoch: int, seq: int) -> None:
        """``seq`` was just committed: rewrite the marker if the interval has passed."""
        now = self._monotonic()
        written = self._written_at
        if seq <= self.written_seq or (written is not None and 0 <= now - written < self._interval_s):
            return
        try:
            self.write(journal_id, epoch, seq)
        except OSError as exc:
            self._written_at = now
            self.error = f"cannot write the journal marker {self.path}: {exc}"


def start_epoch(db: sqlite3.Connection, lock: threading.RLock, at: float, after: int = 0) -> tuple[str, int]:
    """Commit a new epoch in the journal's meta: a fresh ``journal_id``, the epoch number above
    both the journal's and ``after`` (the marker's: a restored file's own number was used
    already), and ``epoch_first_seq``; remember it in ``epochs``. Returns the new id and epoch.

    The id alone keeps event ids unique; the number only tells people which epoch came later."""
    new_id = new_epoch_id()
    with Transaction(db, lock):
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('epoch', 'next_seq')").fetchall())
        epoch = max(int(meta["epoch"]), after) + 1
        db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [("journal_id", new_id), ("epoch", str(epoch)), ("epoch_first_seq", meta["next_seq"])],
        )
        record_epoch(db, new_id, number=epoch, first_seq=int(meta["next_seq"]), at=at)
    return new_id, epoch
