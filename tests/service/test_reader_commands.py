"""lock/unlock on a table whose reader takes no host commands (an ASCII line reader).

The request is still journaled (the audit trail), the refusal comes back as a journaled
``reader_command_refused`` alert, and the supervisor's reply says why. In-process daemon,
real pty and mosquitto; the Angel Eye ACK/NAK/no-answer paths run in test_run_e2e.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from common.inputs import SupervisorCommand
from daemon.mqtt.command_channel import CommandAnswer
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from drivers.pty_device import PtyDevice
from tests.service.harness import dealt_shoe, write_config
from tests.support.broker import MosquittoBroker


@pytest.mark.mosquitto
def test_lock_without_a_commandable_reader_is_journaled_refused_and_alerted(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    config.write_text(config.read_text().replace('"driver": "angel_eye"', '"driver": "ascii_lines"'))
    daemon = Daemon(load_config(config, environ={}))
    daemon.start()
    replies: list[CommandAnswer] = []
    answered = threading.Event()

    def reply(answer: CommandAnswer) -> None:
        replies.append(answer)
        answered.set()

    try:
        daemon.submit_command(SupervisorCommand("lock", time.time(), "supervisor:test", "c-lock", {}), reply)
        assert answered.wait(10)
        assert replies == [{"accepted": False, "reason": "no configured reader accepts host commands"}]
        assert daemon.wait_until_processed(10)  # the refusal input queued before the reply
        assert daemon.journal is not None
        events = [(e.kind, e.data) for e in daemon.journal.events()]
    finally:
        daemon.stop()
        shoe.close()
    kinds = [kind for kind, _ in events]
    assert kinds.index("command_accepted") < kinds.index("reader_command_requested")
    [requested] = [data for kind, data in events if kind == "reader_command_requested"]
    assert requested["command_id"] == "c-lock"
    assert requested["actor"] == "supervisor:test"
    [alert] = [data for kind, data in events if data.get("code") == "reader_command_refused"]
    assert alert["details"]["command_id"] == "c-lock"
    assert "no configured reader accepts host commands" in alert["details"]["detail"]
    assert daemon.reader_commands.health()["running"] is False  # stopped with the daemon


class _StuckShoe:
    """A reader whose ``send_command`` blocks until released (a wedged serial write)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def send_command(self, type_code: str, data: int, *, timeout: float = 1.0) -> None:
        self.entered.set()
        self.release.wait(30)


def test_the_worker_reports_its_loop_turns_and_a_blocked_command_stops_them() -> None:
    from daemon.service.liveness import Liveness
    from daemon.service.reader_commands import IDLE_SLICE_S, ReaderCommandWorker, ReaderRequest

    shoe = _StuckShoe()
    submitted: list[Any] = []
    replies: list[Any] = []
    worker = ReaderCommandWorker(lambda: {"reader": shoe}, submitted.append, time.time)
    liveness = Liveness(stall_after=2 * IDLE_SLICE_S, clock=time.monotonic)
    liveness.register("reader_commands", worker.last_progress)
    assert worker.last_progress() is None  # not started
    worker.start()
    try:
        started = worker.last_progress()
        assert started is not None
        deadline = time.monotonic() + 10
        while (worker.last_progress() or 0.0) <= started:  # the idle loop turns by itself
            assert time.monotonic() < deadline, "the idle worker loop never turned"
            time.sleep(0.05)
        command = SupervisorCommand("lock", time.time(), "supervisor:test", "c-stuck", {})
        worker.request(ReaderRequest(command, lambda *a: replies.append(a), {"accepted": True}))
        assert shoe.entered.wait(10)
        blocked_at = worker.last_progress()
        while time.monotonic() - (blocked_at or 0.0) <= 2 * IDLE_SLICE_S:
            time.sleep(0.05)
        # its thread lives, but the loop has not turned: the watchdog withholds its ping
        assert worker.health()["running"] is True
        assert worker.last_progress() == blocked_at
        assert not liveness.all_progressing()
        shoe.release.set()
        deadline = time.monotonic() + 10
        while not replies:
            assert time.monotonic() < deadline, "no reply after the shoe was released"
            time.sleep(0.05)
        assert liveness.all_progressing()
        assert len(submitted) == 1  # the shoe gave no answer: a refusal input
    finally:
        shoe.release.set()
        worker.stop()
    assert worker.last_progress() is None  # stopped


@pytest.mark.mosquitto
def test_the_betting_window_locks_the_shoe_through_the_worker_and_alerts_when_it_cannot(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    """table.betting.lock_shoe (issue #12): the engine's own lock request is journaled, performed by
    the reader worker (here an Angel Eye on a pty that never answers), and the failure comes back
    as an input: shoe_not_locked. The server's open_betting is answered at once, not after it."""
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _ek, _ck = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    flow = '"table": {"game_flow": "betting_window", "betting": {"lock_shoe": true},'
    config.write_text(config.read_text().replace('"table": {', flow, 1))
    daemon = Daemon(load_config(config, environ={}))
    daemon.start()
    replies: list[CommandAnswer] = []
    answered = threading.Event()

    def reply(answer: CommandAnswer) -> None:
        replies.append(answer)
        answered.set()

    try:
        daemon.submit_command(
            SupervisorCommand("new_shoe", time.time(), "game_server:gs", "c-shoe", {}), lambda _answer: None
        )
        opening = SupervisorCommand(
            "open_betting", time.time(), "game_server:gs", "c-open", {"round_id": "1"}
        )
        daemon.submit_command(opening, reply)
        assert answered.wait(10)
        assert replies[0]["accepted"] is True
        deadline = time.monotonic() + 15
        events: list[tuple[str, dict[str, Any]]] = []
        while time.monotonic() < deadline:
            assert daemon.wait_until_processed(10)
            assert daemon.journal is not None
            events = [(e.kind, e.data) for e in daemon.journal.events()]
            if any(data.get("code") == "shoe_not_locked" for _, data in events):
                break
            time.sleep(0.1)
    finally:
        daemon.stop()
        shoe.close()
    [requested] = [data for kind, data in events if kind == "reader_command_requested"]
    assert requested == {"action": "lock", "command_id": "betting-1-lock", "actor": "game_flow"}
    [alert] = [data for kind, data in events if data.get("code") == "shoe_not_locked"]
    assert alert["details"]["command_id"] == "betting-1-lock"
    assert "no answer from the reader" in alert["details"]["reason"]
    assert not [data for _, data in events if data.get("code") == "reader_command_refused"]
