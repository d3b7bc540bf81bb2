"""Engine throughput: full 8-deck shoes through ``Engine.handle``, card by card.

Each shoe is shuffled, started with ``new_shoe``, burned, and dealt round by round
to a cut card 20 cards from the end (the inputs a clean table sends). Reported:
cards per second over all shoes, median and p99 wall time of one ``handle`` call
per card, and the ratio to a baseline measured in the same run: bare
``daemon.rules.outcome.play_round`` over the same rounds (the cost of just
applying the third-card rule, no validation, no events).

    .venv/bin/python -m bench.bench_engine [--shoes 20] [--seed 1] [--variant standard] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from daemon.cards import ALL_CARDS, Card
from daemon.engine.inputs import CardRead, CutCardDrawn, EngineInput, SupervisorCommand
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.outcome import play_round
from daemon.rules.variants import load_variant_by_name


def _shoe(settings: TableSettings, rng: random.Random) -> tuple[list[EngineInput], list[list[Card]]]:
    """Inputs for one clean shoe, and the rounds' cards (for the baseline)."""
    cards = list(ALL_CARDS) * settings.decks
    rng.shuffle(cards)
    cut_at = len(cards) - 20
    t = 0.0
    inputs: list[EngineInput] = [SupervisorCommand("new_shoe", t, "bench", "shoe")]
    burn = settings.burn_count(int(cards[0].rank))
    i = 0
    for _ in range(1 + burn):
        t += 1.0
        inputs.append(CardRead(cards[i], t, transmission_id=str(i)))
        i += 1
    rounds: list[list[Card]] = []
    while i < cut_at:
        _, used = play_round(cards[i:])
        rounds.append(cards[i : i + used])
        t += 20.0
        for card in cards[i : i + used]:
            t += 1.0
            if i == cut_at:
                inputs.append(CutCardDrawn(t - 0.5))
            inputs.append(CardRead(card, t, transmission_id=str(i)))
            i += 1
    if not any(isinstance(x, CutCardDrawn) for x in inputs):
        inputs.append(CutCardDrawn(t + 1.0))
        _, used = play_round(cards[i:])
        rounds.append(cards[i : i + used])
        for card in cards[i : i + used]:
            t += 1.0
            inputs.append(CardRead(card, t, transmission_id=str(i)))
            i += 1
    return inputs, rounds


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(shoes: int, seed: int, variant_name: str) -> dict[str, Any]:
    settings = TableSettings(variant=variant_name)
    variant = load_variant_by_name(variant_name)
    rng = random.Random(seed)
    dealt = [_shoe(settings, rng) for _ in range(shoes)]
    per_card_ns: list[int] = []
    engine_total_ns = 0
    cards = 0
    rounds_completed = 0
    for inputs, _ in dealt:
        engine = Engine(settings, variant)
        for inp in inputs:
            start = time.perf_counter_ns()
            events = engine.handle(inp)
            elapsed = time.perf_counter_ns() - start
            engine_total_ns += elapsed
            if isinstance(inp, CardRead):
                per_card_ns.append(elapsed)
                cards += 1
            rounds_completed += sum(1 for e in events if e.kind == "round_completed")
    baseline_ns = 0
    baseline_cards = 0
    for _, rounds in dealt:
        start = time.perf_counter_ns()
        for round_cards in rounds:
            play_round(round_cards)
        baseline_ns += time.perf_counter_ns() - start
        baseline_cards += sum(len(r) for r in rounds)
    engine_rate = cards / (engine_total_ns / 1e9)
    baseline_rate = baseline_cards / (baseline_ns / 1e9)
    return {
        "shoes": shoes,
        "decks": settings.decks,
        "variant": variant_name,
        "cards": cards,
        "rounds_completed": rounds_completed,
        "engine_cards_per_s": round(engine_rate),
        "per_card_median_us": round(statistics.median(per_card_ns) / 1000, 2),
        "per_card_p99_us": round(_percentile([float(x) for x in per_card_ns], 99) / 1000, 2),
        "per_card_max_us": round(max(per_card_ns) / 1000, 2),
        "baseline_play_round_cards_per_s": round(baseline_rate),
        "engine_time_vs_baseline": round(baseline_rate / engine_rate, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variant", default="standard")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.shoes, args.seed, args.variant)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
