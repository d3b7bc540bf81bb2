"""The cost per card of a squeeze table's commitment: the same shoes dealt open and squeeze.

Each card is one ``Engine.handle`` (on a squeeze table: sealing the card, its SHA-256 commitment,
the fold of the sealed event) plus the projection every event goes through before it is hashed and
published (``public_data`` inside the chain's ``envelope_members``). A squeeze round also needs its
reveal: the game server's ``reveal`` command for the round's slots, timed on its own and reported
per revealed card. Open and squeeze passes alternate over the same shuffled shoes, so the ratio is
a same-run one.

    nice .venv/bin/python -m bench.bench_squeeze [--shoes 4] [--repeats 5] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time
from typing import Any

from bench.common import machine
from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, SupervisorCommand
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal.chain import envelope_members
from daemon.rules.outcome import play_round
from daemon.rules.variants import load_variant_by_name

ORDER = ("P1", "P2", "B1", "B2", "P3", "B3")


def _shoe(rng: random.Random, decks: int) -> tuple[list[Card], list[int]]:
    """A shuffled shoe's cards, and how many cards each round takes (to 20 cards from the end)."""
    cards = list(ALL_CARDS) * decks
    rng.shuffle(cards)
    sizes: list[int] = []
    i = 1 + TableSettings().burn_count(int(cards[0].rank))
    while i < len(cards) - 20:
        _, used = play_round(cards[i:])
        sizes.append(used)
        i += used
    return cards, sizes


def _project(events: list[Any]) -> None:
    """What every event goes through before it is hashed and published."""
    for event in events:
        envelope_members(
            event_id="e",
            seq=1,
            table_id="T1",
            shoe_id=event.shoe_id,
            hand=event.hand,
            kind=event.kind,
            ts=event.at,
            source=event.source,
            data=event.data,
        )


def _timed(engine: Engine, inp: CardRead | SupervisorCommand) -> int:
    """ns of one input: the engine's handling and the projection of its events."""
    start = time.perf_counter_ns()
    _project(engine.handle(inp))
    return time.perf_counter_ns() - start


def _pass(shoes: list[tuple[list[Card], list[int]]], squeeze: bool, seed: int) -> tuple[list[int], list[int]]:
    """One pass over every shoe: per-card ns (handle + projection) and per-revealed-card ns."""
    # (cards a second apart: the unneeded-card window is off, as in the other benches' tables)
    mode = "squeeze" if squeeze else "open"
    settings = TableSettings.model_validate({"reveal": {"mode": mode}, "unneeded_card_window_s": 0})
    variant = load_variant_by_name("standard")
    nonces = random.Random(seed)  # the service draws them from secrets; the bench wants reproducible runs
    per_card: list[int] = []
    per_reveal: list[int] = []
    for number, (cards, sizes) in enumerate(shoes):
        engine = Engine(settings, variant, table_id="T1")
        start = SupervisorCommand("new_shoe", 0.0, "bench", f"shoe-{number}", {"shoe_id": f"S{number}"})
        engine.handle(start)
        reads = [
            CardRead(card, float(k + 1), nonce=f"{nonces.getrandbits(128):032x}" if squeeze else None)
            for k, card in enumerate(cards)
        ]
        i = 1 + settings.burn_count(int(cards[0].rank))
        per_card += [_timed(engine, read) for read in reads[:i]]
        for hand, used in enumerate(sizes, start=1):
            per_card += [_timed(engine, read) for read in reads[i : i + used]]
            i += used
            rnd = engine.state.round
            if squeeze and rnd is not None:
                slots = [s for s in ORDER if s in rnd.cards]
                at = reads[i - 1].at + 0.5
                reveal = SupervisorCommand("reveal", at, "bench", f"r{hand}", {"slots": slots})
                per_reveal.append(_timed(engine, reveal) // len(slots))
    return per_card, per_reveal


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=4)
    parser.add_argument("--decks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    shoes = [_shoe(rng, args.decks) for _ in range(args.shoes)]
    open_ns: list[int] = []
    squeeze_ns: list[int] = []
    reveal_ns: list[int] = []
    for repeat in range(args.repeats):  # alternate, so a busy moment hits both modes alike
        open_ns += _pass(shoes, squeeze=False, seed=repeat)[0]
        cards, reveals = _pass(shoes, squeeze=True, seed=repeat)
        squeeze_ns += cards
        reveal_ns += reveals
    result: dict[str, Any] = {
        "cards_per_mode": len(open_ns),
        "open_us": {"median": statistics.median(open_ns) / 1e3, "p99": _percentile(open_ns, 99) / 1e3},
        "squeeze_us": {
            "median": statistics.median(squeeze_ns) / 1e3,
            "p99": _percentile(squeeze_ns, 99) / 1e3,
        },
        "reveal_per_card_us": {
            "median": statistics.median(reveal_ns) / 1e3,
            "p99": _percentile(reveal_ns, 99) / 1e3,
        },
        "ratio_median": statistics.median(squeeze_ns) / statistics.median(open_ns),
        "ratio_p99": _percentile(squeeze_ns, 99) / _percentile(open_ns, 99),
        "ratio_median_with_reveal": (statistics.median(squeeze_ns) + statistics.median(reveal_ns))
        / statistics.median(open_ns),
        "sha256_one_commitment_us": _sha256_us(),
        "machine": machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"cards per mode: {result['cards_per_mode']} ({args.shoes} shoes x {args.repeats} repeats)")
        for name in ("open_us", "squeeze_us", "reveal_per_card_us"):
            figures = result[name]
            print(f"{name:>20}: median {figures['median']:.1f} us, p99 {figures['p99']:.1f} us")
        print(
            f"squeeze/open per card: median x{result['ratio_median']:.2f}, p99 x{result['ratio_p99']:.2f}; "
            f"with the card's share of its reveal: median x{result['ratio_median_with_reveal']:.2f}"
        )
        print(f"one SHA-256 commitment alone: {result['sha256_one_commitment_us']:.2f} us")
        print(f"machine: {result['machine']}")
    return result


def _sha256_us() -> float:
    """The bare hash of one commitment string, for scale."""
    text = ("baccarat-edge card commitment v1\nT1\nS1\n7\nP1\n8s\n" + "0" * 32).encode()
    start = time.perf_counter_ns()
    for _ in range(10_000):
        hashlib.sha256(text).hexdigest()
    return (time.perf_counter_ns() - start) / 10_000 / 1e3


if __name__ == "__main__":
    main()
