"""The monitor's view of the retained recall: taken through the contract-checked parser, drawn as
one compact line; a recall that breaks the contract is refused as malformed, never a crash."""

from __future__ import annotations

import json
from typing import Any

from daemon.service.state_snapshot import StateSnapshot
from daemon.service.table_text import recall_line, render
from daemon.service.table_view import TableView
from tests.engine.support import cmd, engine, feed, read, start_shoe
from tests.service.test_recent_rounds_snapshot import _journaled

TOPIC = "baccarat/v1/T9/state"


def _state() -> dict[str, Any]:
    table = engine()
    events = start_shoe(table)
    events += feed(table, [read(c, 100 + k) for k, c in enumerate(("9s", "2h", "Kc", "3d"))])  # player
    events += feed(table, [read(c, 200 + k) for k, c in enumerate(("3c", "2d", "4h", "2s"))])
    events += table.handle(cmd("swap", 205, "swap-2", sides=True))
    events += feed(table, [read("Kh", 206)])  # banker
    events += feed(table, [read(c, 300 + k) for k, c in enumerate(("4s", "4h"))])
    events += table.handle(cmd("void_round", 303, "void-3", hand=3))
    events += feed(table, [read("8d", 400)])
    snapshots = StateSnapshot(interval_s=0.0)
    snapshots.observe(_journaled(events))
    snapshots.reset(table)
    return snapshots.get()


def _payload(state: dict[str, Any]) -> bytes:
    return json.dumps(
        {"schema_version": 1, "table_id": "T9", "ts": 1.0, "last_seq": 40, "state": state}
    ).encode()


def test_the_recall_is_shown_as_one_line() -> None:
    view = TableView("T9")
    view.apply(TOPIC, _payload(_state()))
    assert view.malformed == 0, view.last_problem
    assert [r["hand"] for r in view.recent_rounds] == [1, 2, 3, 4]
    assert recall_line(view.recent_rounds) == "1P 2B* 3V 4…"
    assert "Recall  1P 2B* 3V 4…\n" in render(view, colour=False)


def test_a_recall_breaking_the_contract_is_malformed_not_a_crash() -> None:
    state = _state()
    state["recent_rounds"][0]["status"] = "lost"
    view = TableView("T9")
    view.apply(TOPIC, _payload(state))
    assert view.malformed == 1
    assert view.recent_rounds == []
    assert "recent_rounds" in (view.last_problem or "")
    assert "Recall" not in render(view, colour=False)
