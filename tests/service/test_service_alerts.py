"""The service's own alerts go into the journal as the catalogue builds them
(``daemon.alerts.raised_alert``), with the event stream's envelope, on a real journal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.alerts import ALERTS, AlertCode, AlertEventKind, IdScheme
from daemon.journal import Journal, JournalSettings
from daemon.service.journal_writer import JournalWriter
from daemon.service.stats import RunnerStats


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), "T1")
    yield j
    j.close()


def test_an_engine_error_alert_is_journaled_as_catalogued(journal: Journal) -> None:
    notified: list[bool] = []
    writer = JournalWriter(journal, RunnerStats(), lambda: 1_000.0, lambda: notified.append(True), lambda: 0)
    writer.raise_alert(AlertCode.ENGINE_ERROR, "the engine failed on a CardRead input", {"error": "boom"})
    [event] = journal.pending()
    assert event.kind == AlertEventKind.RAISED
    assert event.at == 1_000.0
    assert set(event.data) == set(ALERTS[AlertCode.ENGINE_ERROR].fields)
    assert IdScheme.ENGINE_ERROR.pattern.fullmatch(event.data["alert_id"])
    assert event.data["code"] == "engine_error"
    assert event.data["severity"] == "critical"
    assert event.data["error"] == "boom"
    assert notified == [True]


def test_an_alert_the_catalogue_does_not_describe_is_refused_before_the_journal(journal: Journal) -> None:
    writer = JournalWriter(journal, RunnerStats(), lambda: 1_000.0, lambda: None, lambda: 0)
    with pytest.raises(ValueError, match="not listed"):
        writer.raise_alert(AlertCode.ENGINE_ERROR, "m", {"error": "boom", "input": "CardRead"})
    assert journal.pending() == []
