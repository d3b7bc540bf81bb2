"""Watchdog gating on worker progress."""

from __future__ import annotations

from daemon.service.liveness import Liveness


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_all_progressing_until_one_worker_stalls() -> None:
    clock = _Clock()
    live = Liveness(stall_after=10.0, clock=clock)
    engine_beat = live.register_heartbeat("engine")
    reader_last = {"at": clock.now}
    live.register("reader", lambda: reader_last["at"])
    assert live.all_progressing()
    clock.now += 8
    engine_beat()
    reader_last["at"] = clock.now
    clock.now += 8
    assert live.all_progressing()
    clock.now += 5  # reader last seen 13 s ago, engine 13 s ago
    assert not live.all_progressing()
    engine_beat()
    stalled = [s.name for s in live.states() if s.stalled]
    assert stalled == ["reader"]
    assert "reader: last progress 13.0s ago" in [s.describe(clock.now) for s in live.states()]


def test_not_running_or_raising_probe_is_stalled() -> None:
    clock = _Clock()
    live = Liveness(stall_after=10.0, clock=clock)
    live.register("camera", lambda: None)
    assert not live.all_progressing()
    live.unregister("camera")

    def broken() -> float:
        raise RuntimeError("thread died")

    live.register("publisher", broken)
    assert [s.stalled for s in live.states()] == [True]
    live.unregister("publisher")
    assert live.all_progressing()
