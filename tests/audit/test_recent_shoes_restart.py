"""The table's recent shoes across a real restart: journaled with the service's snapshots, the
ended shoe compacted away, the engine restored from the journal (as the service does at start).
The recent shoes live in the engine's state, so they come back from a snapshot of the current
shoe; the ended shoe's own events are not needed."""

from __future__ import annotations

from pathlib import Path

from daemon.alerts import AlertCode
from daemon.journal import Journal, JournalSettings
from daemon.service.engine_restore import SnapshotTaker, restore_from_journal
from tests.audit.test_shoe_audit import _with_slug, deal_shoe, shuffled
from tests.engine.support import alerts, cmd, engine
from tests.support.clock import DAY, Clock


def test_a_slug_from_a_compacted_shoe_is_caught_after_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    settings = JournalSettings(path=tmp_path / "j.sqlite3", audit_retention_days=1, size_check_interval_s=60)
    journal = Journal(settings, "T1", clock=clock, monotonic=clock)
    live = engine(decks=8)
    first = shuffled(8, seed=31)
    events, _, at = deal_shoe(live, first, shoe_id="A")
    taker = SnapshotTaker(journal, every_events=2)
    taker.after_append(live, journal.append([], events))
    clock.now += 2 * DAY
    second = _with_slug(shuffled(8, seed=32), first, start=60, length=14)
    started = live.handle(cmd("new_shoe", at + 100, "n", shoe_id="B"))
    taker.after_append(live, journal.append([], started))  # (the service's periodic snapshot)
    journal.mark_delivered(range(1, journal.last_seq() + 1))
    assert journal.compact() == len(events)  # shoe A's events are gone
    restored = restore_from_journal(journal, live.configured_settings, live.configured_variant)
    journal.close()
    engine_b = restored.engine
    assert restored.snapshot_seq is not None
    assert [s["shoe_id"] for s in engine_b.state.recent_shoes] == ["A"]
    dealt, _, _ = deal_shoe(engine_b, second, shoe_id="B", at=at + 100, start=False)
    (alert,) = alerts(dealt, AlertCode.SHOE_IRREGULAR)
    assert any(f["earlier_shoe_id"] == "A" for f in alert.data["details"]["findings"])
