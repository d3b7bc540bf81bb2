"""Game-flow fault campaign: how each physical round of a ``betting_window`` table ends.

Shoes of 9 rounds are dealt by the rules with the game server's betting window
(``daemon.simulation.flow_dealer``), with one fault in rounds 1, 3, 5 and 7, encoded in a reader
protocol and decoded by the real decoders into a fresh engine (a reader unplugged mid-round is a
``DeviceConnection`` down and up; an outage of the edge drops what was sent meanwhile and restores
the engine from its own events, through JSON, as the daemon does from its journal; a late close
carries the time the server issued it where commands carry one). Then a supervisor rearranges
each held round to its physical cards (when they differ) and resolves its hold. Each physical
round is counted as:

* ``identical``: completed with its physical cards, no hold;
* ``held_then_corrected``: held first, then completed with its physical cards;
* ``held_uncorrected``: held, and the correction did not complete it;
* ``lost_alerted`` / ``lost_silent``: never completed nor held under its round id, with / without
  an alert naming it (its round id, or a skipped range of ids around it);
* ``WRONG``: completed with other cards than the physical ones (must be 0).

One command prints the table, per fault and protocol (60 shoes: 540 rounds each)::

    .venv/bin/python -m bench.flow_campaign [--games 60] [--faults unscanned ...] [--protocols ...]
"""

from __future__ import annotations

import argparse
import random
from collections import Counter

from common.inputs import SupervisorCommand
from daemon.engine.commands import round_id_parts
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.simulation.flow_dealer import FlowFault, FlowGame, plan_flow_game
from daemon.simulation.flow_replay import replay_flow_game

SETTINGS = TableSettings.model_validate({"game_flow": "betting_window"})
PROTOCOLS = ("ascii_lines", "usb_hid", "angel_eye")
FAULTS = (
    "unplug_mid_round",
    "unscanned",
    "late_close",
    "quick_reopen",
    "misread_deal_on",
    "outage",
    "empty_window",
)
COLUMNS = ("identical", "held_then_corrected", "held_uncorrected", "lost_alerted", "lost_silent", "WRONG")


def run(game: FlowGame, protocol: str) -> tuple[Engine, list[Event]]:
    """The engine fed with the game as the daemon would feed it, outages of the edge included."""
    return replay_flow_game(game, protocol, SETTINGS)


def correct(engine: Engine, game: FlowGame) -> set[str]:
    """A supervisor's corrections: each held round rearranged to its physical cards, then
    ``resolve_hold``; the round ids that then complete with their physical cards."""
    st = engine.state
    fixed: set[str] = set()
    at = 20_000.0
    for hand in sorted(st.held):
        round_id = st.round_ids.get(hand)
        if round_id is None:
            continue
        physical = game.rounds[round_id]
        if st.held[hand].cards != physical:
            args = {"hand": hand, "cards": physical}
            engine.handle(SupervisorCommand("rearrange", at, "floor", f"fix-{hand}", args))
        for e in engine.handle(
            SupervisorCommand("resolve_hold", at + 0.5, "floor", f"ok-{hand}", {"hand": hand})
        ):
            if e.kind == "round_completed" and e.data["cards"] == physical:
                fixed.add(round_id)
        at += 1
    return fixed


def _alerted_ids(events: list[Event]) -> set[str]:
    """The round ids an alert names: its ``round_id``, and the ids a skipped range lies over."""
    named: set[str] = set()
    for e in events:
        if e.kind != "alert_raised":
            continue
        details = e.data.get("details") or {}
        round_id, last = details.get("round_id"), details.get("last_round_id")
        if isinstance(round_id, str):
            named.add(round_id)
        if isinstance(round_id, str) and isinstance(last, str):
            before, after = round_id_parts(last), round_id_parts(round_id)
            if before is not None and after is not None and before[0] == after[0]:
                named |= {f"{after[0]}{n}" for n in range(before[1] + 1, after[1])}
    return named


def classify(game: FlowGame, events: list[Event], fixed: set[str]) -> Counter[str]:
    """Each physical round's ending (module docstring)."""
    status: dict[str, str] = {}
    for e in events:
        round_id = e.data.get("round_id") if e.kind in ("round_completed", "round_held") else None
        if round_id is None or round_id in status:
            continue
        if e.kind == "round_held":
            status[round_id] = "held_then_corrected" if round_id in fixed else "held_uncorrected"
        else:
            status[round_id] = "identical" if e.data["cards"] == game.rounds[round_id] else "WRONG"
    named = _alerted_ids(events)
    return Counter(
        status.get(round_id, "lost_alerted" if round_id in named else "lost_silent")
        for round_id in game.round_ids
    )


def campaign(fault: str, protocol: str, games: int) -> Counter[str]:
    rng = random.Random(21)
    total: Counter[str] = Counter()
    for seed in range(games):
        faults = tuple(
            FlowFault(
                fault,
                r,
                card_index=-1 if fault == "unscanned" else rng.randint(0, 3),
                delay=90.0 if fault == "empty_window" else 5.0,
            )
            for r in (1, 3, 5, 7)
        )
        game = plan_flow_game(seed, protocol, 9, faults)
        engine, events = run(game, protocol)
        total += classify(game, events, correct(engine, game))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=60, help="shoes per fault and protocol (9 rounds each)")
    parser.add_argument("--faults", nargs="+", default=list(FAULTS), choices=FAULTS, metavar="FAULT")
    parser.add_argument(
        "--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS, metavar="PROTOCOL"
    )
    args = parser.parse_args()
    print(f"| fault | protocol | rounds | {' | '.join(COLUMNS)} |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for fault in args.faults:
        for protocol in args.protocols:
            total = campaign(fault, protocol, args.games)
            cells = " | ".join(str(total.get(column, 0)) for column in COLUMNS)
            print(f"| {fault} | {protocol} | {sum(total.values())} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
