"""The game server's acknowledgement judged against the journal's event chain.

:func:`judge_acknowledgement` is what :meth:`daemon.journal.store.Journal.check_acknowledged`
does under the journal's lock: read the event the journal holds at the acknowledged ``seq``,
compare (:func:`daemon.journal.rollbacks.judge_ack`), settle or record the rollback, and for a
new rollback build the :class:`Continuity` its one alert is made of. Index look-ups only: it
runs on the drain thread.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

from daemon.journal import rollbacks, server_ack
from daemon.journal.continuity import Continuity, ContinuityKind
from daemon.journal.rollbacks import AckStatus, HeldEvent, Rollback


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """One verified acknowledgement: ``seq`` as ``event_id``, with the ``hash`` and ``epoch``
    the server received (None when it sent none)."""

    seq: int
    event_id: str
    hash: str | None = None
    epoch: str | None = None


@dataclass(frozen=True, slots=True)
class Standing:
    """Where the journal stands when the acknowledgement is judged."""

    last_seq: int
    marker_seq: int
    epoch: int
    journal_id: str


def judge_acknowledgement(
    db: sqlite3.Connection, lock: threading.RLock, ack: Acknowledged, standing: Standing, *, now: float
) -> tuple[AckStatus, Continuity | None]:
    """The acknowledgement's status, and the :class:`Continuity` of a rollback it reveals
    (recorded in the journal before this returns); call under the journal's lock."""
    held: HeldEvent | None = None
    if ack.seq <= standing.last_seq:
        row = db.execute("SELECT event_id, hash FROM events WHERE seq = ?", (ack.seq,)).fetchone()
        if row is None:
            return AckStatus.RECOGNISED, None  # compacted: nothing left to compare with
        held = HeldEvent(str(row[0]), row[1])
    pending = rollbacks.open_rollback(db)
    status = rollbacks.judge_ack(held, event_id=ack.event_id, ack_hash=ack.hash, seq=ack.seq, pending=pending)
    if status is AckStatus.ON_CHAIN:
        if pending is not None and ack.seq > pending.restore_seq:
            rollbacks.settle(db, lock, now)  # the server follows this chain past the restore point
        return status, None
    if status is AckStatus.RECOGNISED:
        return status, None
    confirmed = server_ack.read(db).seq
    restore = rollbacks.restore_point(db, min(confirmed, ack.seq - 1), ack.seq, ack.epoch)
    lost = Rollback("rollback", "server_ack", restore, max(ack.seq, restore + 1), ack.epoch)
    rollbacks.record(db, lock, lost, at=now, ack=(ack.seq, ack.event_id, ack.hash))
    if held is None:
        why = f"the server acknowledged seq {ack.seq} but the journal ends at seq {standing.last_seq}"
    else:
        why = (
            f"the server acknowledged seq {ack.seq} as event {ack.event_id} but the journal holds "
            f"{held.event_id} there (another history)"
        )
    return status, Continuity(
        kind=ContinuityKind.ROLLBACK,
        journal_seq=standing.last_seq,
        marker_seq=standing.marker_seq,
        old_epoch=standing.epoch,
        new_epoch=standing.epoch,
        old_journal_id=standing.journal_id,
        new_journal_id=standing.journal_id,
        detail=(
            f"{why}: the journal was rolled back to seq {restore} (a restore its marker could not see, "
            "e.g. a whole-disk revert); events issued after it are lost here"
        ),
        acknowledged_seq=ack.seq,
        restore_seq=restore,
        lost_through_seq=lost.lost_through_seq,
        lost_epoch=ack.epoch,
        detected_by="server_ack",
    )
