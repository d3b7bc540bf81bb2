"""The rollback rig: a table (the daemon's journal and publisher, opened the way the service
opens them) whose disk can be snapshotted live and reverted, a real mosquitto, an observer
of every payload on the wire, and the figures a rollback scenario is judged by."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from daemon.alerts import AlertCode
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.journal.continuity import marker_path_for
from daemon.journal.continuity_alert import continuity_alert
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.topics import TableTopics
from tests.mqtt.ack_support import ack_settings
from tests.mqtt.support import Subscriber, validate_payload

TABLE = "T1"
TOPICS = TableTopics(TABLE)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Table:
    """One table: its journal file (with marker) and, while online, its publisher."""

    def __init__(self, workdir: Path, port: int, files: dict[str, Path]) -> None:
        self.path = workdir / "journal.sqlite3"
        self.port = port
        self.files = files
        self.journal: Journal | None = None
        self.publisher: Publisher | None = None
        self.cards = 0
        self.opens = 0

    @property
    def j(self) -> Journal:
        assert self.journal is not None, "the table is not open"
        return self.journal

    def open(self) -> None:
        """Open the journal and journal its continuity alert, as the service does at start."""
        self.journal = Journal(JournalSettings(path=self.path), TABLE)
        self.opens += 1
        alert = continuity_alert(self.journal.continuity, time.time())
        if alert is not None:
            self.journal.append_delivery_event(alert)

    def deal(self, count: int) -> None:
        """``count`` cards, each one never dealt before (so a reissued seq has other content)."""
        events = []
        for _ in range(count):
            self.cards += 1
            n = self.cards
            events.append(
                DeliveryEvent(
                    kind="card_dealt",
                    at=1_764_400_000.0 + n,
                    data={"card": "8s", "slot": "P1", "n": n},
                    shoe_id="S1",
                    hand=1 + n // 6,
                    source="reader",
                )
            )
        self.j.append([], events)
        if self.publisher is not None:
            self.publisher.notify()

    def online(self) -> None:
        self.publisher = Publisher(ack_settings(self.port, self.files), TABLE, self.j)
        self.publisher.start()
        assert self.publisher.connection.ack_subscribed.wait(10), "the table did not subscribe to ack"

    def offline(self) -> None:
        if self.publisher is not None:
            self.publisher.stop(timeout=2.0)
            self.publisher = None

    def close(self) -> None:
        self.offline()
        if self.journal is not None:
            self.journal.close()
            self.journal = None

    def restart(self) -> None:
        """Stop and start again (a new epoch, the same history)."""
        online = self.publisher is not None
        self.close()
        self.open()
        if online:
            self.online()

    def snapshot(self, into: Path) -> int:
        """A live, crash-consistent copy of the disk (what a VM snapshot holds): the journal
        through SQLite's backup (the committed state, WAL included) and the marker as it is
        on disk. Returns the journal's last seq in the copy."""
        into.mkdir(parents=True, exist_ok=True)
        marker = marker_path_for(self.path)
        shutil.copyfile(marker, into / marker.name)  # first: it may lag the journal, never lead
        source = sqlite3.connect(self.path)
        target = sqlite3.connect(into / self.path.name)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        return self.j.last_seq()

    def revert(self, snapshot: Path) -> None:
        """The whole disk goes back to ``snapshot`` (journal and marker together); the table
        starts again from it, offline."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(snapshot / self.path.name, self.path)
        marker = marker_path_for(self.path)
        shutil.copyfile(snapshot / marker.name, marker)
        self.open()

    def replace_file(self) -> None:
        """The journal file is moved aside (as the damaged-journal message says) and the table
        starts with a new one beside the old marker, offline."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            old = Path(f"{self.path}{suffix}")
            if old.exists():
                old.rename(Path(f"{self.path}{suffix}.damaged"))
        self.open()

    def held(self) -> list[tuple[int, str]]:
        return [(e.seq, e.event_id) for e in self.j.events(origin=None)]


