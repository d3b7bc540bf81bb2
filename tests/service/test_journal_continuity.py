"""The alert for what the journal found about its continuity: a rollback or a replaced file is
critical, a missing marker a warning, proven continuity nothing; the payload carries what the
catalogue lists, with the restore point, the first lost seq and the lost epoch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from daemon.alerts import ALERTS, AlertCode, IdScheme, Severity
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.journal.continuity import Continuity, ContinuityKind
from daemon.journal.continuity_alert import continuity_alert


def continuity(kind: ContinuityKind) -> Continuity:
    return Continuity(
        kind=kind,
        journal_seq=40,
        marker_seq=55,
        old_epoch=1,
        new_epoch=2,
        old_journal_id="old-id",
        new_journal_id="new-id",
        detail="marker says seq 55 was committed, the journal holds 40",
    )


@pytest.mark.parametrize(
    ("kind", "code", "severity"),
    [
        (ContinuityKind.ROLLBACK, AlertCode.JOURNAL_ROLLED_BACK, Severity.CRITICAL),
        (ContinuityKind.REPLACED, AlertCode.JOURNAL_ROLLED_BACK, Severity.CRITICAL),
        (ContinuityKind.UNPROVEN, AlertCode.JOURNAL_CONTINUITY_UNPROVEN, Severity.WARNING),
    ],
)
def test_a_continuity_that_was_not_proven_raises_its_alert(
    kind: ContinuityKind, code: AlertCode, severity: Severity
) -> None:
    event = continuity_alert(continuity(kind), 1_800_000_000.0)
    assert event is not None
    assert event.kind == "alert_raised"
    assert event.data["code"] == code
    assert event.data["severity"] == severity == ALERTS[code].severity
    assert set(event.data) == set(ALERTS[code].fields)
    assert IdScheme.JOURNAL.pattern.fullmatch(event.data["alert_id"])
    assert (event.data["journal_seq"], event.data["marker_seq"]) == (40, 55)
    assert event.data["continuity"] == kind.value


@pytest.mark.parametrize("kind", [ContinuityKind.FIRST_OPEN, ContinuityKind.NONE])
def test_proven_continuity_raises_nothing(kind: ContinuityKind) -> None:
    assert continuity_alert(continuity(kind), 1.0) is None


def test_a_restored_journal_file_gives_a_critical_alert(tmp_path: Path) -> None:
    settings = JournalSettings(path=tmp_path / "journal.sqlite3")
    journal = Journal(settings, "T1")
    journal.append([], [DeliveryEvent(kind="card_dealt", at=1.0, data={"n": 1})])
    journal.close()
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{settings.path}{suffix}")
        if source.exists():
            shutil.copy(source, tmp_path / f"backup{suffix}")
    journal = Journal(settings, "T1")
    journal.append([], [DeliveryEvent(kind="card_dealt", at=2.0, data={"n": n}) for n in range(2, 5)])
    journal.close()
    for suffix in ("", "-wal", "-shm"):
        backup = tmp_path / f"backup{suffix}"
        target = Path(f"{settings.path}{suffix}")
        target.unlink(missing_ok=True)
        if backup.exists():
            shutil.copy(backup, target)

    restored = Journal(settings, "T1")
    event = continuity_alert(restored.continuity, 3.0)
    restored.close()

    assert event is not None
    assert event.data["code"] == AlertCode.JOURNAL_ROLLED_BACK
    assert (event.data["journal_seq"], event.data["marker_seq"]) == (1, 4)
    # a server can follow it to the letter: the journal holds seq 1, seq 2-4 are lost
    assert (event.data["restore_seq"], event.data["first_lost_seq"], event.data["lost_through_seq"]) == (
        1,
        2,
        4,
    )
    assert event.data["lost_epoch"] is not None
    assert event.data["detected_by"] == "open"
