"""A journal that cannot grow (SQLite's "database or disk is full"): the daemon keeps running.

SQLite's ``max_page_count`` makes the journal fail exactly like a full disk does (SQLITE_FULL),
without filling the machine's disk. The engine must not keep state the journal did not store:
it is rebuilt from the journal after each failed write, the failures show in the published
health, and dealing resumes when there is room again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from daemon.cards import ALL_CARDS
from daemon.engine.events import Event
from daemon.engine.inputs import CardRead, SupervisorCommand
from daemon.engine.table import Engine
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from drivers.pty_device import PtyDevice
from tests.service.harness import TableSubscriber, dealt_shoe, write_config
from tests.support.broker import MosquittoBroker


@pytest.mark.mosquitto
def test_disk_full_journal_keeps_the_daemon_running_and_shows_in_health(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    daemon = Daemon(load_config(config, environ={}))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon.start()
    replies: list[object] = []
    answered = threading.Event()

    def reply(result: object, reason: object = None) -> None:
        replies.append(result)
        answered.set()

    try:
        daemon.submit_command(SupervisorCommand("new_shoe", time.time(), "supervisor:test", "c-1"), reply)
        assert answered.wait(10)
        assert replies[0]["accepted"] is True  # type: ignore[index]
        assert daemon.journal is not None
        db = daemon.journal._db  # the journal's own connection: the limit applies to its writes
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")
        # deal until the journal cannot take more (new rows first fill the pages' free space)
        for index in range(400):
            daemon.submit(CardRead(ALL_CARDS[(index * 7) % 52], time.time()))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not daemon.queue.empty():
            time.sleep(0.05)
        time.sleep(0.3)  # the last input in the engine thread
        errors = daemon.stats.journal_errors
        assert errors > 0
        assert not daemon.engine_done.is_set()  # the engine thread lives on
        # the engine holds nothing the journal did not store
        durable = Engine.restore(daemon.config.table, daemon.loaded.variant,
                                 [Event.from_dict(e.body) for e in daemon.journal.events()])  # fmt: skip
        assert daemon.engine.snapshot() == durable.snapshot()
        assert subscriber.wait_for(
            lambda s: s.health is not None and s.health["devices"]["engine"]["journal_errors"] >= errors, 15
        )
        db.execute("PRAGMA max_page_count = 1073741823")  # room again
        seq_before = daemon.journal.last_seq()
        daemon.submit(
            SupervisorCommand("void_shoe", time.time(), "supervisor:test", "c-2", {"reason": "test"})
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and daemon.journal.last_seq() == seq_before:
            time.sleep(0.05)
        assert daemon.journal.last_seq() > seq_before  # journaling again
        assert daemon.stats.journal_errors == errors
    finally:
        daemon.stop()
        subscriber.stop()
        shoe.close()
