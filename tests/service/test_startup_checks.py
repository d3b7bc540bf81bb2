"""The publishing gate: nothing before the start-up checks ran, nothing after an integrity hold."""

from __future__ import annotations

from daemon.service.startup_checks import STAGES, PublishGate


def test_nothing_is_published_until_every_start_up_check_ran() -> None:
    gate = PublishGate()
    assert gate.health() == {"stage": "config", "passed": [], "failed": []}
    for stage in STAGES:
        gate.begin(stage)
        assert gate.held_after() == 0
        assert gate.health()["stage"] == stage
        gate.passed(stage)
    gate.startup_done()
    assert gate.held_after() is None
    assert gate.health() == {"stage": "done", "passed": list(STAGES), "failed": []}


def test_an_integrity_hold_keeps_back_what_follows_its_alert_until_released() -> None:
    gate = PublishGate()
    gate.begin("attestation")
    gate.fail("attestation")
    gate.hold_integrity(41)  # the alert's own seq: it and everything before it may go out
    assert gate.held_after() == 41
    gate.startup_done()
    assert gate.held_after() == 41
    assert gate.health()["failed"] == ["attestation"]
    gate.hold_integrity(None)
    assert gate.held_after() is None
