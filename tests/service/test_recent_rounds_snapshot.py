"""The retained snapshot's ``recent_rounds``: fed the journaled events, seeded from the journal's
tail, and a journal that cannot be read for it never stops the snapshot."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from daemon.engine.events import Event
from daemon.journal.records import JournaledEvent
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.mqtt.contract import load_schema
from daemon.service.state_snapshot import StateSnapshot
from tests.engine.support import engine, feed, read, start_shoe

NATURAL = ("9s", "2h", "Kc", "3d")
_SNAPSHOT = jsonschema.Draft202012Validator(
    {"$defs": load_schema("state")["$defs"], "$ref": "#/$defs/snapshot"}
)


def _journaled(events: list[Event]) -> list[JournaledEvent]:
    return [
        JournaledEvent(n, f"e{n}", e.kind, e.at, e.shoe_id, e.hand, e.source, e.data, "engine", e.at)
        for n, e in enumerate(events, 1)
    ]


def test_journaled_events_reach_the_snapshot_and_keep_the_contracts_shape() -> None:
    table = engine()
    snapshots = StateSnapshot(interval_s=0.0)
    events = start_shoe(table) + feed(table, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    events += feed(table, [read("8d", 200)])
    snapshots.observe(_journaled(events))
    snapshots.reset(table)
    state = snapshots.get()
    _SNAPSHOT.validate(state)
    assert [(r["hand"], r["status"]) for r in state["recent_rounds"]] == [
        (1, "completed"),
        (2, "in_progress"),
    ]
    assert state["recent_rounds"][-1]["cards"] == {"P1": "8d"}


def test_seeded_from_the_journal_then_fed_on(tmp_path: Path) -> None:
    table = engine()
    first = start_shoe(table) + feed(table, [read(c, 100 + k) for k, c in enumerate(NATURAL)])
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], first)
    journal.close()
    snapshots = StateSnapshot(interval_s=0.0)
    snapshots.seed_rounds(path)
    snapshots.observe(_journaled(feed(table, [read("8d", 200)])))
    snapshots.reset(table)
    assert [r["hand"] for r in snapshots.get()["recent_rounds"]] == [1, 2]


def test_a_journal_that_cannot_be_read_leaves_the_recall_empty(tmp_path: Path) -> None:
    junk = tmp_path / "journal.sqlite3"
    junk.write_bytes(b"garbage, not SQLite\n")
    snapshots = StateSnapshot(interval_s=0.0)
    snapshots.seed_rounds(junk)
    snapshots.reset(engine())
    assert snapshots.get()["recent_rounds"] == []


def test_a_failing_recall_never_stops_the_engine_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshots = StateSnapshot(interval_s=0.0)

    def broken(_event: object) -> None:
        raise RuntimeError("recall bug")

    monkeypatch.setattr(snapshots.recall, "add", broken)
    table = engine()
    snapshots.observe(_journaled(start_shoe(table) + feed(table, [read("9s", 100)])))  # must not raise
    snapshots.reset(table)
    assert snapshots.get()["recent_rounds"] == []
