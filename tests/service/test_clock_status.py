"""The clock status source and its watch (issue 24 item 4): polled into the engine as a
``ClockStatus`` input on a change only, a broken source taken as unsynchronised, the measured
command skew and the sync state in health (fitting the contract), the real sources' parsing, and
the clock gate end to end: engine events from a faked source fit the event schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.inputs import ClockStatus, EngineInput, SupervisorCommand
from daemon.engine import Engine, TableSettings
from daemon.journal import Journal, JournalSettings
from daemon.mqtt.envelope import event_payload
from daemon.mqtt.secrets import Secret
from daemon.rules.variants import load_variant_by_name
from daemon.service.clock_status import (
    AdjtimexSource,
    ClockReading,
    ClockSettings,
    ClockSourceName,
    ClockWatch,
    TimedatectlSource,
    clock_source,
)
from daemon.service.config import ServiceSettings
from tests.mqtt.support import validate_payload


class FakeSource:
    """A clock status source the test sets."""

    name = "fake"

    def __init__(self, *readings: ClockReading | Exception) -> None:
        self.readings = list(readings)

    def read(self) -> ClockReading:
        reading = self.readings.pop(0)
        if isinstance(reading, Exception):
            raise reading
        return reading


def watch(source: FakeSource | None, sent: list[ClockStatus], poll_s: float = 10.0) -> ClockWatch:
    return ClockWatch(
        source,
        sent.append,
        settings=ClockSettings(source=ClockSourceName.ADJTIMEX, poll_s=poll_s),
        max_skew_s=1.0,
        clock_gate=True,
        clock=lambda: 1000.0,
    )


def test_a_change_of_state_goes_to_the_engine_once() -> None:
    sent: list[ClockStatus] = []
    w = watch(FakeSource(ClockReading(True, "a"), ClockReading(True, "b"), ClockReading(False, "lost")), sent)
    w.poll(0.0)
    w.poll(5.0)  # within poll_s: not read
    w.poll(10.0)
    w.poll(20.0)
    assert sent == [ClockStatus(True, 1000.0, "fake", "a"), ClockStatus(False, 1000.0, "fake", "lost")]
    health = w.health()
    assert health["synchronised"] is False
    assert health["detail"] == "lost"
    assert health["checked_at"] == 1000.0


def test_a_source_that_raises_is_an_unsynchronised_clock() -> None:
    sent: list[ClockStatus] = []
    w = watch(FakeSource(OSError("no libc")), sent)
    w.poll(0.0)
    assert sent == [ClockStatus(False, 1000.0, "fake", "fake failed: no libc")]


def test_no_source_sends_nothing_and_health_says_unknown() -> None:
    sent: list[ClockStatus] = []
    w = ClockWatch(None, sent.append, settings=ClockSettings(), max_skew_s=1.0, clock_gate=True)
    w.poll(0.0)
    assert sent == []
    assert w.health()["source"] == "none"
    assert w.health()["synchronised"] is None


def test_health_reports_the_last_commands_measured_skew_and_fits_the_contract() -> None:
    w = watch(FakeSource(ClockReading(True, "maxerror 1 ms")), [])
    w.poll(0.0)
    w.note_command(SupervisorCommand("close_betting", 20.5, "gs", "c1", {"round_id": "1"}, 20.0))
    w.note_command(SupervisorCommand("void_round", 21.0, "sup", "c2", {}))  # no issued time: not a sample
    health = w.health()
    assert health == {
        "source": "adjtimex",
        "synchronised": True,
        "detail": "maxerror 1 ms",
        "checked_at": 1000.0,
        "command_skew_s": 0.5,
        "command_action": "close_betting",
        "max_skew_s": 1.0,
        "clock_gate": True,
    }
    from tests.mqtt.test_contract import _ENGINE_HEALTH, _health_with

    validate_payload("x/health", _health_with({"engine": {**_ENGINE_HEALTH, "clock": dict(health)}}))


def test_the_adjtimex_source_reads_the_kernel_without_privilege() -> None:
    reading = AdjtimexSource().read()  # whatever this machine's state: a reading, with its error bound
    assert isinstance(reading.synchronised, bool)
    assert reading.detail is not None
    assert "maxerror" in reading.detail


def test_the_timedatectl_source_parses_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "timedatectl"
    script.write_text('#!/bin/sh\n[ "$*" = "show -p NTPSynchronized --value" ] && echo "$ANSWER"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("ANSWER", "yes")
    assert TimedatectlSource().read() == ClockReading(True, "NTPSynchronized=yes")
    monkeypatch.setenv("ANSWER", "no")
    assert TimedatectlSource().read() == ClockReading(False, "NTPSynchronized=no")
    monkeypatch.setenv("ANSWER", "maybe")
    assert TimedatectlSource().read().synchronised is False


def test_the_configured_source_is_built() -> None:
    assert clock_source(ClockSettings()) is None
    assert isinstance(clock_source(ClockSettings(source=ClockSourceName.ADJTIMEX)), AdjtimexSource)
    assert ServiceSettings().clock.source is ClockSourceName.NONE
    with pytest.raises(ValueError, match="source"):
        ServiceSettings.model_validate({"clock": {"source": "ntp"}})


def test_the_clock_gates_events_from_a_faked_source_fit_the_event_schema(tmp_path: Path) -> None:
    sent: list[ClockStatus] = []
    w = watch(FakeSource(ClockReading(False, "TIME_ERROR"), ClockReading(True, "ok")), sent)
    engine = Engine(
        TableSettings.model_validate({"game_flow": "betting_window"}), load_variant_by_name("standard")
    )
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), "T1")
    key = Secret(b"k", "test")
    kinds: list[str] = []

    def run(inp: EngineInput) -> None:
        for journaled in journal.append([inp], engine.handle(inp)):
            validate_payload("baccarat/v1/T1/events", event_payload(journaled, "T1", 1_764_400_000.5, key))
            kinds.append(journaled.data.get("code") or journaled.kind)

    run(SupervisorCommand("new_shoe", 1.0, "sup", "n", {"shoe_id": "S1"}))
    w.poll(0.0)
    run(sent[-1])
    run(SupervisorCommand("open_betting", 1001.0, "gs", "o", {"round_id": "1"}, 1000.9))
    w.poll(10.0)
    run(sent[-1])
    run(SupervisorCommand("open_betting", 1002.0, "gs", "o2", {"round_id": "1"}, 1001.9))
    journal.close()
    assert [k for k in kinds if k.startswith("clock") or k.startswith("betting")] == [
        "clock_status",
        "clock_unsynchronised",
        "clock_gate_closed",
        "clock_status",
        "clock_unsynchronised",
        "betting_opened",
        "clock_gate_closed",
    ]
    assert json.loads(json.dumps(w.health()))["synchronised"] is True
