"""Rollbacks no restore can fake, against two game servers on a real mosquitto.

In six scenarios the table is the daemon's journal and publisher in this process, opened the
way the service opens them (its continuity alert journaled at start), so its disk can be
reverted between opens; in the last one it is the real daemon (``python -m daemon.cli run``,
as systemd starts it) reading a shoe on a pty, SIGKILLed and its disk reverted. The disk is
snapshotted live and reverted (journal and marker together, what a VM or disk-image restore
does), or the journal file replaced. Two servers follow it: the shipped reference consumer
(:mod:`daemon.mqtt.ordered_consumer`) and :class:`MinimalServer` below, written from the
contract alone (the README's rules and the schemas; it imports nothing of the project's
consumer, signing or canonical JSON).

Every scenario must end with: 0 event ids reused for other content on the wire, the rollback
signalled exactly once (one ``journal_rolled_back`` alert), the server holding exactly the
table's events, and every event the server had processed and the table lost listed as lost
(none settled twice, none unaccounted for). The figures are printed per scenario.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from bench.rig import DaemonProcess, NotifySocket, TimedPty, shoe_stream, write_config
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer_client import ConsumerClient
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.secrets import Secret, SecretSource
from drivers.simulate import VirtualShoe
from tests.chaos.rollback_support import (
    TABLE,
    TOPICS,
    Figures,
    Server,
    Table,
    held_in_file,
    judge,
    restore_files,
    server_ack_in_file,
    snapshot_files,
    wait_until,
)
from tests.mqtt.ack_support import key_files
from tests.mqtt.support import Subscriber
from tests.support.broker import MosquittoBroker

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]

GS_KEY_ID = "gs-1"


# -- a game server written from the contract alone ---------------------------------------------


def _jcs(message: dict[str, Any]) -> bytes:
    """RFC 8785 for the messages this server signs: strings and integers only, so sorted keys
    and no whitespace are the whole of it."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class MinimalServer:
    """The contract's server rules, nothing else: verify, deduplicate, process in seq order
    along the chain (a conflict or an event that does not chain is never processed: hold),
    act on a rollback alert once, list what the table lost, acknowledge (seq, event_id, hash,
    epoch) retained, ask for gaps."""

    def __init__(self, port: int, events_key: bytes, gs_key: bytes, key_id: str | None = GS_KEY_ID) -> None:
        self.port = port
        self.events_key = events_key
        self.gs_key = gs_key
        self.key_id = key_id
        self.send_epoch = True
        """The contract makes ``epoch`` in an acknowledgement optional; False: a server that omits it."""
        self.lock = threading.Lock()
        self.processed: dict[int, tuple[str, str | None, str | None]] = {}  # seq -> id, hash, epoch
        self.position = 0
        self.waiting: dict[int, dict[str, Any]] = {}
        self.halted: str | None = None
        self.lost_events: list[tuple[int, str]] = []
        self.recovered_count = 0
        self.acted: set[str] = set()
        self.lost_epochs: list[tuple[str, int]] = []
        self.chain_restart: int | None = None
        self.known_last = 0
        self.ever: list[str] = []
        self.client: mqtt.Client | None = None
        self._ticker: threading.Thread | None = None
        self._running = threading.Event()
        self._acked: tuple[int, str] | None = None
        self._asked_at = 0.0

    # the Server protocol
    def start(self) -> None:
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="minimal-game-server", protocol=mqtt.MQTTv5
        )
        subscribed = threading.Event()
        client.on_connect = lambda c, *_: c.subscribe(TOPICS.events, qos=1)
        client.on_subscribe = lambda *_: subscribed.set()
        client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600  # a persistent session: the broker queues while away
        client.connect("127.0.0.1", self.port, keepalive=30, clean_start=False, properties=props)
        client.loop_start()
        assert subscribed.wait(10), "the minimal server did not subscribe"
        self.client = client
        self._acked = None  # acknowledge again after a reconnect
        self._running.set()
        self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._running.clear()
        if self._ticker is not None:
            self._ticker.join(5)
        if self.client is not None:
            self.client.disconnect()
            self.client.loop_stop()
            self.client = None

    def final(self) -> list[tuple[int, str]]:
        with self.lock:
            return [(s, p[0]) for s, p in sorted(self.processed.items())]

    def ever_processed(self) -> list[str]:
        with self.lock:
            return list(self.ever)

    def lost(self) -> list[tuple[int, str]]:
        with self.lock:
            return list(self.lost_events)

    def recovered(self) -> int:
        return self.recovered_count

    def stopped(self) -> str | None:
        return self.halted

    def processed_through(self) -> int:
        return self.position

    # receiving
    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        envelope = self._verified(bytes(message.payload))
        if envelope is None:
            return
        with self.lock:
            self._handle(envelope)

    def _verified(self, payload: bytes) -> dict[str, Any] | None:
        """The contract's layout of a signed event: the bytes before ``,"published_at":`` plus
        ``}`` are the signed form; ``sig`` is their HMAC-SHA256 with the events key."""
        cut = payload.rfind(b',"published_at":')
        if cut < 0:
            return None
        signed = payload[:cut] + b"}"
        tail = json.loads(b"{" + payload[cut + 1 :])
        expected = hmac.new(self.events_key, signed, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, str(tail.get("sig", ""))):
            return None
        envelope: dict[str, Any] = json.loads(signed)
        return envelope if envelope.get("table_id") == TABLE else None

    def _handle(self, envelope: dict[str, Any]) -> None:
        seq, event_id, data = envelope["seq"], envelope["event_id"], envelope["data"]
        if (
            envelope["kind"] == "alert_raised"
            and data.get("code") == "journal_rolled_back"
            and event_id not in self.acted
        ):
            self.acted.add(event_id)
            self._rebase(envelope)
        epoch = envelope.get("epoch")
        if any(epoch == lost and seq > restore for lost, restore in self.lost_epochs):
            return  # a late copy of history the table lost
        if seq <= self.position:
            held = self.processed.get(seq)
            if held is not None and held[0] != event_id:
                self.halted = f"conflict at seq {seq}"  # never processed; the chain holds the rest
            return
        if seq not in self.waiting:
            self.waiting[seq] = envelope
        self.known_last = max(self.known_last, seq)
        self._process()

    def _process(self) -> None:
        while self.halted is None and self.position + 1 in self.waiting:
            seq = self.position + 1
            envelope = self.waiting[seq]
            below = self.processed.get(seq - 1)
            link = envelope.get("prev_hash")
            if (
                link is not None
                and seq != self.chain_restart
                and below is not None
                and below[1] not in (None, link)
            ):
                self.halted = f"chain break at seq {seq}"
                return
            del self.waiting[seq]
            self.processed[seq] = (envelope["event_id"], envelope.get("hash"), envelope.get("epoch"))
            self.position = seq
            self.halted = None
            if (seq, envelope["event_id"]) in self.lost_events:
                self.lost_events.remove((seq, envelope["event_id"]))  # not lost after all
                self.recovered_count += 1
            else:
                self.ever.append(envelope["event_id"])

    def _rebase(self, alert: dict[str, Any]) -> None:
        data = alert["data"]
        restore = int(data["restore_seq"])
        for seq in sorted(s for s in self.processed if s > restore):
            self.lost_events.append((seq, self.processed.pop(seq)[0]))
        self.position = min(self.position, restore)
        if data["continuity"] == "replaced":
            for seq in range(self.position + 1, restore + 1):  # gone with the old file
                self.lost_events.append((seq, "unknown"))
                self.processed[seq] = ("unknown", None, None)
            self.position = max(self.position, restore)
            self.chain_restart = restore + 1
        if data.get("lost_epoch"):
            self.lost_epochs.append((data["lost_epoch"], restore))
        self.waiting = {s: e for s, e in self.waiting.items() if s <= restore}
        self.known_last = max(restore, alert["seq"])
        self.halted = None

    # acknowledging and asking
    def _tick_loop(self) -> None:
        while self._running.is_set():
            self._tick()
            time.sleep(0.1)

    def _tick(self) -> None:
        with self.lock:
            held = self.processed.get(self.position)
            ack = None
            if held is not None and held[0] != "unknown" and (self.position, held[0]) != self._acked:
                ack = {"schema_version": 1, "table_id": TABLE, "seq": self.position, "event_id": held[0]}
                if held[1] is not None:
                    ack["hash"] = held[1]
                if held[2] is not None and self.send_epoch:
                    ack["epoch"] = held[2]
                self._acked = (self.position, held[0])
            end = min(self.waiting) - 1 if self.waiting else self.known_last
            ask = None
            now = time.monotonic()
            if end > self.position and now - self._asked_at > 1.0:
                ask = (self.position + 1, min(end, self.position + 10_000))
                self._asked_at = now
        client = self.client
        if client is None:
            return
        if ack is not None:
            key = {} if self.key_id is None else {"key_id": self.key_id}
            client.publish(TOPICS.ack, self._signed({**ack, **key, "ts": int(time.time())}), 1, True)
        if ask is not None:
            command = {
                "table_id": TABLE,
                "action": "resend",
                "args": {"from_seq": ask[0], "to_seq": ask[1]},
                "command_id": f"gap-{secrets.token_hex(4)}",
                "ts": int(time.time()),
                "nonce": secrets.token_hex(12),
                **({"actor": "game_server"} if self.key_id is None else {"key_id": self.key_id}),
            }
            client.publish(TOPICS.cmd, self._signed(command), 1)

    def _signed(self, message: dict[str, Any]) -> bytes:
        sig = hmac.new(self.gs_key, _jcs(message), hashlib.sha256).hexdigest()
        return json.dumps({**message, "sig": sig}).encode()


