"""A dealer dealing on into a full journal cannot grow it (issue 16): the real engine thread and
journal (in-process daemon, its broker away so nothing is delivered and the journal stays full),
2,000 cards, the journal's rows and bytes measured before and after."""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, DeviceTarget
from daemon.engine.aggregate import LISTED, SUMMARY_EVERY
from daemon.service.config import load_config
from daemon.service.logging import reset_logging
from daemon.service.runner import Daemon
from daemon.service.sdnotify import SystemdNotifier
from drivers.pty_device import PtyDevice
from tests.service.harness import dealt_shoe, write_config

CARDS = 2000


def _rows(path: Path) -> tuple[int, int, int, list[dict[str, Any]]]:
    """Events and inputs stored, the bytes of their bodies, and the event bodies."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        events = db.execute("SELECT count(*) FROM events").fetchone()[0]
        inputs = db.execute("SELECT count(*) FROM inputs").fetchone()[0]
        stored = db.execute(
            "SELECT (SELECT total(length(body)) FROM events) + (SELECT total(length(body)) FROM inputs)"
        ).fetchone()[0]
        bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM events ORDER BY seq")]
    finally:
        db.close()
    return int(events), int(inputs), int(stored), bodies


def test_two_thousand_cards_dealt_into_a_full_journal_grow_it_by_a_bounded_small_amount(
    tmp_path: Path,
) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    deal, _plan, _steps = dealt_shoe(seed=4, max_hands=1)
    config, _ek, _ck = write_config(tmp_path, shoe.path, 1, deal)  # port 1: no broker, nothing delivered
    data = json.loads(config.read_text())
    data["table"].update(device_starts_shoe=True)
    data["journal"] = {"max_undelivered_events": 10}
    data["service"]["shutdown_timeout_s"] = 2
    config.write_text(json.dumps(data, indent=1))
    daemon = Daemon(load_config(config, environ={}), notifier=SystemdNotifier({}), config_path=config)
    journal_path = Path(data["state_dir"]) / "journal.sqlite3"
    at = time.time()
    try:
        daemon.start()
        opening = [CardRead(Card.parse("2c"), at, target=DeviceTarget.FIRST_CARD)]
        burn_and_natural = ("Kd", "Kh", "9s", "2h", "Kc", "3d")
        opening += [CardRead(Card.parse(c), at + 1 + k) for k, c in enumerate(burn_and_natural)]
        for inp in opening:  # a shoe opened, its burn and one natural: more than 10 events undelivered
            daemon.submit(inp)
        assert daemon.wait_until_processed(10)
        assert not daemon.journal.admits_new_round()  # type: ignore[union-attr]
        # the first refused card: the journal_full_card_refused alert
        daemon.submit(CardRead(Card.parse("7h"), at + 10))
        assert daemon.wait_until_processed(10)
        events_before, inputs_before, bytes_before, _ = _rows(journal_path)
        codes = [c.code for c in itertools.islice(itertools.cycle(ALL_CARDS), CARDS)]
        for k, code in enumerate(codes):
            daemon.submit(CardRead(Card.parse(code), at + 11 + k * 0.05))
        assert daemon.wait_until_processed(60)
    finally:
        daemon.stop()  # a clean stop journals the last summary
        shoe.close()
        reset_logging()
    events_after, inputs_after, bytes_after, bodies = _rows(journal_path)
    summaries = [b for b in bodies if b["kind"] == "cards_refused"]
    listed = [b for b in bodies if b["kind"] == "card_refused"]
    # which and how many cards: every one, in order
    summarised = [c for s in summaries for c in s["data"]["codes"]]
    assert [b["data"]["card"] for b in listed][1:] + summarised == codes
    assert summaries[-1]["data"]["refused"] == CARDS + 1
    # bounded: one summary per SUMMARY_EVERY cards (+ the listed ones), each with its one input row
    most = (LISTED - 1) + -(-(CARDS - LISTED + 1) // SUMMARY_EVERY) + 5
    assert events_after - events_before <= most
    assert inputs_after - inputs_before <= most
    # one event and one input per card stored ~780 bytes a card (1.56 MB for these); now ~50 kB
    assert bytes_after - bytes_before < 80_000, bytes_after - bytes_before
