"""The alert the service raises when the journal could not prove its continuity on open.

:attr:`daemon.journal.store.Journal.continuity` says what the journal found against its
marker: a rollback (backup restored, snapshot reverted, WAL lost) or a replaced file is
critical, since events may be gone or their ``seq`` issued again (a new epoch keeps every
``event_id`` new); a journal without a readable marker is a warning (a new epoch was started
to be safe). The alert goes into the event stream like the other service alerts, so the game
server and the pit see it before any event of the new epoch.
"""

from __future__ import annotations

import uuid

from daemon.alerts import ALERTS, AlertCode
from daemon.journal.continuity import Continuity, ContinuityKind
from daemon.journal.records import DeliveryEvent

_CODES: dict[ContinuityKind, AlertCode] = {
    ContinuityKind.ROLLBACK: AlertCode.JOURNAL_ROLLED_BACK,
    ContinuityKind.REPLACED: AlertCode.JOURNAL_ROLLED_BACK,
    ContinuityKind.UNPROVEN: AlertCode.JOURNAL_CONTINUITY_UNPROVEN,
}


def continuity_alert(continuity: Continuity, at: float) -> DeliveryEvent | None:
    """The ``alert_raised`` event for what the journal found on open; None when continuity
    was proven (or the file is new)."""
    code = _CODES.get(continuity.kind)
    if code is None:
        return None
    return DeliveryEvent(
        kind="alert_raised",
        at=at,
        data={
            "alert_id": f"journal-{uuid.uuid4().hex[:12]}",
            "code": code,
            "severity": ALERTS[code].severity,
            "message": f"journal continuity: {continuity.kind.value}: {continuity.detail}",
            "continuity": continuity.kind.value,
            "journal_seq": continuity.journal_seq,
            "marker_seq": continuity.marker_seq,
            "acknowledged_seq": continuity.acknowledged_seq,
            "old_epoch": continuity.old_epoch,
            "new_epoch": continuity.new_epoch,
            "old_journal_id": continuity.old_journal_id,
            "new_journal_id": continuity.new_journal_id,
        },
    )