# -- the shipped reference consumer ------------------------------------------------------------


class ReferenceServer:
    """The reference consumer on paho, as ``tail --checkpoint`` runs it (persistent session)."""

    def __init__(
        self, port: int, checkpoint: Path, keys: tuple[Secret, Secret], key_id: str | None = GS_KEY_ID
    ) -> None:
        self.port = port
        self.ack_key = keys[1]
        self.key_id = key_id
        self.consumer = OrderedConsumer(
            TABLE, Checkpoint(checkpoint, TABLE), keys[0], gap_grace_s=0.3, gap_retry_s=1.0
        )
        self.ever: list[str] = []
        self.runner: ConsumerClient | None = None

    def start(self) -> None:
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="reference-game-server", protocol=mqtt.MQTTv5
        )
        self.runner = ConsumerClient(
            client,
            self.consumer,
            self.key_id,
            self.ack_key,
            on_processed=lambda envelope: self.ever.append(envelope["event_id"]),
            interval_s=0.1,
        )
        self.runner.connect("127.0.0.1", self.port)
        assert self.runner.subscribed.wait(10), "the reference consumer did not subscribe"

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
            self.runner = None

    def processed_through(self) -> int:
        return self.consumer.position

    def final(self) -> list[tuple[int, str]]:
        return [(s, e) for s, e in self.consumer.checkpoint.processed_seqs() if e != "unknown"]

    def ever_processed(self) -> list[str]:
        return list(self.ever)

    def lost(self) -> list[tuple[int, str]]:
        return [(s, e) for s, e, _ in self.consumer.checkpoint.lost()]

    def recovered(self) -> int:
        return self.consumer.recovered

    def stopped(self) -> str | None:
        return self.consumer.stopped


