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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from drivers.fixtures import FixtureStep
from drivers.pty_device import PtyDevice
from drivers.simulate import ShoePlan
from tests.service.harness import (
    DaemonProcess,
    TableSubscriber,
    TcpForwarder,
    comparable_stream,
    contract_violations,
    dealt_shoe,
    device_health,
    expected_cards,
    expected_winners,
    play,
    received_cards,
    received_winners,
    untraced_events,
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
    # every card, round and alert (every event) is traceable in the log by event_id
    assert untraced_events(events, log) == []


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


MID_ROUND_HANDS = 8
MID_ROUND_HAND = 5


def _received_at_least(count: int) -> Callable[[TableSubscriber], bool]:
    return lambda s: len(s.events) >= count


def _deal_with_sigterms(
    tmp: Path, port: int, steps: list[FixtureStep], stop_after: list[int]
) -> tuple[TableSubscriber, list[list[dict[str, Any]]]]:
    """Deal ``steps``; after each step index in ``stop_after``: wait until everything read is
    handled, SIGTERM (exit 0), start ``baccarat-edge run`` again. Returns the subscriber and
    the stream as it stood at each stop."""
    tmp.mkdir()
    deal, _plan, _steps = dealt_shoe(seed=5, max_hands=MID_ROUND_HANDS)
    shoe = PtyDevice(tmp / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp, shoe.path, port, deal)
    subscriber = TableSubscriber(port, events_key, command_key).start()
    refused: list[str] = []
    at_stops: list[list[dict[str, Any]]] = []
    bounds = [0, *(k + 1 for k in stop_after), len(steps)]
    logs: list[Path] = []
    try:
        for part in range(len(bounds) - 1):
            logs.append(tmp / f"daemon-{part}.log")
            daemon = DaemonProcess(config, logs[-1])
            try:
                assert subscriber.wait_for(lambda s: s.status[-1:] == ["online"], 30)
                wait_until_commandable(daemon)
                # pyserial drops what was written before it opened the pty: deal once it has
                daemon.wait_for_log("device connected")
                play(
                    steps[bounds[part] : bounds[part + 1]],
                    shoe,
                    subscriber,
                    refused,
                    before_command=lambda: wait_until_idle(daemon, shoe),  # noqa: B023 (called at once)
                )
                wait_until_idle(daemon, shoe)
                if part < len(bounds) - 2:
                    journaled = _journal_events(tmp / "state" / "journal.sqlite3")
                    assert subscriber.wait_for(_received_at_least(journaled), 30)
                    at_stops.append(subscriber.sorted_events())
                assert daemon.terminate() == 0
            finally:
                daemon.kill()
            assert subscriber.wait_for(lambda s: s.status[-1:] == ["offline"], 10)
    finally:
        shoe.close()
        subscriber.stop()
    assert refused == []
    assert subscriber.rejected == []
    assert subscriber.consumer.unexplained_gaps == []
    log = [line for path in logs for line in DaemonProcess.read_log(path)]
    assert untraced_events(subscriber.sorted_events(), log) == []
    return subscriber, at_stops


def test_sigterm_mid_round_then_restart_finishes_the_same_round(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    """SIGTERM after P1 and B1 of a hand, before the round is decided: the restarted daemon
    finishes that round from the journal with the cards still to come, and the server's
    stream is the one an uninterrupted daemon gives (seq, kind, data), with no gap."""
    _deal, plan, steps = dealt_shoe(seed=5, max_hands=MID_ROUND_HANDS)
    hand = [a for a in plan.actions if a.kind == "draw" and a.hand == MID_ROUND_HAND]
    assert [a.target.value for a in hand[:3] if a.target is not None] == ["P1", "B1", "P2"]
    cut = (hand[1].t + hand[2].t) / 2  # after every copy of B1's frame, before P2's
    stop_after = max(i for i, s in enumerate(steps) if s.t < cut)

    calm, _ = _deal_with_sigterms(tmp_path / "calm", mosquitto.port, steps, [])
    stopped, [at_stop] = _deal_with_sigterms(tmp_path / "stopped", mosquitto.port, steps, [stop_after])

    # the stop really was mid-round: P1 and B1 of the hand dealt, the round not decided
    cards = [e["data"] for e in at_stop if e["kind"] == "card_dealt"]
    last_two = [(c["slot"], c.get("round")) for c in cards[-2:]]
    assert last_two == [("P1", MID_ROUND_HAND), ("B1", MID_ROUND_HAND)]
    assert [h for h, _ in received_winners(at_stop)] == list(range(1, MID_ROUND_HAND))
    calm_events, stopped_events = calm.sorted_events(), stopped.sorted_events()
    _assert_stream_matches_plan(stopped_events, plan)
    assert stopped_events[0]["seq"] == 1
    # the same round went on: hand 5's cards after the restart belong to the round opened before
    assert len({e["shoe_id"] for e in stopped_events if e["kind"] == "card_dealt"}) == 1
    assert comparable_stream(stopped_events) == comparable_stream(calm_events)


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
    # nothing silently dropped: every card the shoe gave out was dealt or refused, in order (past
    # the first refused ones, a cards_refused summary names them: daemon/engine/aggregate.py)
    handled = [
        card
        for e in events
        for card in (
            [e["data"]["card"]] if e["kind"] in ("card_dealt", "card_refused") else e["data"].get("codes", [])
        )
        if e["kind"] in ("card_dealt", "card_refused", "cards_refused")
    ]
    assert handled == [card for _slot, card, _round in expected_cards(plan)]
    refused_cards = [e for e in events if e["kind"] == "card_refused"]
    assert refused_cards
    assert all(e["data"]["reason"] == "journal_full" for e in refused_cards)
    cleared = {e["data"]["code"] for e in events if e["kind"] == "alert_cleared"}
    assert {"journal_full", "journal_full_card_refused"} <= cleared
    assert contract_violations(subscriber.payloads) == []
    # the engine's alerts and the publisher's own are traceable in the log by event_id
    alerts = [e for e in events if e["kind"] in ("alert_raised", "alert_cleared")]
    assert {e["data"]["code"] for e in alerts} >= {"journal_full", "journal_full_card_refused"}
    assert untraced_events(alerts, daemon.log_lines()) == []
    assert untraced_events(events, daemon.log_lines()) == []


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
    alerts = [e for e in subscriber.sorted_events() if e["kind"] in ("alert_raised", "alert_cleared")]
    assert [(e["kind"], e["data"]["code"]) for e in alerts] == [
        ("alert_raised", "reader_disconnected"),
        ("alert_cleared", "reader_disconnected"),
    ]
    assert untraced_events(alerts, daemon.log_lines()) == []


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
    alerts = [e for e in events if e["kind"] == "alert_raised"]
    assert len(alerts) == 2
    assert untraced_events(events, daemon.log_lines()) == []
