"""A journal that cannot grow (SQLite's "database or disk is full"): nothing is dropped; and a
real file system that fills up: the reserve goes to the appends, compaction frees the rest.

SQLite's ``max_page_count`` makes the journal fail exactly like a full disk does (SQLITE_FULL),
without filling the machine's disk. While it fails, the engine thread retries the same append
with backoff, every input read meanwhile waits in the queue, the published health says
``journal_failing`` with the inputs waiting; when there is room again every input is stored in
the order it arrived and the engine holds exactly what the journal holds.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.cards import ALL_CARDS
from common.inputs import CardRead, SupervisorCommand, Tick
from daemon.engine.events import Event
from daemon.engine.table import Engine
from daemon.journal import DeliveryEvent, Journal, JournalSettings, appending
from daemon.journal.compaction import truncate_wal
from daemon.journal.integrity import verify_journal
from daemon.journal.reserve import free_bytes
from daemon.mqtt.settings import DeliverySettings
from daemon.service.config import load_config
from daemon.service.journal_housekeeping import JournalHousekeeping
from daemon.service.runner import Daemon
from drivers.pty_device import PtyDevice
from tests.service.harness import TableSubscriber, contract_violations, dealt_shoe, write_config
from tests.support.broker import MosquittoBroker
from tests.support.clock import DAY, Clock

CARDS = 300


def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.mosquitto
def test_full_disk_holds_every_input_until_the_journal_takes_it(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    daemon = Daemon(load_config(config, environ={}))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon.start()
    try:
        daemon.submit(SupervisorCommand("new_shoe", time.time(), "supervisor:test", "c-1", {}))
        assert daemon.wait_until_processed(10)
        assert daemon.journal is not None
        db = daemon.journal._db  # the journal's own connection: the limit applies to its writes
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")
        dealt = [ALL_CARDS[(index * 7) % 52] for index in range(CARDS)]
        for card in dealt:  # new rows first fill the pages' free space, then the journal fails
            daemon.submit(CardRead(card, time.time()))
        _until(lambda: daemon.health()["engine"]["journal_failing"], 30, "the journal to fail")
        # A retry may still squeeze a row into space another write freed: read the queue and
        # the journal until no append landed in between and the journal was failing (between a
        # successful retry and the next failure the next input is out of the queue but not
        # yet counted as being retried).
        journal = daemon.journal
        samples: list[tuple[int, int]] = []

        def consistent_sample() -> bool:
            before = journal.input_count()
            engine = daemon.health()["engine"]
            cards_stored = sum(1 for _, inp in journal.inputs() if isinstance(inp, CardRead))
            if journal.input_count() != before or not engine["journal_failing"]:
                return False
            samples.append((cards_stored, int(engine["inputs_waiting"])))
            return True

        _until(consistent_sample, 30, "a reading with no append in between")
        stored, waiting = samples[-1]
        assert 0 < stored < CARDS
        # Nothing dropped: every card not stored waits (being retried or queued). The input
        # being retried may be a clock tick the idle engine thread made between two cards.
        assert CARDS - stored <= waiting <= CARDS - stored + 1
        assert not daemon.engine_done.is_set()
        assert subscriber.wait_for(
            lambda s: s.health is not None and s.health["devices"]["engine"]["journal_failing"] is True, 15
        )
        db.execute("PRAGMA max_page_count = 1073741823")  # room again
        assert daemon.wait_until_processed(30)
        assert daemon.health()["engine"]["journal_failing"] is False
        assert daemon.health()["engine"]["inputs_waiting"] == 0
        # every card stored once, in the order it was read
        journaled = [inp for _, inp in daemon.journal.inputs() if isinstance(inp, CardRead)]
        assert [c.card for c in journaled] == dealt
        # the engine holds exactly what the journal holds
        durable = Engine.restore(daemon.config.table, daemon.loaded.variant,
                                 [Event.from_dict(e.body) for e in daemon.journal.events()])  # fmt: skip
        assert daemon.engine.snapshot() == durable.snapshot()
        last_seq = daemon.journal.last_seq()
        assert subscriber.wait_for(lambda s: bool(s.events) and s.sorted_events()[-1]["seq"] == last_seq, 30)
        assert subscriber.consumer.unexplained_gaps == []
        # the outage reached the stream (a row squeezing through may split it into several)
        reports = [e for e in subscriber.events if e["data"].get("code") == "journal_recovered"]
        assert reports
        assert all(0 < r["data"]["inputs_waited"] <= CARDS for r in reports)
    finally:
        daemon.stop()
        subscriber.stop()
        shoe.close()


@pytest.mark.mosquitto
def test_stopping_with_a_failing_journal_logs_every_input_it_could_not_store(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, _events_key, _command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    loaded = load_config(config, environ={}, overrides={("service", "shutdown_timeout_s"): 1.0})
    daemon = Daemon(loaded)
    daemon.start()
    try:
        daemon.submit(SupervisorCommand("new_shoe", time.time(), "supervisor:test", "c-1", {}))
        assert daemon.wait_until_processed(10)
        assert daemon.journal is not None
        db = daemon.journal._db
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")
        for index in range(CARDS):
            daemon.submit(CardRead(ALL_CARDS[(index * 7) % 52], time.time()))
        _until(lambda: daemon.health()["engine"]["journal_failing"], 30, "the journal to fail")
    finally:
        daemon.stop()  # retries for half the shutdown timeout, then gives up, loudly
        shoe.close()
    assert daemon.engine_done.is_set()
    # every card the journal did not store is counted (and logged) as lost; the input being
    # retried when shutdown gave up may also be a clock tick the idle engine thread made
    db = sqlite3.connect(f"file:{loaded.config.journal.path}?mode=ro", uri=True)
    try:
        (stored,) = db.execute("SELECT count(*) FROM inputs WHERE type = 'CardRead'").fetchone()
    finally:
        db.close()
    assert 0 < stored < CARDS
    assert CARDS - stored <= daemon.stats.inputs_not_stored <= CARDS - stored + 1


@pytest.mark.mosquitto
def test_a_journal_outage_is_reported_in_the_event_stream_once_it_is_over(
    tmp_path: Path, mosquitto: MosquittoBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the journal fails nothing can be journaled, so the stream cannot say so; once it
    works again one ``journal_recovered`` alert tells the server and the auditors how long it
    failed and how many inputs waited. Here every append fails with SQLite's own "database
    or disk is full" until the test lets it through (the test above shows the real SQLITE_FULL,
    where a row may squeeze through now and then: this count must be exact)."""
    deal, _plan, _steps = dealt_shoe(seed=2, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    daemon = Daemon(load_config(config, environ={}))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    cards = 40
    daemon.start()
    try:
        daemon.submit(SupervisorCommand("new_shoe", time.time(), "supervisor:test", "c-1", {}))
        assert daemon.wait_until_processed(10)
        assert daemon.journal is not None
        journal = daemon.journal
        seq_before = journal.last_seq()
        failing = threading.Event()
        write_rows = appending.write_rows

        def full_disk(*args: Any, **kwargs: Any) -> str:
            if failing.is_set():
                raise sqlite3.OperationalError("database or disk is full")
            return write_rows(*args, **kwargs)

        monkeypatch.setattr(appending, "write_rows", full_disk)
        failing.set()
        for index in range(cards):
            daemon.submit(CardRead(ALL_CARDS[(index * 7) % 52], time.time()))
        _until(lambda: daemon.health()["engine"]["journal_failing"], 30, "the journal to fail")
        # The cards, plus any clock tick the daemon queued meanwhile.
        assert daemon.health()["engine"]["inputs_waiting"] >= cards
        assert journal.last_seq() == seq_before  # nothing stored, nothing to publish
        inputs_before = journal.input_count()
        failing.clear()
        assert daemon.wait_until_processed(30)
        stored = list(journal.events(after_seq=seq_before, origin=None))
        reports = [e for e in stored if e.data.get("code") == "journal_recovered"]
        assert len(reports) == 1
        [report] = reports
        assert report.kind == "alert_raised"
        assert report.data["inputs_waited"] >= cards
        # every card that waited was stored once it could be, in the order it was read
        stored_cards = [inp.card for _, inp in journal.inputs() if isinstance(inp, CardRead)][-cards:]
        assert stored_cards == [ALL_CARDS[(index * 7) % 52] for index in range(cards)]
        assert journal.input_count() - inputs_before >= cards
        assert report.data["spells"] == 1
        assert report.data["failed_appends"] >= 1
        assert report.data["failed_for_s"] > 0
        assert report.data["error"] == "database or disk is full"
        # Written right after the first input that got through (a card, or a clock tick with no
        # events of its own): at most that one card is dealt before the report.
        assert sum(1 for e in stored if e.kind == "card_dealt" and e.seq < report.seq) <= 1
        assert any(e.kind == "card_dealt" and e.seq > report.seq for e in stored)
        assert subscriber.wait_for(
            lambda s: any(e["data"].get("code") == "journal_recovered" for e in s.events), 30
        )
        assert subscriber.wait_for(
            lambda s: bool(s.events) and s.sorted_events()[-1]["seq"] == journal.last_seq(), 30
        )
    finally:
        daemon.stop()
        subscriber.stop()
        shoe.close()
    published = next(e for e in subscriber.events if e["data"].get("code") == "journal_recovered")
    assert published["event_id"] == report.event_id
    assert contract_violations(subscriber.payloads) == []
    assert subscriber.consumer.unexplained_gaps == []


# -- a real small file system that fills up --------------------------------------------------

MiB = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs mounted for the test (the tests run as root), unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill_disk(path: Path) -> int:
    """Write zeros to ``path`` until the file system is full; bytes written."""
    written = 0
    chunk = bytes(64 * 1024)
    with path.open("wb", buffering=0) as out:
        while True:
            try:
                written += out.write(chunk)
            except OSError:
                break
        with contextlib.suppress(OSError):
            os.fsync(out.fileno())
    for size in (4096, 512, 1):  # the last crumbs
        try:
            with path.open("ab", buffering=0) as out:
                while True:
                    written += out.write(bytes(size))
        except OSError:
            continue
    return written


def _old_card(shoe: str, n: int) -> DeliveryEvent:
    return DeliveryEvent(kind="card_dealt", at=float(n), data={"n": n, "pad": "x" * 300}, shoe_id=shoe)


def test_a_full_disk_gives_the_reserve_to_the_appends_and_compaction_frees_more(small_disk: Path) -> None:
    clock = Clock(1_800_000_000.0)
    journal = Journal(
        JournalSettings(path=small_disk / "journal.sqlite3", audit_retention_days=1, size_check_interval_s=1),
        "T-DISK",
        clock=clock,
    )
    settings = DeliverySettings(health_interval_s=1.0, compact_interval_s=3600.0)
    keeper = JournalHousekeeping(
        journal, lambda: settings, clock, lambda: None, low_space_bytes=16 * MiB, reserve_bytes=2 * MiB
    )
    try:
        for shoe in range(12):  # ~8 MB of delivered events of finished shoes
            for start in range(0, 1000, 100):
                journal.append(
                    [Tick(float(start))] * 100,
                    [_old_card(f"old{shoe}", n) for n in range(start, start + 100)],
                )
        journal.mark_delivered(range(1, journal.last_seq() + 1))
        clock.now += 2 * DAY  # past the retention: all of it may go
        journal.append([], [_old_card("current", 0)])
        keeper.run(0.0)  # the first run writes the reserve (on its own thread)
        _until(lambda: keeper.reserve.held() == 2 * MiB, 10, "the reserve to be written")
        truncate_wal(journal._db, threading.RLock())  # the WAL empty: the next append must grow it
        size_before = journal.size_bytes()
        assert size_before > 6 * MiB
        _fill_disk(small_disk / "filler")
        assert free_bytes(small_disk) < 64 * 1024
        with pytest.raises(sqlite3.OperationalError, match="full"):
            journal.append([Tick(1.0)] * 40, [_old_card("current", n) for n in range(1, 41)])

        keeper.run(1.0)  # the check: the disk is nearly full
        assert keeper.reserve.held() == 0  # given to the appends...
        stored = journal.append([Tick(1.0)], [_old_card("current", 1)])  # ...which go on at once
        assert stored
        assert keeper.wait_for_compaction(60)  # and a tight compaction ran
        report = keeper.last_compaction
        assert report is not None
        assert report.tight
        assert report.events_deleted == 12_000
        assert report.file_bytes_freed > 6 * MiB
        assert journal.size_bytes() < size_before / 20  # the file itself gave the space back
        assert keeper.disk_alert is not None  # the filler still holds the disk: the alert stays
        (raised,) = [e for e in journal.events(origin=None) if e.data.get("code") == "journal_disk_low"]
        assert raised.kind == "alert_raised"
        assert raised.data["freed_bytes"] == report.file_bytes_freed
        assert raised.data["reserve_bytes_released"] == 2 * MiB
        assert 0 < raised.data["free_bytes"] < 16 * MiB
        assert f"freed {report.file_bytes_freed} bytes" in raised.data["message"]

        # the table keeps journaling in what compaction freed
        for n in range(2, 2002, 50):
            journal.append([Tick(2.0)] * 50, [_old_card("current", k) for k in range(n, n + 50)])

        (small_disk / "filler").unlink()  # someone made room
        keeper.run(2.0)
        assert keeper.disk_alert is None
        cleared = [e for e in journal.events(origin=None) if e.kind == "alert_cleared"]
        assert [e.data["alert_id"] for e in cleared] == [raised.data["alert_id"]]
        assert f"freed {report.file_bytes_freed} bytes" in cleared[0].data["message"]
        _until(lambda: keeper.reserve.held() == 2 * MiB, 10, "the reserve to be written again")
        assert verify_journal(journal.settings.path).ok
    finally:
        keeper.stop()
        journal.close()
