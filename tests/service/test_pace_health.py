"""The table's pace in its retained health, from its journal: a dealer named by a signed
``dealer_changed``, a shoe dealt through the real reader path (pty) and the real daemon over a
real mosquitto; the pace survives a restart of the daemon (read back from the journal), and the
fleet view (``--json``) and its Prometheus exposition (promtool-checked) carry it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.fleet.collect import collect
from daemon.fleet.metrics import exposition
from daemon.fleet.render import as_json
from daemon.fleet.tables import worst_first
from daemon.journal.pace import PaceTracker, add_record
from daemon.journal.records import JournaledEvent
from daemon.mqtt.client_options import ClientOptions
from daemon.service.config import load_config
from daemon.service.pace_health import TablePace
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.fleet.promtool import promtool_check_metrics
from tests.service.harness import (
    TABLE_ID,
    TableSubscriber,
    contract_violations,
    dealt_shoe,
    play,
    write_config,
)
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto


def _fleet_options(port: int) -> ClientOptions:
    return ClientOptions(
        host="127.0.0.1",
        port=port,
        tls=None,
        username=None,
        password=None,
        mqtt5=True,
        table="",
        events_key=None,
    )


def _pace(sub: TableSubscriber) -> dict[str, Any] | None:
    return None if sub.health is None else sub.health.get("pace")


def test_the_pace_is_in_the_health_survives_a_restart_and_reaches_the_fleet_view(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, plan, steps = dealt_shoe(seed=11, max_hands=3)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    seen: list[JournaledEvent] = []
    daemon = Daemon(
        load_config(config, environ={}), SystemdNotifier({}), config_path=config, on_events=seen.extend
    )
    sub = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon.start()
    try:
        assert daemon.publisher.subscribed.wait(10)
        reply = sub.sender.send("dealer_changed", {"dealer_id": "D-17", "name": "Zoë"})
        assert reply["status"] == "accepted"
        refused: list[str] = []
        play(steps, shoe, sub, refused)
        assert refused == []
        decided = plan.hands
        assert sub.wait_for(lambda s: (_pace(s) or {}).get("table", {}).get("rounds") == decided)
        live = _pace(sub)
    finally:
        daemon.stop()
    # the same figures as the pace fold over every event the daemon journaled
    expected = PaceTracker()
    for event in seen:
        add_record(expected, event.body)
    assert live == expected.report()
    assert live is not None
    assert live["dealer"] == "D-17"
    assert live["dealers"]["D-17"]["rounds"] == decided
    assert live["table"]["rounds_per_hour"] is not None

    # a restart: the pace is read back from the journal, not counted from zero
    sub.health = None
    again = Daemon(load_config(config, environ={}), SystemdNotifier({}), config_path=config)
    again.start()
    try:
        assert sub.wait_for(lambda s: _pace(s) is not None)
        assert _pace(sub) == live
        collected = collect(_fleet_options(mosquitto.port))
    finally:
        again.stop()
        sub.stop()
        shoe.close()
    assert contract_violations(sub.payloads) == []

    summaries = worst_first(collected.fleet.records(), time.time())
    document = json.loads(as_json(summaries, time.time(), collected.messages))
    [table] = [t for t in document["table_summaries"] if t["table_id"] == TABLE_ID]
    assert table["pace"] == live
    text = exposition(summaries, collected.messages, True, collected.fleet.ignored_topics)
    promtool_check_metrics(text)
    assert f'baccarat_edge_pace_rounds{{table="{TABLE_ID}",dealer="D-17"}} {decided}' in text
    assert f'baccarat_edge_pace_rounds{{table="{TABLE_ID}",dealer="*"}} {decided}' in text


class _Journal:
    """Stands in for the journal's ``events()`` only to count how often it is read."""

    def __init__(self, events: list[JournaledEvent]) -> None:
        self.rows = events
        self.reads = 0

    def events(self) -> list[JournaledEvent]:
        self.reads += 1
        return self.rows


def _event(seq: int, kind: str, at: float, hand: int | None, data: dict[str, Any]) -> JournaledEvent:
    return JournaledEvent(seq, f"e{seq}", kind, at, "S1", hand, "reader", data, "engine", at)


def test_the_journal_is_read_once_and_the_report_rebuilt_only_after_a_change() -> None:
    journal = _Journal(
        [
            _event(1, "dealer_changed", 0.0, None, {"dealer_id": "D1"}),
            _event(2, "round_opened", 10.0, 1, {"hand": 1}),
            _event(3, "round_completed", 40.0, 1, {"hand": 1}),
        ]
    )
    pace = TablePace.from_journal(journal)
    first = pace.report()
    assert first["dealers"]["D1"]["rounds"] == 1
    assert pace.report() is first  # no change: the same report, nothing recomputed
    pace.observe([_event(4, "card_dealt", 50.0, 2, {"slot": "P1"})])
    assert pace.report() is first  # a card changes no figure
    pace.observe([_event(5, "round_opened", 50.0, 2, {"hand": 2}), _event(6, "round_completed", 80.0, 2, {})])
    assert pace.report()["dealers"]["D1"]["rounds"] == 2
    assert journal.reads == 1
