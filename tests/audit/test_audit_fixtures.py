"""The committed shoe-certificate fixtures (``hw-fixtures/angel_eye-cert-*``): what the library
generates, and what each expected stream must hold. (Their replay is checked with every
committed fixture by ``tests/fixtures/test_golden.py``.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.alerts import AlertCode
from daemon.simulation.audit_library import AUDIT_LIBRARY, AuditEntry, Count
from daemon.simulation.dealer import plan_shoe
from drivers.fixtures import EXPECTED_SUFFIX, FIXTURE_SUFFIX
from tests.conftest import REPO_ROOT
from tests.engine.support import assert_engine_alert_as_catalogued

FIXTURE_DIR = REPO_ROOT / "hw-fixtures"


def expected(entry: AuditEntry) -> list[dict[str, Any]]:
    path = FIXTURE_DIR / f"{entry.name}{EXPECTED_SUFFIX}"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("entry", AUDIT_LIBRARY, ids=lambda e: e.name)
def test_committed_fixture_is_what_the_library_generates(entry: AuditEntry, tmp_path: Path) -> None:
    fresh = tmp_path / f"{entry.name}{FIXTURE_SUFFIX}"
    entry.fixture().save(fresh)
    assert fresh.read_bytes() == (FIXTURE_DIR / fresh.name).read_bytes()


@pytest.mark.parametrize("entry", AUDIT_LIBRARY, ids=lambda e: e.name)
def test_each_certificate_fixture_accounts_for_the_shoe_as_dealt(entry: AuditEntry) -> None:
    events = expected(entry)
    kinds = [e["kind"] for e in events]
    ended = kinds.index("shoe_ended")
    end = events[ended + 1]
    assert end["kind"] == "shoe_certificate"
    assert (end["data"]["stage"], end["data"]["status"]) == ("end", "not_counted")
    plan = plan_shoe(entry.deal, entry.faults)
    totals = end["data"]["certificate"]["totals"]
    assert (totals["seen"], totals["left"]) == (plan.cards_used, len(plan.remaining))
    certificates = [e["data"] for e in events if e["kind"] == "shoe_certificate"]
    mismatch = [
        e["data"]
        for e in events
        if e["kind"] == "alert_raised" and e["data"]["code"] == "shoe_count_mismatch"
    ]
    assert not [
        e
        for e in events
        if e["kind"] == "alert_raised" and e["data"]["code"] != AlertCode.SHOE_COUNT_MISMATCH
    ]
    if entry.count is Count.NONE:
        assert len(certificates) == 1
        assert not mismatch
        return
    counted = [e["data"]["card"] for e in events if e["kind"] == "remainder_card"]
    last = certificates[-1]
    assert last["stage"] == "remainder"
    assert last["certificate"]["totals"]["remainder"] == len(counted)
    left = [c.code for c in plan.remaining]
    if entry.count is Count.WHOLE:
        assert counted == left
        assert last["status"] == "balanced"
        assert last["certificate"]["totals"]["accounted"] == 52
        assert not mismatch
        return
    (alert,) = mismatch
    assert_engine_alert_as_catalogued(alert)
    assert last["status"] == "mismatch"
    if entry.count is Count.ONE_SHORT:
        lost = left[len(left) // 2]
        assert sorted([*counted, lost]) == sorted(left)
        assert alert["details"]["missing"] == last["certificate"]["missing"] == [{"card": lost, "copies": 1}]
        assert alert["details"]["extra"] == []
    else:
        (foreign,) = [c for c in set(counted) if counted.count(c) > left.count(c)]
        assert alert["details"]["extra"] == last["certificate"]["extra"] == [{"card": foreign, "copies": 1}]
        assert alert["details"]["missing"] == []
        assert last["certificate"]["totals"]["accounted"] == 52


def test_the_library_has_each_certificate_case() -> None:
    assert {e.count for e in AUDIT_LIBRARY} == set(Count)