def make_server(
    kind: str, port: int, workdir: Path, keys: tuple[Secret, Secret], key_id: str | None
) -> Server:
    """The reference consumer or the minimal server, with the events key and the ack key."""
    if kind == "reference":
        return ReferenceServer(port, workdir / "checkpoint.sqlite3", keys, key_id)
    return MinimalServer(port, keys[0].reveal(), keys[1].reveal(), key_id)


# -- the scenarios -----------------------------------------------------------------------------


class Rig:
    def __init__(self, tmp_path: Path, server_kind: str) -> None:
        self.broker = MosquittoBroker(tmp_path / "broker")
        self.broker.start()
        self.files = key_files(tmp_path)
        self.observer = Subscriber(self.broker.port, [TOPICS.events])
        self.table = Table(tmp_path, self.broker.port, self.files)
        self.server_kind = server_kind
        self.server: Server
        keys = (
            SecretSource(file=self.files["events"]).load(),
            SecretSource(file=self.files[GS_KEY_ID]).load(),
        )
        self.server = make_server(server_kind, self.broker.port, tmp_path, keys, GS_KEY_ID)
        self.snapshots = tmp_path / "snapshots"
        self.started = time.monotonic()

    def caught_up(self, timeout: float = 20.0) -> None:
        """The server holds the table's whole journal and the table stored its acknowledgement."""

        def done() -> bool:
            last = self.table.j.last_seq()
            return self.server.processed_through() == last and self.table.j.server_ack().seq == last

        try:
            wait_until(done, timeout, f"{self.server_kind} server to catch up")
        except AssertionError:
            raise AssertionError(
                f"not caught up: server at {self.server.processed_through()} ({self.server.stopped()}), "
                f"table at "
                f"{self.table.j.last_seq()}, table's stored ack {self.table.j.server_ack().seq}"
            ) from None

    def finish(self, scenario: str, alerts: int = 1) -> Figures:
        self.caught_up()
        held = self.table.held()
        # the server holds the table's events (and, after a replaced file, the old file's below)
        assert [(s, e) for s, e in self.server.final() if s >= held[0][0]] == held
        figures = judge(scenario, self.server_kind, self.observer, held, self.server)
        figures.seconds = round(time.monotonic() - self.started, 2)
        print(f"\nFIGURES {figures.line()}")
        assert figures.ids_reused == 0, figures
        assert figures.alerts == alerts, figures
        assert figures.unaccounted == 0, figures
        assert figures.settled_twice == 0, figures
        assert self.server.stopped() is None
        return figures

    def close(self) -> None:
        self.server.stop()
        self.table.close()
        self.observer.close()
        self.broker.stop()


