"""``baccarat-edge run`` end to end: a simulated shoe on a pty, a real mosquitto, a subscriber.

What the server receives is compared with what the virtual dealer dealt: every card in
order with its slot and round, every round's winner as the rules decide it, a gapless
signed stream. Then the service behaviours: SIGTERM mid-shoe and restart (the shoe goes
on), an unreachable broker (the daemon keeps dealing into the journal and catches up),
a full journal (alerts, the daemon keeps running), sd_notify, SIGHUP.
"""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from drivers.pty_device import PtyDevice
from drivers.simulate import ShoePlan
from tests.service.harness import (
    DaemonProcess,
    TableSubscriber,
    TcpForwarder,
    contract_violations,
    dealt_shoe,
    device_health,
    expected_cards,
    expected_winners,
    play,
    received_cards,
    received_winners,
    wait_until_commandable,
    wait_until_idle,
    write_config,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto


class _NotifyListener:
    """Reads NOTIFY_SOCKET continuously, as systemd does (a unix datagram queue holds ~10)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue

    def close(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        return self.messages


def _assert_stream_matches_plan(events: list[dict[str, Any]], plan: ShoePlan) -> None:
    assert [e["seq"] for e in events] == list(range(events[0]["seq"], events[0]["seq"] + len(events)))
    assert len({e["event_id"] for e in events}) == len(events)
    assert received_cards(events) == expected_cards(plan)
    assert received_winners(events) == expected_winners(plan)
    alerts = [e["data"]["code"] for e in events if e["kind"] == "alert_raised"]
    assert alerts == []


def test_full_shoe_arrives_as_dealt_with_sd_notify_and_clean_stop(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, plan, steps = dealt_shoe(seed=21)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    notify_path = str(tmp_path / "notify.sock")
    notify = _NotifyListener(notify_path)
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(
        config, tmp_path / "daemon.log", env={"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "3000000"}
    )
    try:
        assert subscriber.wait_for(lambda s: "online" in s.status, 30), daemon.log_path.read_text()
        wait_until_commandable(daemon)
        refused: list[str] = []
        play(steps, shoe, subscriber, refused)
        assert refused == []
        assert subscriber.wait_for(lambda s: "shoe_ended" in s.kinds(), 30)
        wait_until_idle(daemon, shoe)  # the reader's last verdict frame handled too
        assert subscriber.wait_for(lambda s: device_health(s, "reader").get("connected") is True, 10)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
    assert subscriber.wait_for(lambda s: s.status[-1:] == ["offline"], 10)
    subscriber.stop()
    messages = notify.close()
    assert any("READY=1" in m.splitlines() for m in messages), messages
    assert any(m == "WATCHDOG=1" for m in messages), messages
    assert any("STOPPING=1" in m.splitlines() for m in messages), messages
    events = subscriber.sorted_events()
    assert subscriber.rejected == []
    assert subscriber.consumer.unexplained_gaps == []
    assert {name for name, _ in subscriber.payloads} >= {"event", "status", "state", "health", "reply"}
    assert contract_violations(subscriber.payloads) == []
    assert events[0]["seq"] == 1
    _assert_stream_matches_plan(events, plan)
    ended = [e for e in events if e["kind"] == "shoe_ended"]
    assert [e["data"]["reason"] for e in ended] == ["cut_card"]
    assert plan.hands > 60
    log = daemon.log_lines()
    assert any(line.get("event") == "daemon_stopped" for line in log)
    # every card, round and alert is traceable in the log by event_id
    card_ids = {e["event_id"] for e in events if e["kind"] in ("card_dealt", "round_completed")}
    logged_ids = {line.get("event_id") for line in log}
    assert card_ids <= logged_ids


def test_sigterm_mid_shoe_then_restart_continues_the_shoe(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    deal, plan, steps = dealt_shoe(seed=5, max_hands=24)
    first_of_hand_13 = next(a.t for a in plan.actions if a.kind == "draw" and a.hand == 13)
    part1 = [s for s in steps if s.t < first_of_hand_13 - 1.0]
    part2 = [s for s in steps if s.t >= first_of_hand_13 - 1.0]
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    refused: list[str] = []
    daemon = DaemonProcess(config, tmp_path / "daemon-1.log")
    try:
        assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
        wait_until_commandable(daemon)
        # pyserial drops what was written before it opened the pty: deal only once it has
        daemon.wait_for_log("device connected")
        play(part1, shoe, subscriber, refused)
        assert subscriber.wait_for(lambda s: len(received_winners(s.sorted_events())) == 12, 30)
        wait_until_idle(daemon, shoe)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
    assert subscriber.wait_for(lambda s: s.status[-1:] == ["offline"], 10)
    before = len(subscriber.sorted_events())
    daemon = DaemonProcess(config, tmp_path / "daemon-2.log")
    try:
        restored = daemon.wait_for_log("engine_restored")
        assert restored["events"] == before
        assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
        wait_until_commandable(daemon)
        daemon.wait_for_log("device connected")
        play(part2, shoe, subscriber, refused)
        assert subscriber.wait_for(lambda s: len(received_winners(s.sorted_events())) == 24, 30)
        wait_until_idle(daemon, shoe)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        shoe.close()
        subscriber.stop()
    assert refused == []
    events = subscriber.sorted_events()
    assert subscriber.consumer.unexplained_gaps == []
    _assert_stream_matches_plan(events, plan)
    hands = [e["data"]["hand"] for e in events if e["kind"] == "round_completed"]
    assert hands == list(range(1, 25))
    assert len({e["shoe_id"] for e in events if e["kind"] == "card_dealt"}) == 1  # the same shoe


def _alert_codes(path: Path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT body FROM events WHERE kind = 'alert_raised'").fetchall()
    return {json.loads(body)["data"]["code"] for (body,) in rows}


def _journal_events(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (count,) = db.execute("SELECT count(*) FROM events").fetchone()
    return int(count)


def test_unreachable_broker_keeps_dealing_into_the_journal_and_catches_up(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    network = TcpForwarder(mosquitto.port)  # a port where nothing answers (never opened here)
    deal, plan, steps = dealt_shoe(seed=9, max_hands=6)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, network.port, deal)
    # no broker, so no new_shoe command: the shoe's own first-card mark starts it
    text = json.loads(config.read_text())
    text["table"]["device_starts_shoe"] = True
    config.write_text(json.dumps(text))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        daemon.wait_for_log("daemon_ready")
        play(steps, shoe, subscriber=None, refused=[])
        wait_until_idle(daemon, shoe)  # everything dealt is in the journal
        assert subscriber.events == []
        assert daemon.proc.poll() is None
        journaled = _journal_events(tmp_path / "state" / "journal.sqlite3")
        assert journaled > 6 * 5
        # SIGHUP with the broker's real address: a new publisher takes over and drains the
        # journal; the log level applies at once; a table setting needs a restart
        text["broker"]["port"] = mosquitto.port
        text["log"]["level"] = "debug"
        text["table"]["decks"] = 6
        config.write_text(json.dumps(text))
        daemon.signal(signal.SIGHUP)
        reloaded = daemon.wait_for_log("config_reloaded")
        assert reloaded["applied"] == ["log", "broker"]
        assert reloaded["needs_restart"] == ["table"]
        assert subscriber.wait_for(lambda s: len(s.events) >= journaled, 30), len(subscriber.events)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        subscriber.stop()
        network.close()
        shoe.close()
    events = subscriber.sorted_events()
    assert events[0]["seq"] == 1
    started = [e for e in events if e["kind"] == "shoe_started"]
    assert [e["data"]["started_by"] for e in started] == ["device"]
    _assert_stream_matches_plan(events, plan)


def test_full_journal_raises_alerts_and_the_daemon_keeps_running(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    network = TcpForwarder(mosquitto.port)  # the broker is unreachable until network.open()
    deal, plan, steps = dealt_shoe(seed=4, max_hands=3)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(
        tmp_path,
        shoe.path,
        network.port,
        deal,
        journal='{"max_undelivered_events": 12, "on_full": "refuse_new_rounds"}',
    )
    text = json.loads(config.read_text())
    text["table"]["device_starts_shoe"] = True
    config.write_text(json.dumps(text))
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        daemon.wait_for_log("daemon_ready")
        play(steps, shoe, subscriber=None, refused=[])
        wait_until_idle(daemon, shoe)
        journal = tmp_path / "state" / "journal.sqlite3"
        # the publisher's own alert comes with its capacity check (its health interval)
        deadline = time.monotonic() + 15
        while not {"journal_full", "journal_full_card_refused"} <= _alert_codes(journal):
            assert time.monotonic() < deadline, _alert_codes(journal)
            time.sleep(0.05)
        journaled = _journal_events(journal)
        network.open()
        assert subscriber.wait_for(lambda s: len(s.events) >= journaled, 30)
        # both alerts clear once the backlog drains: the publisher's and the engine's
        assert subscriber.wait_for(
            lambda s: (
                {"journal_full", "journal_full_card_refused"}
                <= {e["data"].get("code") for e in s.sorted_events() if e["kind"] == "alert_cleared"}
            ),
            30,
        ), "journal-full clears"
        assert daemon.proc.poll() is None
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        subscriber.stop()
        network.close()
        shoe.close()
    events = subscriber.sorted_events()
    codes = [e["data"].get("code") for e in events if e["kind"] == "alert_raised"]
    assert "journal_full" in codes
    assert "journal_full_card_refused" in codes
    refused_alert = next(e for e in events if e["data"].get("code") == "journal_full_card_refused")
    assert "stop dealing" in refused_alert["data"]["message"]
    # nothing silently dropped: every card the shoe gave out was dealt or refused, in order
    handled = [e["data"]["card"] for e in events if e["kind"] in ("card_dealt", "card_refused")]
    assert handled == [card for _slot, card, _round in expected_cards(plan)]
    refused_cards = [e for e in events if e["kind"] == "card_refused"]
    assert refused_cards
    assert all(e["data"]["reason"] == "journal_full" for e in refused_cards)
    cleared = {e["data"]["code"] for e in events if e["kind"] == "alert_cleared"}
    assert {"journal_full", "journal_full_card_refused"} <= cleared
    assert contract_violations(subscriber.payloads) == []


def test_missing_device_is_an_alert_and_the_daemon_waits_for_it(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, _plan, _steps = dealt_shoe(seed=1, max_hands=1)
    link = tmp_path / "baccarat-shoe"
    config, events_key, command_key = write_config(tmp_path, str(link), mosquitto.port, deal)
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    shoe = None
    try:
        assert subscriber.wait_for(lambda s: "online" in s.status, 30)
        assert subscriber.wait_for(
            lambda s: any(e["data"].get("code") == "reader_disconnected" for e in s.events), 30
        ), daemon.log_path.read_text()
        assert daemon.proc.poll() is None
        shoe = PtyDevice(link)  # plugged in later
        assert subscriber.wait_for(lambda s: "alert_cleared" in s.kinds(), 30)
        assert subscriber.wait_for(lambda s: device_health(s, "reader").get("connected") is True, 30)
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        subscriber.stop()
        if shoe is not None:
            shoe.close()


def test_lock_and_unlock_reach_the_shoe_and_its_answer_comes_back(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    from drivers.protocols.angel_eye import encode_command

    deal, _plan, _steps = dealt_shoe(seed=3, max_hands=1)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    subscriber = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    received: list[bytes] = []

    def shoe_side(answer: bytes) -> None:
        """The shoe reads one host command and answers ACK (0x06) or NAK 0x15 + code."""
        data = b""
        while len(data) < 10:  # STX 'O' 'P' TYPE(2) DATA(2) ETX BCC(2)
            data += shoe.read(64)
        received.append(data)
        shoe.write(answer)

    try:
        assert subscriber.wait_for(lambda s: "online" in s.status, 30)
        wait_until_commandable(daemon)
        answering = threading.Thread(target=shoe_side, args=(b"\x06",), daemon=True)
        answering.start()
        reply = subscriber.sender.send("lock", {})
        answering.join(10)
        assert reply["status"] == "accepted", (reply, received)
        answering = threading.Thread(target=shoe_side, args=(b"\x1521",), daemon=True)  # NAK: busy
        answering.start()
        unlock = subscriber.sender.send("unlock", {})
        answering.join(10)
        assert unlock["status"] == "refused", unlock
        assert "refused" in unlock["reason"]
        silent = subscriber.sender.send("lock", {})  # the shoe does not answer this time
        assert silent["status"] == "refused", silent
        assert "no answer" in silent["reason"]
        assert subscriber.wait_for(
            lambda s: [e["data"].get("code") for e in s.events].count("reader_command_refused") == 2, 10
        )
        assert daemon.terminate() == 0
    finally:
        daemon.kill()
        subscriber.stop()
        shoe.close()
    assert received[0].startswith(encode_command("LK", 2))
    assert received[1].startswith(encode_command("LK", 1))
    # the audit trail: each request journaled before the shoe was told, then its result
    events = subscriber.sorted_events()
    requested = [e["data"] for e in events if e["kind"] == "reader_command_requested"]
    assert [(d["action"], d["command_id"]) for d in requested] == [
        ("lock", reply["command_id"]),
        ("unlock", unlock["command_id"]),
        ("lock", silent["command_id"]),
    ]
    [locked] = [e["data"] for e in events if e["kind"] == "reader_status" and e["data"]["kind"] == "locked"]
    assert locked["command_id"] == reply["command_id"]
    nak, no_answer = [e["data"] for e in events if e["data"].get("code") == "reader_command_refused"]
    assert nak["details"]["command_id"] == unlock["command_id"]
    assert nak["details"]["reader_code"] == 21  # the NAK's reason code
    assert no_answer["details"]["command_id"] == silent["command_id"]
    assert "no answer" in no_answer["details"]["detail"]
