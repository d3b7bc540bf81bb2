"""Exactly once at the application: a shard member killed at every point around its
callback and its checkpoint commit (and by SIGKILL from outside) hands each event's effect
to the application once, in ``seq`` order per table. Real tables (journal, publisher, the
game server's acknowledgement on) deal throughout on a real mosquitto; the member runs in
its own process (:mod:`tests.fleet.member`) so that a kill is a real process death."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.fleet.shards import ShardConsumer
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.secrets import Secret
from tests.conftest import REPO_ROOT
from tests.fleet.bridged import Table, make_table, wait_until
from tests.fleet.member import KILLED, POINTS
from tests.fleet.synthetic import SyntheticTable
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

pytestmark = pytest.mark.mosquitto

# (point, pass at which the member dies): every point, early and later in a run
KILLS = [f"{point}:{n}" for n in (1, 7) for point in POINTS]


class Dealer:
    """Deals one event per table every ``every_s`` on a thread until stopped."""

    def __init__(self, tables: list[Table], every_s: float) -> None:
        self.tables, self.every_s = tables, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            for table in self.tables:
                table.deal(1)

    def __enter__(self) -> Dealer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def floor(tmp_path: Path) -> Iterator[tuple[MosquittoBroker, list[Table], Path]]:
    broker = MosquittoBroker(tmp_path / "broker", persistent=True).start()
    gs_key = write_secret(tmp_path / "gs-1.key", "the game server's key, long enough\n")
    tables = [make_table(tmp_path / f"T{n}", f"T{n}", broker.port, gs_key) for n in range(3)]
    try:
        yield broker, tables, gs_key
    finally:
        for table in tables:
            if table.publisher is not None:
                table.publisher.stop(timeout=2.0)
            table.journal.close()
        broker.stop()


def member(
    tmp_path: Path, port: int, tables: list[Table], gs_key: Path, kill_at: str | None
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tests.fleet.member", "--port", str(port)]
    command += ["--checkpoints", str(tmp_path / "checkpoints"), "--gs-key", str(gs_key)]
    for table in tables:
        command += ["--table", f"{table.table_id}={tmp_path / table.table_id / 'events.key'}"]
    if kill_at is not None:
        command += ["--kill-at", kill_at]
    return subprocess.Popen(command, cwd=REPO_ROOT)


def effects(checkpoints: Path, table_id: str) -> list[int]:
    """The seqs whose effect the application holds, in the order they were applied."""
    path = checkpoints / f"{table_id}.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'effects'").fetchone() is None:
            return []
        return [
            int(row[0])
            for row in db.execute("SELECT seq FROM effects WHERE table_id = ? ORDER BY n", (table_id,))
        ]


def test_a_member_killed_at_any_point_applies_each_event_once_in_order(
    tmp_path: Path, floor: tuple[MosquittoBroker, list[Table], Path]
) -> None:
    broker, tables, gs_key = floor
    checkpoints = tmp_path / "checkpoints"
    deaths: list[str] = []
    with Dealer(tables, every_s=0.03):
        for kill_at in KILLS:
            proc = member(tmp_path, broker.port, tables, gs_key, kill_at)
            assert proc.wait(60) == KILLED, kill_at
            deaths.append(kill_at)
        for _ in range(3):  # and from outside, wherever it happens to be
            proc = member(tmp_path, broker.port, tables, gs_key, None)
            time.sleep(1.5)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            deaths.append("SIGKILL")
    last = proc = member(tmp_path, broker.port, tables, gs_key, None)
    try:
        wait_until(
            lambda: all(
                t.journal.server_ack().seq == t.journal.last_seq() <= len(effects(checkpoints, t.table_id))
                for t in tables
            ),
            120,
            "every event applied and acknowledged",
        )
    finally:
        last.send_signal(signal.SIGTERM)
        assert last.wait(20) == 0
    assert len(deaths) == len(KILLS) + 3
    for table in tables:
        dealt = table.journal.last_seq()
        assert dealt == table.dealt > 100
        assert effects(checkpoints, table.table_id) == list(range(1, dealt + 1)), table.table_id


def test_a_callback_that_commits_the_transaction_or_raises_stops_the_member(tmp_path: Path) -> None:
    key = Secret(b"events-key-of-T0-long-enough", "test")
    ack_key = Secret(b"the game server's key, long enough", "test")

    def commits(_table: str, _envelope: dict[str, Any], db: sqlite3.Connection) -> None:
        db.commit()

    def raises(_table: str, _envelope: dict[str, Any], _db: sqlite3.Connection) -> None:
        raise ValueError("the settlement service is down")

    for name, callback in (("commits", commits), ("raises", raises)):
        with MosquittoBroker(tmp_path / name / "broker") as broker:
            member = ShardConsumer(
                "127.0.0.1",
                broker.port,
                ["T0"],
                0,
                1,
                keys={"T0": key},
                checkpoint_dir=tmp_path / name,
                ack_key_id="gs-1",
                ack_key=ack_key,
                on_event=callback,
            )
            member.start()
            wait_until(member.subscribed.is_set, 20, "the subscription")
            table = SyntheticTable("T0", key=key)
            publish(broker.port, [t for t in table.deal_card(time.time()) if t[0].endswith("/events")])
            wait_until(lambda: member.failure is not None, 20, "the member to stop")  # noqa: B023
            member.stop()
        assert "the application's callback failed" in (member.failure or ""), name
        # nothing was committed past the failure: a new member starts from nothing
        assert Checkpoint(tmp_path / name / "T0.sqlite3", "T0").committed.seq == 0


def publish(port: int, messages: list[tuple[str, bytes, bool]]) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        for topic, payload, retain in messages:
            client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()
