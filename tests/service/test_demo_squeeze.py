"""``baccarat-edge demo --reveal squeeze``: the demo's game server reveals each card, in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from daemon.engine.settings import RevealSettings
from daemon.journal import Journal
from daemon.journal.settings import JournalSettings
from daemon.mqtt.reveal_check import RevealChecker, RevealStatus


def test_the_squeeze_demo_reveals_every_card_one_by_one_in_the_tables_order(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "demo", "--lines", "--json", "--reveal", "squeeze",
         "--hands", "5", "--seed", "7", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-2])
    assert summary["complete"] is True
    assert summary["hands"] == 5
    assert summary["refused_commands"] == []
    [path] = list(state.rglob("*.sqlite3"))
    journal = Journal(JournalSettings(path=path), "DEMO-1")
    try:
        events = list(journal.events())
    finally:
        journal.close()
    checker = RevealChecker("DEMO-1")
    order = RevealSettings().order
    dealt: dict[int, list[str]] = {}
    revealed: dict[int, list[str]] = {}
    for event in events:
        data = {k: v for k, v in event.data.items() if k != "sealed"}  # what was published
        envelope = {"table_id": "DEMO-1", "shoe_id": event.shoe_id, "kind": event.kind, "data": data}
        verdict = checker.observe(envelope)
        if event.kind == "card_dealt" and data.get("slot") in order:
            assert "card" not in data, "a squeeze card is published face down"
            dealt.setdefault(data["round"], []).append(data["slot"])
        if event.kind == "card_revealed":
            assert verdict is not None
            assert verdict.status is RevealStatus.VERIFIED, verdict.describe()
            revealed.setdefault(data["round"], []).append(data["slot"])
    assert sorted(dealt) == [1, 2, 3, 4, 5]
    for hand, slots in dealt.items():
        assert revealed[hand] == [s for s in order if s in slots], hand  # each slot once, in order
    reveals = [e for e in events if e.kind == "card_revealed"]
    assert all(e.data["revealed_by"]["source"] == "server" for e in reveals)
