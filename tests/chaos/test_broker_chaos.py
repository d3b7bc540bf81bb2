"""Chaos with the project's own broker config (issue #13): mosquitto SIGKILLed during a backlog
drain and while the game server is away, a journal rolled back mid-shoe. The reference
consumer (the game server's model) must end with every event once, in ``seq`` order, and a
rollback reported by both sides. Bounded: one trial each, a few seconds apiece."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from daemon.alerts import AlertCode
from daemon.journal import Continuity, ContinuityKind, Journal, JournalSettings
from daemon.journal.continuity_alert import continuity_alert
from daemon.mqtt.publisher import Publisher
from tests.chaos.support import (
    TABLE,
    GameServer,
    ShippedBroker,
    chaos_keys,
    game_server,
    journal_seqs,
    table_settings,
    wait_until,
)
from tests.mqtt.conftest import card_event

pytestmark = pytest.mark.mosquitto


def _continuity(journal: Journal) -> Continuity:
    return journal.continuity


def _caught_up(server: GameServer, journal: Journal) -> bool:
    last = journal.last_seq()
    return server.consumer.position == last and journal.server_ack().seq == last


def _assert_every_event_once_in_order(server: GameServer, journal: Journal) -> None:
    last = journal.last_seq()
    assert server.seqs == list(range(1, last + 1))
    held = [(e.seq, e.event_id) for e in journal.events(origin=None)]
    assert server.consumer.checkpoint.processed_seqs() == held
    assert server.consumer.stats.conflicts == 0
    assert server.consumer.stats.rejected == 0


def test_broker_killed_during_a_backlog_drain(tmp_path: Path) -> None:
    broker = ShippedBroker(tmp_path / "broker")
    broker.start()
    keys = chaos_keys(tmp_path)
    journal = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), TABLE)
    journal.append([], [card_event(n) for n in range(1, 2001)])  # journaled while nothing was up
    server = game_server(broker, keys, tmp_path / "checkpoint.sqlite3")
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        wait_until(lambda: publisher.counters.acknowledged >= 300, 30, "the drain under way", poll=0.001)
        broker.kill()
        assert journal.undelivered_count() > 0, "the broker was killed after the drain, not during it"
        acked_by_server = journal.server_ack().seq
        broker.start()
        wait_until(lambda: _caught_up(server, journal), 60, "the game server to catch up")
        _assert_every_event_once_in_order(server, journal)
        # what the broker had acknowledged past the server's word went out again
        assert acked_by_server < 2000
        assert publisher.counters.resent > 0 or server.runner.resends_asked
    finally:
        publisher.stop(timeout=2.0)
        server.stop()
        journal.close()
        broker.stop()


def test_broker_killed_while_the_game_server_is_away(tmp_path: Path) -> None:
    broker = ShippedBroker(tmp_path / "broker")
    broker.start()
    keys = chaos_keys(tmp_path)
    journal = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), TABLE)
    checkpoint = tmp_path / "checkpoint.sqlite3"
    server = game_server(broker, keys, checkpoint)
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        journal.append([], [card_event(n) for n in range(1, 41)])
        publisher.notify()
        wait_until(lambda: _caught_up(server, journal), 30, "the first events acknowledged")
        server.stop()  # the server goes away; its persistent session queues what follows
        journal.append([], [card_event(n) for n in range(41, 141)])
        publisher.notify()
        wait_until(lambda: journal.undelivered_count() == 0, 30, "the broker's PUBACKs")
        broker.kill()  # the queued events die with it: never autosaved
        broker.start()
        wait_until(lambda: publisher.connected, 30, "the table back")
        server = game_server(broker, keys, checkpoint)
        wait_until(lambda: _caught_up(server, journal), 60, "the game server to catch up")
        assert server.seqs == list(range(41, journal.last_seq() + 1))  # 1-40 before it left
        held = [(e.seq, e.event_id) for e in journal.events(origin=None)]
        assert server.consumer.checkpoint.processed_seqs() == held
        assert server.consumer.stats.conflicts == 0
        assert server.runner.resends_asked or publisher.counters.resent > 0
    finally:
        publisher.stop(timeout=2.0)
        server.stop()
        journal.close()
        broker.stop()


def test_a_journal_rolled_back_mid_shoe_is_reported_by_table_and_game_server(tmp_path: Path) -> None:
    broker = ShippedBroker(tmp_path / "broker")
    broker.start()
    keys = chaos_keys(tmp_path)
    path = tmp_path / "journal.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    journal.append([], [card_event(n) for n in range(1, 13)])
    journal.close()
    shutil.copy(path, tmp_path / "backup.sqlite3")  # last night's backup, mid-shoe
    journal = Journal(JournalSettings(path=path), TABLE)
    journal.append([], [card_event(n) for n in range(13, 21)])
    server = game_server(broker, keys, tmp_path / "checkpoint.sqlite3")
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        wait_until(lambda: _caught_up(server, journal), 30, "the game server to acknowledge seq 20")
        lost_ids = [e.event_id for e in journal.events(after_seq=12, origin=None)]
    finally:
        publisher.stop(timeout=2.0)
        journal.close()
    # the disk is restored from the backup (the marker beside it says seq 20 was committed)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.sqlite3", path)
    journal = Journal(JournalSettings(path=path), TABLE)
    assert journal.continuity.kind is ContinuityKind.ROLLBACK
    alert = continuity_alert(journal.continuity, time.time())  # what the service journals on open
    assert alert is not None
    journal.append_delivery_event(alert)
    journal.append([], [card_event(n) for n in range(113, 117)])  # the shoe goes on: seq 14-17
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        try:
            wait_until(lambda: _caught_up(server, journal), 10, "the game server to follow the new epoch")
        except AssertionError:
            c = server.consumer
            print(
                "DEBUG",
                server.seqs,
                c.position,
                c.rollbacks,
                c.conflicts,
                c.stats,
                journal.server_ack(),
                c.missing,
                c._waiting.keys(),
                server.runner.resends_asked,
                journal.last_seq(),
            )
            raise
        # the table reported it (critical, before any event of the new epoch) ...
        rolled = journal.get(13)
        assert rolled is not None
        assert (rolled.kind, rolled.data["code"]) == ("alert_raised", AlertCode.JOURNAL_ROLLED_BACK)
        assert rolled.data["severity"] == "critical"
        # ... and so did the game server, with what the table lost; nothing silently dropped
        assert len(server.consumer.rollbacks) == 1
        assert "rolled back to seq 12" in server.consumer.rollbacks[0]
        assert [event_id for _, event_id, _ in server.consumer.checkpoint.lost()] == lost_ids
        assert server.seqs == [*range(1, 21), *range(13, 18)]
        held = [(e.seq, e.event_id) for e in journal.events(origin=None)]
        assert server.consumer.checkpoint.processed_seqs() == held
        assert journal_seqs(journal) == list(range(1, 18))
    finally:
        publisher.stop(timeout=2.0)
        server.stop()
        journal.close()
        broker.stop()


def test_a_whole_disk_revert_is_caught_by_the_server_acknowledgement(tmp_path: Path) -> None:
    broker = ShippedBroker(tmp_path / "broker")
    broker.start()
    keys = chaos_keys(tmp_path)
    path = tmp_path / "journal.sqlite3"
    marker = Path(f"{path}.marker")
    journal = Journal(JournalSettings(path=path), TABLE)
    journal.append([], [card_event(n) for n in range(1, 13)])
    journal.close()
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    shutil.copy(path, snapshot / path.name)  # the VM snapshot: journal and marker together
    shutil.copy(marker, snapshot / marker.name)
    journal = Journal(JournalSettings(path=path), TABLE)
    journal.append([], [card_event(n) for n in range(13, 21)])
    server = game_server(broker, keys, tmp_path / "checkpoint.sqlite3")
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        wait_until(lambda: _caught_up(server, journal), 30, "the game server to acknowledge seq 20")
    finally:
        publisher.stop(timeout=2.0)
        journal.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(snapshot / path.name, path)
    shutil.copy(snapshot / marker.name, marker)
    journal = Journal(JournalSettings(path=path), TABLE)
    assert journal.continuity.kind is ContinuityKind.NONE  # the marker cannot see it
    # the shoe goes on before the table hears from the server: seq 13-16 again, other cards
    journal.append([], [card_event(n) for n in range(113, 117)])
    publisher = Publisher(table_settings(broker, keys), TABLE, journal)
    publisher.start()
    try:
        wait_until(lambda: _caught_up(server, journal), 30, "the game server to follow the new epoch")
        # the table: the retained acknowledgement of seq 20 is ahead of its journal
        continuity = _continuity(journal)  # changed by the acknowledgement since the open
        assert continuity.kind is ContinuityKind.ROLLBACK
        assert continuity.acknowledged_seq == 20
        rolled = journal.get(17)
        assert rolled is not None
        assert (rolled.kind, rolled.data["code"]) == ("alert_raised", AlertCode.JOURNAL_ROLLED_BACK)
        # the game server: the reissued seq 13-16 are conflicts (new ids: every open is a new
        # epoch), what the table lost is reported lost, and it follows the table from seq 12
        assert server.consumer.stats.conflicts == 4
        assert all("not the one processed here" in c for c in server.consumer.conflicts)
        assert len(server.consumer.rollbacks) == 1
        # lost: the old 13-20 (13-16 reissued under new ids with other cards)
        assert [seq for seq, _, _ in server.consumer.checkpoint.lost()] == list(range(13, 21))
        # processed: the old 1-20, then the table's 13-17 (13-16 came back on the gap fill)
        assert server.seqs == [*range(1, 21), *range(13, 18)]
        held = [(e.seq, e.event_id) for e in journal.events(origin=None)]
        assert server.consumer.checkpoint.processed_seqs() == held
    finally:
        publisher.stop(timeout=2.0)
        server.stop()
        journal.close()
        broker.stop()
