"""The journal on a real SQLite file: gapless seq, stable ids, delivery marks, limits,
compaction, command nonces, reopening."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from common.cards import Card
from common.inputs import CardRead, Tick
from daemon.journal import DeliveryEvent, FullPolicy, Journal, JournalError, JournalSettings, NonceVerdict
from tests.support.clock import Clock


def event(kind: str, shoe: str | None = "S1", hand: int | None = 1, **data: object) -> DeliveryEvent:
    return DeliveryEvent(kind=kind, at=10.0, data=dict(data), shoe_id=shoe, hand=hand, source="reader")


def open_journal(
    tmp_path: Path, clock: Clock | None = None, monotonic: Clock | None = None, **overrides: object
) -> Journal:
    settings = JournalSettings(path=tmp_path / "j.sqlite3", **overrides)  # type: ignore[arg-type]
    return Journal(settings, "T1", clock=clock or Clock(), monotonic=monotonic or Clock(0.0))


def test_append_assigns_gapless_seq_and_stable_ids_across_reopen(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    first = j.append([CardRead(Card.parse("8s"), 1.0)], [event("card", n=1), event("card", n=2)])
    second = j.append([Tick(2.0)], [])
    third = j.append([], [event("round_completed")])
    assert [e.seq for e in first + third] == [1, 2, 3]
    assert second == []
    ids = [e.event_id for e in first + third]
    assert len(set(ids)) == 3
    j.close()

    j2 = open_journal(tmp_path)
    assert [e.event_id for e in j2.events()] == ids
    assert [e.data for e in j2.events()] == [{"n": 1}, {"n": 2}, {}]
    assert j2.last_seq() == 3
    assert [e.seq for e in j2.append([], [event("card")])] == [4]
    assert [type(i).__name__ for _, i in j2.inputs()] == ["CardRead", "Tick"]
    assert j2.input_count() == 2


def test_ids_differ_between_two_journals_of_the_same_table(tmp_path: Path) -> None:
    a = Journal(JournalSettings(path=tmp_path / "a.sqlite3"), "T1")
    b = Journal(JournalSettings(path=tmp_path / "b.sqlite3"), "T1")
    assert a.append([], [event("x")])[0].event_id != b.append([], [event("x")])[0].event_id


def test_pending_in_order_until_delivered_or_dead_lettered(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    j.append([], [event("card", n=i) for i in range(5)])
    assert [e.seq for e in j.pending()] == [1, 2, 3, 4, 5]
    j.mark_delivered([1, 2])
    j.mark_dead_letter(4, "rejected by broker: Not authorized (0x87)")
    assert [e.seq for e in j.pending()] == [3, 5]
    assert [e.seq for e in j.pending(after_seq=3)] == [5]
    assert [e.seq for e in j.pending(limit=1)] == [3]
    assert [(e.seq, e.dead_letter) for e in j.dead_letters()] == [
        (4, "rejected by broker: Not authorized (0x87)")
    ]
    cap = j.capacity()
    assert cap.undelivered == 2


def test_unserialisable_event_writes_nothing(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    with pytest.raises(ValueError, match="Out of range float"):
        j.append([Tick(1.0)], [event("card", bad=float("nan"))])
    assert j.last_seq() == 0
    assert list(j.inputs()) == []


def test_delivery_events_are_in_the_stream_but_not_folded(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    j.append([], [event("card")])
    alert = j.append_delivery_event(DeliveryEvent("alert", 11.0, {"code": "mqtt_dead_letter"}))
    assert alert.seq == 2
    assert [e.seq for e in j.events()] == [1]
    assert [e.seq for e in j.events(origin=None)] == [1, 2]


def test_a_journal_refuses_another_tables_file(tmp_path: Path) -> None:
    open_journal(tmp_path).close()
    with pytest.raises(JournalError, match="belongs to table 'T1'"):
        Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T2")


def test_file_is_wal_with_full_sync(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    j.append([], [event("card")])
    with sqlite3.connect(tmp_path / "j.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_full_by_undelivered_count_refuses_new_rounds_but_keeps_appending(tmp_path: Path) -> None:
    j = open_journal(tmp_path, max_undelivered_events=10)
    j.append([], [event("card", n=i) for i in range(10)])
    assert j.capacity().full
    assert "10 undelivered events" in (j.capacity().reason or "")
    assert not j.admits_new_round()
    # The round in progress still completes: validated events are never dropped.
    assert j.append([], [event("round_completed")])[0].seq == 11
    j.mark_delivered(range(1, 12))
    assert j.admits_new_round()


def test_alert_only_policy_always_admits(tmp_path: Path) -> None:
    j = open_journal(tmp_path, max_undelivered_events=10, on_full=FullPolicy.ALERT_ONLY)
    j.append([], [event("card") for _ in range(12)])
    assert j.capacity().full
    assert j.admits_new_round()


def test_full_by_size(tmp_path: Path) -> None:
    ticks = Clock(0.0)
    j = open_journal(tmp_path, monotonic=ticks, max_bytes=256 * 1024, size_check_interval_s=1.0)
    big = "x" * 2000
    assert j.admits_new_round()  # measured once here
    while j.size_bytes() < 256 * 1024:
        j.append([], [event("card", pad=big)])
    # The size is re-measured at most once per interval: still the old figure...
    assert j.admits_new_round()
    ticks.now += 1.0
    # ...and the new one once the interval passed.
    assert not j.admits_new_round()
    assert "journal size" in (j.capacity().reason or "")


HOUR = 3600.0


def test_full_by_undelivered_age_refuses_new_rounds_until_delivered(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR)
    assert j.capacity().oldest_undelivered_age_s is None
    j.append([], [event("card", n=1)])  # seq 1, journaled at t0
    clock.now += HOUR - 1
    assert j.admits_new_round()
    assert not j.capacity().full
    j.append([], [event("card", n=2)])  # seq 2, journaled at t0 + 1 h - 1 s
    clock.now += 1
    assert not j.admits_new_round()
    cap = j.capacity()
    assert cap.full
    assert cap.oldest_undelivered_age_s == HOUR
    assert cap.reason == ("oldest undelivered event is 3600 s old, reached the age limit of 3600 s (1.0 h)")
    # The round in progress still completes: validated events are never dropped.
    assert j.append([], [event("round_completed")])[0].seq == 3
    # Seq 1 acknowledged: the oldest undelivered is now seq 2, 1 s old.
    j.mark_delivered([1])
    assert j.admits_new_round()
    assert j.capacity().oldest_undelivered_age_s == 1.0
    assert not j.capacity().full
    j.mark_delivered([2, 3])
    assert j.capacity().oldest_undelivered_at is None
    clock.now += 10 * HOUR
    assert j.admits_new_round()


def test_a_dead_letter_also_ends_the_age(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR)
    j.append([], [event("card")])
    clock.now += 2 * HOUR
    j.append([], [event("card")])
    assert not j.admits_new_round()
    j.mark_dead_letter(1, "rejected by the broker: Not authorized (0x87)")
    assert j.admits_new_round()
    assert j.capacity().oldest_undelivered_age_s == 0.0


def test_the_undelivered_age_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR)
    j.append([], [event("card", n=1), event("card", n=2)])
    journaled_at = clock.now
    j.close()
    clock.now += HOUR  # the daemon was down (or the broker was) for the hour
    reopened = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR)
    assert not reopened.admits_new_round()
    cap = reopened.capacity()
    assert cap.oldest_undelivered_at == journaled_at
    assert "age limit of 3600 s" in (cap.reason or "")
    reopened.mark_delivered([1, 2])
    assert reopened.admits_new_round()


def test_alert_only_policy_admits_past_the_age_limit(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR, on_full=FullPolicy.ALERT_ONLY)
    j.append([], [event("card")])
    clock.now += HOUR
    assert j.capacity().full
    assert "age limit" in (j.capacity().reason or "")
    assert j.admits_new_round()


def test_admits_new_round_runs_no_sql_while_events_wait(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, max_undelivered_age_s=HOUR)
    j.append([], [event("card")])
    assert j.admits_new_round()  # the file size is measured once here
    statements: list[str] = []
    j._db.set_trace_callback(statements.append)
    for _ in range(3):
        assert j.admits_new_round()
    clock.now += HOUR
    assert not j.admits_new_round()
    j.capacity()
    assert statements == []


def test_the_in_memory_oldest_undelivered_matches_the_file(tmp_path: Path) -> None:
    """Random appends, acknowledgements (some repeated), dead letters and reopenings: the
    in-memory oldest undelivered ``journaled_at`` always equals what the file says."""
    rng = random.Random(5)
    clock = Clock()
    j = open_journal(tmp_path, clock=clock)
    appended = 0
    for _ in range(300):
        clock.now += rng.uniform(0.0, 30.0)
        action = rng.random()
        if action < 0.45:
            appended += len(j.append([], [event("card") for _ in range(rng.randint(0, 3))]))
        elif action < 0.8 and appended:
            j.mark_delivered(rng.sample(range(1, appended + 1), min(appended, rng.randint(1, 4))))
        elif action < 0.95 and appended:
            j.mark_dead_letter(rng.randint(1, appended), "rejected")
        else:
            j.close()
            j = open_journal(tmp_path, clock=clock)
        with sqlite3.connect(tmp_path / "j.sqlite3") as db:
            row = db.execute(
                "SELECT min(journaled_at) FROM events WHERE delivered_at IS NULL AND dead_letter IS NULL"
            ).fetchone()
        assert j.capacity().oldest_undelivered_at == row[0]


def test_the_age_limit_is_validated() -> None:
    assert JournalSettings().max_undelivered_age_s == 6 * HOUR
    for bad in (0.0, 59.0, 31 * 86400.0, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="max_undelivered_age_s"):
            JournalSettings(max_undelivered_age_s=bad)


def test_undelivered_count_follows_marks_and_is_rebuilt_on_open(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    j.append([], [event("card", n=i) for i in range(6)])
    j.append_delivery_event(event("alert_raised", alert_id="a", code="x"))
    assert j.undelivered_count() == j.capacity().undelivered == 7
    j.mark_delivered([1, 2])
    j.mark_delivered([2, 3])  # an event acknowledged twice counts once
    j.mark_dead_letter(4, "rejected")
    j.mark_dead_letter(1, "rejected")  # already delivered: no change
    j.mark_dead_letter(4, "again")  # already dead-lettered: no change
    assert j.undelivered_count() == 3
    assert [e.seq for e in j.pending()] == [5, 6, 7]
    j.close()
    reopened = open_journal(tmp_path)
    assert reopened.undelivered_count() == 3
    assert reopened.capacity().oldest_undelivered_at is not None


def test_a_failed_append_is_not_counted(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    with pytest.raises(ValueError, match="JSON"):
        j.append([], [event("card", bad=float("nan"))])
    assert j.undelivered_count() == 0
    j._db.execute("CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk'); END")
    with pytest.raises(sqlite3.DatabaseError):
        j.append([], [event("card")])
    assert j.undelivered_count() == 0
    assert j.capacity().undelivered == 0


def test_compaction_removes_only_old_delivered_finished_shoes(tmp_path: Path) -> None:
    clock = Clock()
    j = open_journal(tmp_path, clock=clock, audit_retention_days=1)
    j.append([Tick(1.0)], [event("card", shoe="S1") for _ in range(3)])  # seq 1-3
    j.append([Tick(2.0)], [event("card", shoe="S2") for _ in range(2)])  # seq 4-5
    clock.now += 2 * 86400
    j.append([Tick(3.0)], [event("card", shoe="S3")])  # seq 6, current shoe
    j.mark_delivered([1, 2, 3, 4, 6])  # 5 of shoe S2 still undelivered

    assert j.compact() == 3  # S1 only: S2 has an undelivered event, S3 is current and recent
    assert [e.seq for e in j.events()] == [4, 5, 6]
    assert [i.at for _, i in j.inputs()] == [2.0, 3.0]

    j.mark_delivered([5])
    clock.now += 2 * 86400
    assert j.compact() == 2  # S2 now; S3 stays because it is the current shoe
    assert [e.seq for e in j.events()] == [6]
    assert j.append([], [event("card", shoe="S3")])[0].seq == 7  # seq stays gapless


def test_nonces_are_remembered_durably_and_bounded(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    assert j.remember_nonce("n1", 100.0, 100.0, 60.0, 3) is NonceVerdict.FRESH
    assert j.remember_nonce("n1", 100.0, 101.0, 60.0, 3) is NonceVerdict.REUSED
    j.close()
    j = open_journal(tmp_path)
    assert j.remember_nonce("n1", 100.0, 102.0, 60.0, 3) is NonceVerdict.REUSED
    assert j.remember_nonce("n2", 101.0, 102.0, 60.0, 3) is NonceVerdict.FRESH
    assert j.remember_nonce("n3", 101.0, 102.0, 60.0, 3) is NonceVerdict.FRESH
    assert j.remember_nonce("n4", 101.0, 102.0, 60.0, 3) is NonceVerdict.CACHE_FULL
    # Past the horizon the old ones are forgotten (their timestamps are refused anyway).
    assert j.remember_nonce("n4", 170.0, 170.0, 60.0, 3) is NonceVerdict.FRESH


def test_delivery_marks_leave_appends_fully_synchronous(tmp_path: Path) -> None:
    j = open_journal(tmp_path)
    j.append([], [event("card")])
    j.mark_delivered([1])
    assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again for the next append
    assert j.pending() == []
