"""Engine throughput: full 8-deck shoes through ``Engine.handle``, card by card.

Each shoe is shuffled, started with ``new_shoe``, burned, and dealt round by round
to a cut card 20 cards from the end (the inputs a clean table sends). Reported:
cards per second over all shoes (wall time inside ``handle``, and per CPU second of
the process, which shared machines disturb less), median and p99 wall time of one
``handle`` call per card, and the ratio to a baseline measured in the same run: bare
``daemon.rules.outcome.play_round`` over the same rounds (the cost of just
applying the third-card rule, no validation, no events).

    .venv/bin/python -m bench.bench_engine [--shoes 20] [--seed 1] [--variant standard] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, CutCardDrawn, EngineInput, SupervisorCommand
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.outcome import play_round
from daemon.rules.variants import Variant, load_variant_by_name


def _shoe(settings: TableSettings, rng: random.Random) -> tuple[list[EngineInput], list[list[Card]]]:
    """Inputs for one clean shoe, and the rounds' cards (for the baseline)."""
    cards = list(ALL_CARDS) * settings.decks
    rng.shuffle(cards)
    cut_at = len(cards) - 20
    t = 0.0
    inputs: list[EngineInput] = [SupervisorCommand("new_shoe", t, "bench", "shoe", {})]
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


def _engine_pass(
    dealt: list[tuple[list[EngineInput], list[list[Card]]]], settings: TableSettings, variant: Variant
) -> tuple[float, float, list[int], int]:
    """One pass over every shoe: (wall s in handle, CPU s of the pass, per-card ns, rounds completed).

    CPU time includes the loop's own bookkeeping (a slight overestimate of the engine's share).
    """
    per_card_ns: list[int] = []
    total_ns = 0
    rounds_completed = 0
    clock = time.perf_counter_ns
    cpu_start = time.process_time_ns()
    for inputs, _ in dealt:
        engine = Engine(settings, variant)
        for inp in inputs:
            start = clock()
            events = engine.handle(inp)
            elapsed = clock() - start
            total_ns += elapsed
            if isinstance(inp, CardRead):
                per_card_ns.append(elapsed)
            rounds_completed += sum(1 for e in events if e.kind == "round_completed")
    cpu_s = (time.process_time_ns() - cpu_start) / 1e9
    return total_ns / 1e9, cpu_s, per_card_ns, rounds_completed


def _baseline_pass(dealt: list[tuple[list[EngineInput], list[list[Card]]]]) -> tuple[float, float]:
    """Bare ``play_round`` over the same rounds: (wall seconds, CPU seconds)."""
    start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
    for _, rounds in dealt:
        for round_cards in rounds:
            play_round(round_cards)
    return (time.perf_counter_ns() - start) / 1e9, (time.process_time_ns() - cpu_start) / 1e9


def run(shoes: int, seed: int, variant_name: str, repeats: int) -> dict[str, Any]:
    settings = TableSettings(variant=variant_name)
    variant = load_variant_by_name(variant_name)
    rng = random.Random(seed)
    dealt = [_shoe(settings, rng) for _ in range(shoes)]
    cards = sum(1 for inputs, _ in dealt for x in inputs if isinstance(x, CardRead))
    baseline_cards = sum(len(r) for _, rounds in dealt for r in rounds)
    engine_rates: list[float] = []
    engine_cpu_rates: list[float] = []
    baseline_rates: list[float] = []
    baseline_cpu_rates: list[float] = []
    per_card_ns: list[int] = []
    rounds_completed = 0
    for _ in range(repeats):  # interleaved, so both see the same machine load
        seconds, cpu_seconds, per_card, rounds_completed = _engine_pass(dealt, settings, variant)
        engine_rates.append(cards / seconds)
        engine_cpu_rates.append(cards / cpu_seconds)
        per_card_ns.extend(per_card)
        base_wall, base_cpu = _baseline_pass(dealt)
        baseline_rates.append(baseline_cards / base_wall)
        baseline_cpu_rates.append(baseline_cards / base_cpu)
    engine_rate = statistics.median(engine_rates)
    baseline_rate = statistics.median(baseline_rates)
    return {
        "shoes": shoes,
        "repeats": repeats,
        "decks": settings.decks,
        "variant": variant_name,
        "cards_per_pass": cards,
        "rounds_completed_per_pass": rounds_completed,
        "engine_cards_per_s_median": round(engine_rate),
        "engine_cards_per_cpu_s_median": round(statistics.median(engine_cpu_rates)),
        "per_card_median_us": round(statistics.median(per_card_ns) / 1000, 2),
        "per_card_p99_us": round(_percentile([float(x) for x in per_card_ns], 99) / 1000, 2),
        "baseline_play_round_cards_per_s_median": round(baseline_rate),
        "baseline_play_round_cards_per_cpu_s_median": round(statistics.median(baseline_cpu_rates)),
        "engine_time_vs_baseline": round(baseline_rate / engine_rate, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variant", default="standard")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.shoes, args.seed, args.variant, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
