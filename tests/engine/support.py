"""Helpers shared by the engine tests: building engines, feeding inputs, checking invariants."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

from common.cards import Card
from common.inputs import CardRead, EngineInput, SupervisorCommand
from daemon.alerts import ALERTS, AlertCode, IdScheme, RaisedBy
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.squeeze import unsealed
from daemon.engine.table import Engine
from daemon.rules.outcome import RoundOutcome, next_slot
from daemon.rules.variants import Variant, load_variant_by_name

ROUND_ORDER = ("P1", "B1", "P2", "B2", "P3", "B3")


@cache
def variant(name: str = "standard") -> Variant:
    return load_variant_by_name(name)


def engine(variant_name: str = "standard", **settings: Any) -> Engine:
    return Engine(TableSettings.model_validate(settings), variant(variant_name))


def feed(eng: Engine, inputs: Iterable[EngineInput]) -> list[Event]:
    out: list[Event] = []
    for inp in inputs:
        out.extend(eng.handle(inp))
    return out


def cmd(action: str, at: float, command_id: str = "c", **args: Any) -> SupervisorCommand:
    return SupervisorCommand(action, at, "floor-1", command_id, args)


def read(code: str, at: float, **kw: Any) -> CardRead:
    return CardRead(Card.parse(code), at, **kw)


def kinds(events: Iterable[Event]) -> list[str]:
    return [e.kind for e in events]


def of_kind(events: Iterable[Event], kind: str) -> list[Event]:
    return [e for e in events if e.kind == kind]


def alerts(events: Iterable[Event], code: str | None = None) -> list[Event]:
    return [e for e in events if e.kind == "alert_raised" and (code is None or e.data["code"] == code)]


def start_shoe(
    eng: Engine, at: float = 0.0, indicator: str = "2c", burns: tuple[str, ...] = ("Kd", "Kh")
) -> list[Event]:
    """Start a shoe and do an opening burn (default indicator 2 burns 2 cards)."""
    out = feed(eng, [cmd("new_shoe", at, "new", shoe_id="S1"), read(indicator, at + 1)])
    out += feed(eng, [read(c, at + 2 + k) for k, c in enumerate(burns)])
    return out


def roundtrip(events: Iterable[Event]) -> list[Event]:
    """Events through JSON and back, as the journal stores them."""
    return [Event.from_dict(json.loads(json.dumps(e.to_dict(), allow_nan=False))) for e in events]


def assert_restores(eng: Engine, events: list[Event]) -> None:
    """Folding the engine's own events (through JSON) gives an identical state and snapshot."""
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(events))
    assert restored.state.comparable() == eng.state.comparable()
    assert restored.snapshot() == eng.snapshot()


def assert_engine_alert_as_catalogued(data: dict[str, Any]) -> None:
    """An engine ``alert_raised`` event's data is as ``daemon.alerts`` describes its code (on a
    squeeze table with its sealed members in their places)."""
    data = unsealed(data)
    spec = ALERTS[AlertCode(data["code"])]
    assert spec.raised_by is RaisedBy.ENGINE, data["code"]
    assert data["message"] == spec.summary
    assert IdScheme.ENGINE.pattern.fullmatch(data["alert_id"]), data["alert_id"]
    assert (
        {"alert_id", "code", "message", "hand", "holds", "device", "details"} <= set(data) <= set(spec.fields)
    )
    always = {d for d in spec.details if not d.startswith("(")}
    assert always <= set(data["details"]) <= {d.strip("()") for d in spec.details}, data
    if not spec.holds:
        assert data["holds"] is None, data


def assert_legal(events: list[Event], decks: int) -> None:
    """Every published round is a legal, complete round with the right outcome; composition holds;
    every alert is as the alert catalogue describes it."""
    seen: Counter[str] = Counter()
    completed: set[tuple[str | None, int | None]] = set()
    for e in events:
        if e.kind == "alert_raised":
            assert_engine_alert_as_catalogued(e.data)
        if e.kind == "card_dealt" or (e.kind in ("card_outside_game", "card_refused") and e.data["counted"]):
            seen[e.data["card"]] += 1
        elif e.kind == "round_corrected":
            for slot in e.data["supplied"]:
                moved = (*e.data.get("from_unneeded_burn", ()), *e.data.get("from_outside_game", ()))
                if slot not in moved:  # (counted already: as a burn, or drawn outside the game)
                    seen[e.data["after"][slot]] += 1
        elif e.kind == "shoe_started":
            seen.clear()
            completed.clear()
        elif e.kind == "round_completed":
            assert (e.shoe_id, e.hand) not in completed, f"hand {e.hand} completed twice"
            completed.add((e.shoe_id, e.hand))
            cards = e.data["cards"]
            assert list(cards) == [s for s in ROUND_ORDER if s in cards]
            player = [Card.parse(cards[s]) for s in ("P1", "P2", "P3") if s in cards]
            banker = [Card.parse(cards[s]) for s in ("B1", "B2", "B3") if s in cards]
            assert next_slot(player, banker) is None, f"round {e.hand} published incomplete: {cards}"
            assert e.data["outcome"] == RoundOutcome(tuple(player), tuple(banker)).to_dict()
        assert all(n <= decks for n in seen.values()), f"over composition: {seen.most_common(1)}"


# ------------------------------------------------------------------ a betting-window table
def window(**settings: Any) -> Engine:
    """An engine on a ``game_flow: betting_window`` table."""
    return engine(game_flow="betting_window", **settings)


def bet(eng: Engine, round_id: str, at: float, close_after: float = 5.0) -> list[Event]:
    """The server opens betting for ``round_id`` at ``at`` and closes it ``close_after`` later."""
    return feed(
        eng,
        [
            cmd("open_betting", at, f"open-{round_id}", round_id=round_id),
            cmd("close_betting", at + close_after, f"close-{round_id}", round_id=round_id),
        ],
    )


def deal(eng: Engine, cards: tuple[str, ...], at: float, **kw: Any) -> list[Event]:
    """The reader reads ``cards`` half a second apart from ``at``."""
    return feed(eng, [read(c, at + 0.5 * k, **kw) for k, c in enumerate(cards)])
