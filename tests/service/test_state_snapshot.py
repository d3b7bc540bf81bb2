"""The retained-state snapshot: a snapshot that fails keeps the previous one, and the engine
thread (dealing) goes on."""

from __future__ import annotations

import pytest

from daemon.service.state_snapshot import StateSnapshot
from tests.engine.support import engine


def test_a_failing_snapshot_keeps_the_previous_one(monkeypatch: pytest.MonkeyPatch) -> None:
    table = engine()
    snapshots = StateSnapshot(interval_s=0.0)
    snapshots.reset(table)
    before = snapshots.get()
    assert before  # a real snapshot

    def broken() -> dict[str, object]:
        raise RuntimeError("engine bug in snapshot")

    monkeypatch.setattr(table, "snapshot", broken)
    snapshots.mark_stale()
    snapshots.refresh_if_due(table)  # must not raise on the engine thread
    assert snapshots.get() is before
