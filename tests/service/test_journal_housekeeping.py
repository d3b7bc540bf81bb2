"""Journal housekeeping on a real journal, time passed in: the ``journal_full`` alert (raised
once while full, cleared once below the limits, with its id) and periodic compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.inputs import Tick
from daemon.alerts import AlertCode
from daemon.journal import DeliveryEvent, Journal, JournaledEvent, JournalSettings
from daemon.mqtt.settings import DeliverySettings
from daemon.service.journal_housekeeping import FIRST_COMPACTION_AFTER_S, JournalHousekeeping
from tests.support.clock import DAY, Clock


def card(shoe: str) -> DeliveryEvent:
    return DeliveryEvent(
        kind="card_dealt", at=1.0, data={"card": "8s"}, shoe_id=shoe, hand=1, source="reader"
    )


def alerts(journal: Journal, code: str = AlertCode.JOURNAL_FULL) -> list[JournaledEvent]:
    return [e for e in journal.events(origin=None) if e.kind.startswith("alert") and e.data["code"] == code]


@pytest.fixture
def wall() -> Clock:
    return Clock(1_764_400_000.0)


@pytest.fixture
def journal(tmp_path: Path, wall: Clock) -> Journal:
    settings = JournalSettings(path=tmp_path / "j.sqlite3", max_undelivered_events=10, audit_retention_days=1)
    return Journal(settings, "T1", clock=wall, monotonic=Clock(0.0))


def housekeeping(journal: Journal, wall: Clock, notified: list[int]) -> JournalHousekeeping:
    settings = DeliverySettings(health_interval_s=10.0, compact_interval_s=3600.0)
    return JournalHousekeeping(journal, lambda: settings, wall, lambda: notified.append(1))


def test_journal_full_is_raised_once_and_cleared_once_with_the_same_id(journal: Journal, wall: Clock) -> None:
    notified: list[int] = []
    keeper = housekeeping(journal, wall, notified)
    keeper.run(100.0)  # room: nothing
    assert alerts(journal) == []
    journal.append([], [card("S1") for _ in range(10)])

    keeper.run(105.0)  # not yet due (every health_interval_s)
    assert alerts(journal) == []
    keeper.run(110.0)
    [raised] = alerts(journal)
    assert raised.kind == "alert_raised"
    assert raised.data == {
        "alert_id": keeper.full_alert,
        "code": AlertCode.JOURNAL_FULL,
        "severity": "critical",
        "message": "10 undelivered events reached the limit of 10; policy refuse_new_rounds",
        "admits_new_round": False,
    }
    assert raised.data["alert_id"].startswith("delivery-")
    assert raised.at == wall.now
    assert len(notified) == 2  # the early warning, then the full alert

    keeper.run(120.0)  # still full: no second alert
    assert len(alerts(journal)) == 1

    journal.mark_delivered(range(1, journal.last_seq() + 1))
    keeper.run(125.0)  # not due yet
    assert len(alerts(journal)) == 1
    keeper.run(130.0)
    [_, cleared] = alerts(journal)
    assert cleared.kind == "alert_cleared"
    assert cleared.data == {
        "alert_id": raised.data["alert_id"],
        "code": AlertCode.JOURNAL_FULL,
        "message": "journal below its limits again",
    }
    assert keeper.full_alert is None
    assert len(notified) == 4  # both cleared


def test_compaction_runs_a_little_after_start_then_every_compact_interval(
    journal: Journal, wall: Clock
) -> None:
    keeper = housekeeping(journal, wall, [])
    journal.append([Tick(1.0)], [card("S1") for _ in range(2)])  # seq 1-2, a finished shoe
    wall.now += 2 * DAY
    journal.append([Tick(2.0)], [card("S2")])  # seq 3, the current shoe
    journal.mark_delivered([1, 2, 3])

    keeper.run(0.0)
    keeper.run(FIRST_COMPACTION_AFTER_S - 0.1)
    assert [e.seq for e in journal.events()] == [1, 2, 3]
    keeper.run(FIRST_COMPACTION_AFTER_S)  # starts the compaction on its own thread
    assert keeper.wait_for_compaction(10)
    assert [e.seq for e in journal.events()] == [3]

    journal.append([Tick(3.0)], [card("S3")])  # seq 4: S2 is finished now
    journal.mark_delivered([4])
    wall.now += 2 * DAY
    keeper.run(FIRST_COMPACTION_AFTER_S + 3599.0)  # the interval has not passed
    assert [e.seq for e in journal.events()] == [3, 4]
    keeper.run(FIRST_COMPACTION_AFTER_S + 3600.0)
    assert keeper.wait_for_compaction(10)
    assert [e.seq for e in journal.events()] == [4]


def test_a_failing_journal_is_logged_and_tried_again_when_due(journal: Journal, wall: Clock) -> None:
    keeper = housekeeping(journal, wall, [])
    journal.append([], [card("S1") for _ in range(10)])
    journal.close()  # every call fails from now on
    keeper.run(0.0)  # neither the check nor the compaction raises
    keeper.run(FIRST_COMPACTION_AFTER_S)
    assert keeper.full_alert is None


def test_the_early_warning_speaks_before_the_journal_is_full(journal: Journal, wall: Clock) -> None:
    keeper = housekeeping(journal, wall, [])
    journal.append([], [card("S1") for _ in range(7)])
    keeper.run(0.0)  # 7 of 10: below 80 %
    assert alerts(journal, AlertCode.JOURNAL_NEARLY_FULL) == []
    journal.append([], [card("S1")])
    keeper.run(10.0)  # 8 of 10
    [warning] = alerts(journal, AlertCode.JOURNAL_NEARLY_FULL)
    assert warning.data["severity"] == "warning"
    assert warning.data["message"].startswith("8 undelivered events are 80% of the limit of 10")
    assert warning.data["alert_id"] == keeper.nearly_full_alert
    assert alerts(journal) == []  # not full: dealing goes on
    assert journal.admits_new_round()

    keeper.run(20.0)  # still 80 %: no second warning
    assert len(alerts(journal, AlertCode.JOURNAL_NEARLY_FULL)) == 1
    journal.mark_delivered(range(1, 5))
    keeper.run(30.0)
    [_, cleared] = alerts(journal, AlertCode.JOURNAL_NEARLY_FULL)
    assert cleared.kind == "alert_cleared"
    assert cleared.data["alert_id"] == warning.data["alert_id"]
    assert keeper.nearly_full_alert is None