class Server(Protocol):
    """What a scenario needs from a game server."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def processed_through(self) -> int:
        """The highest seq processed with every lower one."""
        ...

    def final(self) -> list[tuple[int, str]]:
        """``(seq, event_id)`` of everything processed and not lost, in seq order."""
        ...

    def ever_processed(self) -> list[str]:
        """Every event id handed to the application, in order (a second time = settled twice)."""
        ...

    def lost(self) -> list[tuple[int, str]]: ...

    def recovered(self) -> int: ...

    def stopped(self) -> str | None: ...


@dataclass
class Figures:
    """What one scenario is judged by (the closing note reports these)."""

    scenario: str
    server: str
    published: int = 0
    ids: int = 0
    ids_reused: int = 0
    alerts: int = 0
    lost_at_table: int = 0
    lost_listed: int = 0
    recovered: int = 0
    unaccounted: int = 0
    settled_twice: int = 0
    restore_seq: list[int] = field(default_factory=list)
    first_lost_seq: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def judge(
    scenario: str, server_name: str, observer: Subscriber, table_held: list[tuple[int, str]], server: Server
) -> Figures:
    """The figures of a finished scenario from the wire, the table's journal (``(seq,
    event_id)`` it holds) and the server."""
    figures = Figures(scenario, server_name)
    contents: dict[str, set[str]] = {}
    published: dict[str, int] = {}
    alert_ids: set[str] = set()
    for message in observer.on("events"):
        validate_payload(message.topic, message.payload)  # the contract's schema, chain and alert
        envelope: dict[str, Any] = message.json()
        figures.published += 1
        digest = (
            envelope.get("hash") or hashlib.sha256(message.payload.split(b',"published_at":')[0]).hexdigest()
        )
        contents.setdefault(envelope["event_id"], set()).add(digest)
        published[envelope["event_id"]] = envelope["seq"]
        data = envelope["data"]
        if envelope["kind"] == "alert_raised" and data.get("code") == AlertCode.JOURNAL_ROLLED_BACK:
            if data["alert_id"] not in alert_ids:
                figures.restore_seq.append(data["restore_seq"])
                figures.first_lost_seq.append(data["first_lost_seq"])
            alert_ids.add(data["alert_id"])
    figures.ids = len(contents)
    figures.ids_reused = sum(1 for digests in contents.values() if len(digests) > 1)
    figures.alerts = len(alert_ids)
    held = {event_id for _, event_id in table_held}
    final = {event_id for _, event_id in server.final()}
    # gone from the table and not kept by the server as settled history (a replaced file's)
    gone = {event_id for event_id in published if event_id not in held and event_id not in final}
    figures.lost_at_table = len(gone)
    lost = {event_id for _, event_id in server.lost()}
    figures.lost_listed = len(lost & gone)
    figures.recovered = server.recovered()
    ever = server.ever_processed()
    figures.unaccounted = len(set(ever) - final - lost)
    figures.settled_twice = len(ever) - len(set(ever))
    return figures


def held_in_file(path: Path) -> list[tuple[int, str]]:
    """``(seq, event_id)`` of every event in a journal file, read beside a running daemon."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        return [(int(s), str(e)) for s, e in db.execute("SELECT seq, event_id FROM events ORDER BY seq")]
    finally:
        db.close()


def server_ack_in_file(path: Path) -> int:
    """The server acknowledgement a running daemon stored in its journal."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'server_ack_seq'").fetchone()
        return 0 if row is None else int(row[0])
    finally:
        db.close()


def snapshot_files(journal: Path, into: Path) -> None:
    """A live, crash-consistent copy of a running daemon's journal and marker."""
    into.mkdir(parents=True, exist_ok=True)
    marker = marker_path_for(journal)
    shutil.copyfile(marker, into / marker.name)
    source = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5.0)
    target = sqlite3.connect(into / journal.name)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def restore_files(journal: Path, snapshot: Path) -> None:
    """The disk back to ``snapshot``: journal (its WAL gone) and marker together."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{journal}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(snapshot / journal.name, journal)
    marker = marker_path_for(journal)
    shutil.copyfile(snapshot / marker.name, marker)
