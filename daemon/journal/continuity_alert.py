"""The alert for what the journal found about its continuity: on open (against its marker) or
from the game server's acknowledgement (against the event chain).

A rollback (backup restored, snapshot or whole disk reverted, WAL lost) or a replaced file is
critical (``journal_rolled_back``): events the table had issued are gone from it. The alert
names the **restore point** (``restore_seq``: the last ``seq`` the journal still holds from
before), the **first lost seq** (``first_lost_seq`` = ``restore_seq`` + 1), the highest seq
known to have been issued before (``lost_through_seq``) and the **lost epoch** (``lost_epoch``:
the epoch id of the lost history, when known). A journal without a readable marker is a
warning (``journal_continuity_unproven``). The alert goes into the event stream like the other
service alerts, so the game server sees it in order, and it is raised once per rollback: the
journal records the rollback (:mod:`daemon.journal.rollbacks`).
"""

from __future__ import annotations

from daemon.alerts import AlertCode, raised_alert
from daemon.journal.continuity import Continuity, ContinuityKind
from daemon.journal.records import DeliveryEvent

_CODES: dict[ContinuityKind, AlertCode] = {
    ContinuityKind.ROLLBACK: AlertCode.JOURNAL_ROLLED_BACK,
    ContinuityKind.REPLACED: AlertCode.JOURNAL_ROLLED_BACK,
    ContinuityKind.UNPROVEN: AlertCode.JOURNAL_CONTINUITY_UNPROVEN,
}


def continuity_alert(continuity: Continuity, at: float) -> DeliveryEvent | None:
    """The ``alert_raised`` event for what the journal found; None when continuity was proven
    (or the file is new)."""
    code = _CODES.get(continuity.kind)
    if code is None:
        return None
    data = raised_alert(
        code,
        f"journal continuity: {continuity.kind.value}: {continuity.detail}",
        {
            "continuity": continuity.kind.value,
            "detected_by": continuity.detected_by,
            "journal_seq": continuity.journal_seq,
            "marker_seq": continuity.marker_seq,
            "acknowledged_seq": continuity.acknowledged_seq,
            "restore_seq": continuity.restore_seq,
            "first_lost_seq": continuity.first_lost_seq,
            "lost_through_seq": continuity.lost_through_seq,
            "lost_epoch": continuity.lost_epoch,
            "old_epoch": continuity.old_epoch,
            "new_epoch": continuity.new_epoch,
            "old_journal_id": continuity.old_journal_id,
            "new_journal_id": continuity.new_journal_id,
        },
    )
    return DeliveryEvent(kind="alert_raised", at=at, data=data)
