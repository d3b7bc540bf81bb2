"""SIGKILL the daemon anywhere in a replayed shoe, restart it: the consumer sees every event
exactly once after dedup by event_id, the same stream as an uninterrupted run.

The shoe is a generated Angel Eye fixture replayed through the real serial driver once to
get its engine inputs; the runner (tests/mqtt/runner.py) is real engine + journal + publisher.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.engine.inputs import EngineInput
from daemon.journal.codec import dumps_input
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.secrets import Secret
from tests.conftest import REPO_ROOT
from tests.mqtt.support import Subscriber, validate_payload
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto

TRIALS = 8
TABLE = "T1"
STABLE_FIELDS = ("seq", "kind", "shoe_id", "hand", "ts", "source", "data")


@pytest.fixture(scope="module")
def shoe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """Inputs (journal codec JSON lines) and table settings of one short generated shoe."""
    from drivers.replay import replay_fixture
    from drivers.simulate import DealSettings, FaultSpec, make_fixture

    deal = DealSettings(decks=8, seed=20261129, max_hands=30)
    faults = [FaultSpec.parse("double_pull@3"), FaultSpec.parse("misread@5"), FaultSpec.parse("repeats@7")]
    fixture = make_fixture("crash-shoe", "angel_eye", deal, faults)
    inputs: list[EngineInput] = []
    replay_fixture(fixture, inputs.append)
    folder = tmp_path_factory.mktemp("shoe")
    inputs_path = folder / "inputs.jsonl"
    inputs_path.write_text("".join(dumps_input(i) + "\n" for i in inputs))
    settings_path = folder / "table.json"
    settings_path.write_text(json.dumps(fixture.header.table))
    return inputs_path, settings_path, len(inputs)


def runner(
    journal: Path, port: int, shoe: tuple[Path, Path, int], key: Path, delay: float
) -> subprocess.Popen[bytes]:
    inputs, settings, _ = shoe
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.mqtt.runner",
            "--journal",
            str(journal),
            "--port",
            str(port),
            "--inputs",
            str(inputs),
            "--table-settings",
            str(settings),
            "--events-key",
            str(key),
            "--delay",
            str(delay),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def run_to_completion(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")


def collect(sub: Subscriber, key: Secret, total: int) -> tuple[list[dict[str, Any]], EventConsumer]:
    sub.wait_for(lambda msgs: len({json.loads(m.payload)["seq"] for m in msgs}) >= total, timeout=60)
    time.sleep(0.2)  # any trailing redelivery
    consumer = EventConsumer(TABLE, key=key, require_signature=True)
    stream: list[dict[str, Any]] = []
    for message in list(sub.messages):
        envelope = validate_payload(message.topic, message.payload)
        result = consumer.feed(message.payload)
        assert result.verdict in (Verdict.NEW, Verdict.DUPLICATE), result.reason
        if result.verdict is Verdict.NEW:
            stream.append({k: envelope[k] for k in STABLE_FIELDS})
    return stream, consumer


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    store = tmp_path / "persist"
    store.mkdir()
    b = MosquittoBroker(
        tmp_path / "broker",
        extra_config=f"persistence true\npersistence_location {store}/\nuser {getpass.getuser()}",
    )
    b.start()
    yield b
    b.stop()


def journaled_inputs(path: Path) -> int:
    """Inputs committed so far, read through a separate SQLite connection (WAL readers do
    not block the writer)."""
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0) as db:
            row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'inputs'").fetchone()
    except sqlite3.OperationalError:
        return 0  # the runner is still creating the file
    return 0 if row is None else int(row[0])


def kill_at(proc: subprocess.Popen[bytes], journal: Path, target: int, timeout: float = 60.0) -> int:
    """SIGKILL the runner as soon as the journal holds ``target`` inputs; return the count seen."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and journaled_inputs(journal) < target:
        assert time.monotonic() < deadline, "runner made no progress"
        time.sleep(0.002)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    if proc.stderr:
        proc.stderr.close()
    return journaled_inputs(journal)


DELAY = 0.003  # seconds between inputs, so the publisher is mid-drain when the kill lands


def test_sigkill_anywhere_then_restart_delivers_the_same_stream_exactly_once(
    broker: MosquittoBroker,
    tmp_path: Path,
    shoe: tuple[Path, Path, int],
    keys: dict[str, Path],
    events_key: Secret,
) -> None:
    n_inputs = shoe[2]
    # Reference: one uninterrupted run.
    sub = Subscriber(broker.port, [f"baccarat/v1/{TABLE}/events"], client_id="ref-server", clean=False)
    run_to_completion(runner(tmp_path / "reference.sqlite3", broker.port, shoe, keys["events"], DELAY))
    from daemon.journal import Journal, JournalSettings

    reference_journal = Journal(JournalSettings(path=tmp_path / "reference.sqlite3"), TABLE)
    total = reference_journal.last_seq()
    reference_journal.close()
    assert total > 100
    reference, _ = collect(sub, events_key, total)
    sub.close()
    assert [e["seq"] for e in reference] == list(range(1, total + 1))

    rng = random.Random(5)
    mid_shoe_kills = 0
    for trial in range(TRIALS):
        journal = tmp_path / f"trial-{trial}.sqlite3"
        sub = Subscriber(
            broker.port, [f"baccarat/v1/{TABLE}/events"], client_id=f"server-{trial}", clean=False
        )
        for _ in range(rng.randint(1, 3)):
            done = journaled_inputs(journal)
            if done >= n_inputs - 1:
                break
            target = rng.randint(done + 1, n_inputs - 1)  # a random point of the rest of the shoe
            proc = runner(journal, broker.port, shoe, keys["events"], DELAY)
            if 0 < kill_at(proc, journal, target) < n_inputs:
                mid_shoe_kills += 1
        run_to_completion(runner(journal, broker.port, shoe, keys["events"], 0.0))
        stream, consumer = collect(sub, events_key, total)
        sub.close()
        assert stream == reference, f"trial {trial}: stream differs from the uninterrupted run"
        assert consumer.stats.new == total
        assert consumer.stats.out_of_order == 0
        assert consumer.unexplained_gaps == []
    assert mid_shoe_kills >= TRIALS  # the daemon really was killed inside the shoe, repeatedly