SERVERS = ["reference", "minimal"]


@pytest.fixture(params=SERVERS)
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    rig = Rig(tmp_path, request.param)
    try:
        yield rig
    finally:
        rig.close()


def test_a_disk_revert_with_the_table_dealing_past_the_acknowledged_seq(rig: Rig) -> None:
    table, server = rig.table, rig.server
    table.open()
    server.start()
    table.online()
    table.deal(12)
    restore = table.snapshot(rig.snapshots / "a")
    table.deal(8)
    rig.caught_up()  # the server acknowledged seq 20
    table.revert(rig.snapshots / "a")
    table.deal(13)  # before it hears from the server: seq 13-25 again, other cards, new ids
    table.online()
    figures = rig.finish("revert, dealing past the ack")
    assert figures.restore_seq == [restore] == [12]
    assert figures.lost_listed == figures.lost_at_table == 8


def test_a_disk_revert_while_the_server_is_behind(rig: Rig) -> None:
    table, server = rig.table, rig.server
    table.open()
    server.start()
    table.online()
    table.deal(10)
    rig.caught_up()
    server.stop()  # away: the broker queues for its persistent session
    table.deal(10)
    table.snapshot(rig.snapshots / "b")
    table.deal(10)
    wait_until(lambda: table.j.undelivered_count() == 0, 10, "the broker to take seq 11-30")
    table.revert(rig.snapshots / "b")
    table.deal(7)
    table.online()
    server.start()  # the old seq 11-30 first (queued), then the table's new history
    figures = rig.finish("revert while the server is behind")
    assert figures.restore_seq == [20]
    assert figures.lost_listed == figures.lost_at_table == 10


@pytest.mark.parametrize(("lost", "dealt_after"), [(3, 2), (150, 220)], ids=["short", "long"])
def test_an_offline_revert(rig: Rig, lost: int, dealt_after: int) -> None:
    table, server = rig.table, rig.server
    table.open()
    server.start()
    table.online()
    table.deal(30)
    table.snapshot(rig.snapshots / "c")
    table.deal(lost)
    rig.caught_up()
    table.revert(rig.snapshots / "c")
    table.deal(dealt_after)  # offline all along
    table.online()
    figures = rig.finish(f"offline revert, {lost} lost, {dealt_after} dealt after")
    assert figures.restore_seq == [30]
    assert figures.lost_listed == figures.lost_at_table == lost


def test_restarts_after_a_detected_rollback_signal_it_once(rig: Rig) -> None:
    table, server = rig.table, rig.server
    table.open()
    server.start()
    table.online()
    table.deal(15)
    table.snapshot(rig.snapshots / "d")
    table.deal(5)
    rig.caught_up()
    server.stop()  # its retained acknowledgement of the lost seq 20 stays on the broker
    table.revert(rig.snapshots / "d")
    table.deal(2)
    table.online()
    wait_until(lambda: table.j.open_rollback() is not None, 10, "the rollback to be found")
    for _ in range(3):  # every restart reads the old retained acknowledgement again
        table.restart()
        table.deal(1)
        wait_until(lambda: table.j.undelivered_count() == 0, 10, "the restart's events out")
    assert table.j.open_rollback() is not None  # recognised from disk, not alerted again
    server.start()
    figures = rig.finish("restarts after a detected rollback")
    assert table.opens == 5
    assert figures.restore_seq == [15]
    assert table.j.open_rollback() is None  # settled: the server follows this chain


def test_a_cautious_restore_point_lists_more_and_recovers_what_comes_back(tmp_path: Path) -> None:
    """A server that acknowledges no epoch, a table restarted between its last acknowledged seq
    and the snapshot: the restore point is the earlier epoch start, so the alert names more
    than was lost; the events that come back unchanged are recovered, never settled twice."""
    rig = Rig(tmp_path, "minimal")
    assert isinstance(rig.server, MinimalServer)
    rig.server.send_epoch = False
    table, server = rig.table, rig.server
    try:
        table.open()
        server.start()
        table.online()
        table.deal(10)
        rig.caught_up()
        server.stop()
        table.restart()  # an ordinary restart: a new epoch from seq 11
        table.deal(5)
        table.snapshot(rig.snapshots / "e")  # the server acknowledged seq 10 here
        server.start()
        table.deal(5)
        rig.caught_up()  # seq 20
        table.revert(rig.snapshots / "e")
        table.deal(8)
        table.online()
        figures = rig.finish("cautious restore point, server acks without epoch")
        assert figures.restore_seq == [10]  # the real one is 15: never later than it
        assert figures.lost_listed == figures.lost_at_table == 5
        assert figures.recovered == 5  # seq 11-15 came back unchanged
    finally:
        rig.close()


