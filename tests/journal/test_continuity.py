"""Journal epochs, the marker and rollbacks on real files: every open of an existing journal
starts a new epoch, so no event id is ever issued twice; a rollback is found on open (the
marker) or by the server's acknowledgement (the event chain), and recorded once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from common.inputs import Tick
from daemon.journal import Continuity, ContinuityKind, DeliveryEvent, Journal, JournalError, JournalSettings
from daemon.journal.continuity import MARKER_INTERVAL_S, marker_path_for, read_marker
from daemon.journal.rollbacks import AckStatus
from daemon.journal.appending import event_id_for
from tests.support.clock import Clock


def card(n: int) -> DeliveryEvent:
    return DeliveryEvent(kind="card_dealt", at=float(n), data={"n": n}, shoe_id="S1", hand=1, source="reader")


def open_journal(path: Path, monotonic: Clock | None = None) -> Journal:
    return Journal(JournalSettings(path=path), "T1", monotonic=monotonic or Clock(0.0))


def deal(journal: Journal, count: int) -> list[str]:
    """``count`` single-card appends; the ids they were given."""
    return [journal.append([Tick(float(n))], [card(n)])[0].event_id for n in range(count)]


def copy_journal(source: Path, target: Path) -> None:
    """Copy a closed journal file (its WAL was checkpointed and removed at close)."""
    assert not Path(f"{source}-wal").exists()
    shutil.copyfile(source, target)


def test_a_new_journal_is_a_first_open_and_a_reopen_is_proven_with_a_fresh_epoch(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    assert journal.continuity.kind is ContinuityKind.FIRST_OPEN
    assert not journal.continuity.critical
    deal(journal, 3)
    journal.close()
    marker = read_marker(marker_path_for(path))
    assert marker is not None
    assert (marker.seq, marker.epoch, marker.journal_id) == (3, 0, journal.journal_id)

    again = open_journal(path)
    assert again.continuity.kind is ContinuityKind.NONE
    assert not again.continuity.critical
    assert again.continuity.epoch_changed  # every open: a fresh epoch, so a revert reuses no id
    assert (again.continuity.old_epoch, again.continuity.new_epoch) == (0, 1)
    assert (again.continuity.marker_seq, again.continuity.journal_seq) == (3, 3)
    [event] = again.append([], [card(4)])
    assert event.epoch == again.journal_id != journal.journal_id


def test_a_restored_backup_starts_a_new_epoch_and_never_reissues_an_id(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    journal = open_journal(path)
    issued = deal(journal, 5)
    journal.close()
    copy_journal(path, backup)
    journal = open_journal(path)
    issued += deal(journal, 5)
    first_epoch_id = journal.journal_id
    journal.close()

    copy_journal(backup, path)  # the restore: seq 6-10 were issued, the file ends at 5
    restored = open_journal(path)
    found = restored.continuity
    assert found.kind is ContinuityKind.ROLLBACK
    assert found.critical
    assert (found.marker_seq, found.journal_seq) == (10, 5)
    assert (found.restore_seq, found.first_lost_seq, found.lost_through_seq) == (5, 6, 10)
    assert found.lost_epoch == first_epoch_id
    assert (found.old_epoch, found.new_epoch) == (0, 2)  # above the marker's epoch 1
    assert found.old_journal_id != found.new_journal_id == restored.journal_id
    after = restored.append([], [card(n) for n in range(5)])
    assert [e.seq for e in after] == [6, 7, 8, 9, 10]  # seq continues from the restored journal
    new_ids = [e.event_id for e in after]
    assert not set(new_ids) & set(issued)
    assert new_ids == [event_id_for(restored.journal_id, "T1", s) for s in range(6, 11)]
    assert [e.event_id for e in restored.events()][:5] == issued[:5]  # stored ids never change
    restored.close()

    assert open_journal(path).continuity.kind is ContinuityKind.NONE


def test_the_same_backup_restored_twice_gets_a_third_set_of_ids(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    journal = open_journal(path)
    issued = set(deal(journal, 2))
    journal.close()
    copy_journal(path, backup)
    for _ in range(3):
        journal = open_journal(path)
        issued_now = set(deal(journal, 4))
        assert not issued_now & issued
        issued |= issued_now
        journal.close()
        copy_journal(backup, path)
    journal = open_journal(path)
    assert journal.continuity.kind is ContinuityKind.ROLLBACK
    assert journal.epoch == 4


def test_a_new_file_beside_another_journals_marker_is_reported_replaced(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    deal(journal, 4)
    journal.close()
    path.rename(tmp_path / "j.sqlite3.damaged")  # what the damaged-journal message tells to do

    fresh = open_journal(path)
    assert fresh.continuity.kind is ContinuityKind.REPLACED
    assert fresh.continuity.critical
    assert not fresh.continuity.epoch_changed  # a new file's ids were never issued
    assert fresh.continuity.marker_seq == 4
    # the new file goes on after the old one's last known seq: no seq ever goes back
    assert (fresh.continuity.restore_seq, fresh.continuity.first_lost_seq) == (4, 5)
    assert [e.seq for e in fresh.append([], [card(5)])] == [5]
    fresh.close()
    assert open_journal(path).continuity.kind is ContinuityKind.NONE


def test_another_journals_file_put_in_place_starts_a_new_epoch(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    other = tmp_path / "other" / "j.sqlite3"
    old = open_journal(other)
    issued = set(deal(old, 3))
    old.close()
    current = open_journal(path)
    deal(current, 6)
    current.close()

    copy_journal(other, path)
    reopened = open_journal(path)
    assert reopened.continuity.kind is ContinuityKind.REPLACED
    assert reopened.continuity.epoch_changed
    assert not {e.event_id for e in reopened.append([], [card(0), card(1)])} & issued


@pytest.mark.parametrize("marker_text", [None, "", "not json", '{"format": "something else"}'])
def test_an_existing_journal_without_a_readable_marker_starts_a_new_epoch(
    tmp_path: Path, marker_text: str | None
) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    issued = set(deal(journal, 3))
    journal.close()
    marker = marker_path_for(path)
    if marker_text is None:
        marker.unlink()
    else:
        marker.write_text(marker_text)

    reopened = open_journal(path)
    assert reopened.continuity.kind is ContinuityKind.UNPROVEN
    assert not reopened.continuity.critical
    assert reopened.continuity.epoch_changed
    assert reopened.continuity.marker_seq is None
    assert not set(deal(reopened, 3)) & issued


def test_the_marker_lags_but_is_never_ahead_and_costs_no_write_per_card(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    monotonic = Clock(100.0)
    journal = open_journal(path, monotonic)
    marker = marker_path_for(path)
    written = marker.stat().st_mtime_ns, marker.read_text()

    deal(journal, 20)  # within the interval: the marker file is not touched
    assert (marker.stat().st_mtime_ns, marker.read_text()) == written
    with pytest.raises(ValueError, match="Out of range float"):
        journal.append([], [DeliveryEvent("card", 1.0, {"bad": float("nan")})])

    monotonic.now += MARKER_INTERVAL_S
    journal.append([], [card(21)])
    on_disk = read_marker(marker)
    assert on_disk is not None
    assert on_disk.seq == journal.last_seq() == 21
    journal.close()


def test_a_marker_that_cannot_be_written_refuses_the_open_but_never_an_append(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    monotonic = Clock(0.0)
    journal = open_journal(path, monotonic)
    marker = marker_path_for(path)
    marker.unlink()
    marker.mkdir()  # os.replace onto a directory fails like an unwritable marker

    monotonic.now += MARKER_INTERVAL_S
    assert [e.seq for e in journal.append([], [card(1)])] == [1]  # committed: must not look failed
    assert journal.marker.error is not None
    assert str(marker) in journal.marker.error
    journal.close()

    with pytest.raises(JournalError, match="cannot write its marker"):
        open_journal(path)


def test_the_server_acknowledging_past_the_journal_is_one_recorded_rollback(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    deal(journal, 4)
    fourth = journal.get(4)
    assert fourth is not None
    assert journal.check_acknowledged(4, fourth.event_id, fourth.hash) == (AckStatus.ON_CHAIN, None)
    journal.record_server_ack(4, fourth.event_id)

    status, found = journal.check_acknowledged(9, LOST_ID, LOST_HASH)  # the whole disk was reverted
    assert status is AckStatus.ROLLBACK
    assert isinstance(found, Continuity)
    assert found.kind is ContinuityKind.ROLLBACK
    assert found.critical
    assert (found.acknowledged_seq, found.journal_seq, found.detected_by) == (9, 4, "server_ack")
    assert (found.restore_seq, found.first_lost_seq, found.lost_through_seq) == (4, 5, 9)
    assert journal.continuity is found
    # the same acknowledgement again, and more of the lost history: recognised, not alerted
    assert journal.check_acknowledged(9, LOST_ID, LOST_HASH) == (AckStatus.RECOGNISED, None)
    assert journal.check_acknowledged(12, LOST_ID, LOST_HASH) == (AckStatus.RECOGNISED, None)
    journal.close()

    reopened = open_journal(path)  # a restart: the rollback is on disk, not only in memory
    assert reopened.continuity.kind is ContinuityKind.NONE
    assert reopened.check_acknowledged(9, LOST_ID, LOST_HASH) == (AckStatus.RECOGNISED, None)
    new = reopened.append([], [card(5)])[0]
    # the server follows: an acknowledgement of this chain above the restore point settles it
    assert reopened.check_acknowledged(5, new.event_id, new.hash) == (AckStatus.ON_CHAIN, None)
    assert reopened.open_rollback() is None
    status, again = reopened.check_acknowledged(9, LOST_ID, LOST_HASH)  # now: a new rollback
    assert status is AckStatus.ROLLBACK
    assert again is not None


LOST_ID = "00000000-0000-5000-8000-000000000009"
LOST_HASH = "ab" * 32


def test_an_acknowledgement_with_the_right_id_and_another_hash_is_off_the_chain(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "j.sqlite3")
    deal(journal, 3)
    third = journal.get(3)
    assert third is not None
    assert third.hash is not None
    assert journal.check_acknowledged(3, third.event_id, third.hash.upper())[0] is AckStatus.ON_CHAIN
    assert journal.check_acknowledged(3, third.event_id, "00" * 32)[0] is AckStatus.ROLLBACK


def test_the_restore_point_of_an_ack_found_rollback_is_where_its_epoch_ends_here(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    snapshot = tmp_path / "snapshot.sqlite3"
    journal = open_journal(path)
    deal(journal, 3)
    journal.close()
    journal = open_journal(path)  # epoch 1 from seq 4
    deal(journal, 3)
    lost_epoch = journal.journal_id
    journal.close()
    copy_journal(path, snapshot)
    shutil.copyfile(marker_path_for(path), tmp_path / "snapshot.marker")
    journal = open_journal(path)  # epoch 2 from seq 7: lost in the revert below
    deal(journal, 5)
    journal.close()
    copy_journal(snapshot, path)  # the whole disk reverted: journal and marker together
    shutil.copyfile(tmp_path / "snapshot.marker", marker_path_for(path))

    reverted = open_journal(path)  # epoch 2 again by number, a new id, from seq 7
    assert reverted.continuity.kind is ContinuityKind.NONE  # the marker cannot see it
    deal(reverted, 4)  # seq 7-10 again, new ids
    status, found = reverted.check_acknowledged(10, LOST_ID, LOST_HASH, lost_epoch)
    assert status is AckStatus.ROLLBACK
    assert found is not None
    # the server's event was of epoch 1, which ends at seq 6 here: exact
    assert (found.restore_seq, found.first_lost_seq, found.lost_epoch) == (6, 7, lost_epoch)
    unknown = open_journal(tmp_path / "other.sqlite3")
    deal(unknown, 2)
    unknown.close()
    again = open_journal(tmp_path / "other.sqlite3")  # epochs start at seq 1 (file) and 3
    deal(again, 2)
    second = again.get(2)
    assert second is not None
    assert again.check_acknowledged(2, second.event_id, second.hash)[0] is AckStatus.ON_CHAIN
    again.record_server_ack(2, second.event_id)  # the server confirmed seq 2 on this chain
    status, cautious = again.check_acknowledged(4, LOST_ID, LOST_HASH, None)
    assert status is AckStatus.ROLLBACK
    assert cautious is not None
    # no epoch named: the earliest epoch start at or above what the server confirmed, never too late
    assert cautious.restore_seq == 2


def test_the_marker_file_is_plain_json_naming_table_epoch_and_seq(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    deal(journal, 2)
    journal.close()
    data = json.loads(marker_path_for(path).read_text())
    assert data["format"] == "baccarat-edge-journal-marker"
    assert (data["table_id"], data["epoch"], data["seq"], data["journal_id"]) == (
        "T1",
        0,
        2,
        journal.journal_id,
    )
    assert not list(tmp_path.glob("*.tmp"))


def test_the_server_ahead_after_a_rollback_found_on_open_is_recognised_after_restarts(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    journal = open_journal(path)
    deal(journal, 2)
    journal.close()
    copy_journal(path, backup)
    journal = open_journal(path)
    deal(journal, 6)
    journal.close()
    copy_journal(backup, path)

    restored = open_journal(path)
    assert restored.continuity.kind is ContinuityKind.ROLLBACK
    assert restored.continuity.restore_seq == 2
    # the alert was raised on open: the server's acknowledgement of the lost history is expected
    assert restored.check_acknowledged(8, LOST_ID, LOST_HASH) == (AckStatus.RECOGNISED, None)
    restored.close()
    assert open_journal(path).check_acknowledged(8, LOST_ID, LOST_HASH)[0] is AckStatus.RECOGNISED


def test_a_lost_wal_is_a_rollback(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    deal(journal, 3)
    journal.close()  # checkpointed: the database file holds seq 1-3
    journal = open_journal(path)
    deal(journal, 10)  # seq 4-13 are committed in the WAL only
    without_wal = path.read_bytes()
    journal.close()

    path.write_bytes(without_wal)
    reopened = open_journal(path)
    assert reopened.continuity.kind is ContinuityKind.ROLLBACK
    assert (reopened.continuity.marker_seq, reopened.continuity.journal_seq) == (13, 3)
