"""The last ten rounds in the retained state: a shoe dealt through the real reader path (pty) and
the real daemon over a real mosquitto; ``recent_rounds`` holds the newest ten, equal to the
recall of the journal (``baccarat-edge rounds``), valid by the contract, and the same after a
restart of the daemon (read back from the journal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.journal.recall import RoundRecall, recall_from_journal
from daemon.journal.records import JournaledEvent
from daemon.service.config import load_config
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.service.harness import TableSubscriber, contract_violations, dealt_shoe, play, write_config
from tests.support.broker import MosquittoBroker

pytestmark = pytest.mark.mosquitto


def _recent(sub: TableSubscriber) -> list[dict[str, Any]] | None:
    states = [payload for name, payload in sub.payloads if name == "state"]
    return states[-1]["state"].get("recent_rounds") if states else None


def test_the_last_ten_rounds_are_retained_and_survive_a_restart(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    deal, plan, steps = dealt_shoe(seed=23, max_hands=12)
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    config, events_key, command_key = write_config(tmp_path, shoe.path, mosquitto.port, deal)
    loaded = load_config(config, environ={})
    seen: list[JournaledEvent] = []
    daemon = Daemon(loaded, SystemdNotifier({}), config_path=config, on_events=seen.extend)
    sub = TableSubscriber(mosquitto.port, events_key, command_key).start()
    daemon.start()
    hands = plan.hands
    try:
        assert daemon.publisher.subscribed.wait(10)
        refused: list[str] = []
        play(steps, shoe, sub, refused)
        assert refused == []

        def all_decided(s: TableSubscriber) -> bool:
            recent = _recent(s)
            if not recent:
                return False
            return bool(recent[-1]["hand"] == hands and recent[-1]["status"] == "completed")

        assert sub.wait_for(all_decided)
        live = _recent(sub)
    finally:
        daemon.stop()
    assert hands > 10
    assert live is not None
    assert [r["hand"] for r in live] == list(range(hands - 9, hands + 1))
    assert all(r["shoe_id"] == deal.shoe_id and r["outcome"] is not None for r in live)
    assert live == recall_from_journal(loaded.config.journal.path)  # what `baccarat-edge rounds` prints
    folded = RoundRecall()
    for event in seen:
        folded.add(event.body)
    assert live == folded.rounds()

    # a restart: the rounds are read back from the journal's tail, not started afresh
    with sub._cond:
        sub.payloads.clear()
    again = Daemon(load_config(config, environ={}), SystemdNotifier({}), config_path=config)
    again.start()
    try:
        assert sub.wait_for(lambda s: _recent(s) is not None)
        assert _recent(sub) == live
    finally:
        again.stop()
        sub.stop()
        shoe.close()
    assert contract_violations(sub.payloads) == []