def test_a_replaced_journal_file(rig: Rig) -> None:
    table, server = rig.table, rig.server
    table.open()
    server.start()
    table.online()
    table.deal(15)
    rig.caught_up()
    table.replace_file()  # a new file beside the old marker: it goes on after seq 15
    table.deal(5)
    table.online()
    figures = rig.finish("journal file replaced")
    assert figures.restore_seq == [15]
    assert figures.first_lost_seq == [16]
    assert [seq for seq, _ in table.held()] == list(range(16, 22))


def test_the_real_daemon_reverted_on_disk(tmp_path: Path, server_kind: str) -> None:
    """``baccarat-edge run`` as systemd starts it, a shoe dealt into its reader's pty; its disk
    snapshotted live, the daemon killed and its disk reverted, then the shoe goes on."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    observer = Subscriber(broker.port, [TOPICS.events])
    pty = TimedPty(tmp_path / "shoe")
    config = write_config(
        tmp_path / "table", TABLE, pty.path, broker.port, delivery={"server_ack": {"enabled": True}}
    )
    journal = tmp_path / "table" / "state" / "journal.sqlite3"
    keys = (
        SecretSource(file=tmp_path / "table" / "events.key").load(),
        SecretSource(file=tmp_path / "table" / "command.key").load(),  # the legacy key: every role
    )
    server = make_server(server_kind, broker.port, tmp_path, keys, None)
    steps = shoe_stream(1, seed=7).steps
    daemons: list[DaemonProcess] = []
    started = time.monotonic()

    def start_daemon() -> None:
        notify = NotifySocket(tmp_path / f"notify-{len(daemons)}.sock")
        daemons.append(DaemonProcess(config, tmp_path / "daemon.log", notify_socket=notify.path))
        ready = notify.wait_ready(30.0)
        notify.close()
        assert ready is not None, daemons[-1].tail()

    def last_seq() -> int:
        held = held_in_file(journal)
        return held[-1][0] if held else 0

    def deal(first: int, last: int) -> None:
        """Write the frames; return once the journal grew and stood still for half a second."""
        before = last_seq()
        shoe = VirtualShoe(steps[first:last], pty, speed=1e9)
        shoe.start()
        assert shoe.done.wait(30)
        wait_until(lambda: last_seq() > before, 20, "the daemon to journal the cards")
        seen, since = last_seq(), time.monotonic()
        while time.monotonic() - since < 0.5:
            time.sleep(0.05)
            if last_seq() != seen:
                seen, since = last_seq(), time.monotonic()

    def caught_up() -> bool:
        held = held_in_file(journal)
        last = held[-1][0] if held else -1
        return server.processed_through() == last and server_ack_in_file(journal) == last

    try:
        start_daemon()
        server.start()
        deal(0, 60)
        wait_until(caught_up, 30, "the server to acknowledge the first cards")
        snapshot_files(journal, tmp_path / "snapshot")
        deal(60, 120)
        wait_until(caught_up, 30, "the server to acknowledge the cards after the snapshot")
        daemons[-1].kill()  # the VM is reverted: no clean stop
        restore_files(journal, tmp_path / "snapshot")
        start_daemon()
        deal(120, 200)  # the shoe goes on
        wait_until(caught_up, 40, "the server to follow the reverted table")
        held = held_in_file(journal)
        assert [(s, e) for s, e in server.final() if s >= held[0][0]] == held
        figures = judge("the real daemon reverted on disk", server_kind, observer, held, server)
        figures.seconds = round(time.monotonic() - started, 2)
        print(f"\nFIGURES {figures.line()}")
        assert figures.ids_reused == 0, figures
        assert figures.alerts == 1, figures
        assert figures.lost_listed == figures.lost_at_table > 0, figures
        assert (figures.unaccounted, figures.settled_twice) == (0, 0), figures
    finally:
        server.stop()
        for daemon in daemons:
            daemon.stop(timeout=10)
        observer.close()
        pty.close()
        broker.stop()


@pytest.fixture(params=SERVERS)
def server_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind
