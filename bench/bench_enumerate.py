"""Exact enumeration speed: ``enumerate_shoe(8)`` against a baseline run in the same process.

Ours computes the whole table (main game, totals, margins, naturals, card counts,
pairs by rank, perfect and identical pairs by suit, first-card comparison). The
baseline is either

* PyBaccarat's public exact calculator (``--peer PATH`` to its
  ``compute_baccarat_odds.py``; point values only, main bets and a few side bets;
  not shipped here: fetch it yourself, e.g. unpack the ``pybaccarat`` sdist), or
* by default, a naive exact counter in this file with the same shape as that peer
  (nested loops over 13 ranks for the first four cards, then the draws; main bets only).

Both answers are checked against ours before any time is printed.

    .venv/bin/python -m bench.bench_enumerate [--runs 9] [--baseline-runs 3] [--decks 8] [--peer PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import time
from collections.abc import Callable
from math import perm
from pathlib import Path
from typing import Any

from daemon.rules.enumerate import enumerate_shoe
from daemon.rules.tableau import banker_draws, player_draws


def naive_main_counts(decks: int) -> tuple[int, int, int]:
    """(banker wins, player wins, ties) by walking ranks card by card: the slow, obvious way."""
    shoe = [4 * decks] * 13
    size = 52 * decks
    counts = [0, 0, 0]

    def points(rank: int) -> int:
        return rank + 1 if rank < 9 else 0

    def record(p: int, b: int, ways: int) -> None:
        counts[0 if b > p else 1 if p > b else 2] += ways

    for p1 in range(13):
        w1 = shoe[p1]
        shoe[p1] -= 1
        for b1 in range(13):
            w2 = w1 * shoe[b1]
            shoe[b1] -= 1
            for p2 in range(13):
                w3 = w2 * shoe[p2]
                shoe[p2] -= 1
                for b2 in range(13):
                    w4 = w3 * shoe[b2]
                    shoe[b2] -= 1
                    if w4:
                        p = (points(p1) + points(p2)) % 10
                        b = (points(b1) + points(b2)) % 10
                        if not player_draws(p, b):
                            if banker_draws(p, b, None):
                                for b3 in range(13):
                                    if shoe[b3]:
                                        record(p, (b + points(b3)) % 10, w4 * shoe[b3] * (size - 5))
                            else:
                                record(p, b, w4 * (size - 4) * (size - 5))
                        else:
                            for p3 in range(13):
                                if not shoe[p3]:
                                    continue
                                w5 = w4 * shoe[p3]
                                shoe[p3] -= 1
                                pt = (p + points(p3)) % 10
                                if banker_draws(p, b, points(p3)):
                                    for b3 in range(13):
                                        if shoe[b3]:
                                            record(pt, (b + points(b3)) % 10, w5 * shoe[b3])
                                else:
                                    record(pt, b, w5 * (size - 5))
                                shoe[p3] += 1
                    shoe[b2] += 1
                shoe[p2] += 1
            shoe[b1] += 1
        shoe[p1] += 1
    return counts[0], counts[1], counts[2]


def load_peer(path: Path) -> Callable[[int], tuple[int, int, int]]:
    spec = importlib.util.spec_from_file_location("peer_compute_baccarat_odds", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(decks: int) -> tuple[int, int, int]:
        odds = module.ComputeBaccaratOdds(decks)
        return int(odds.count_banker), int(odds.count_player), int(odds.count_tie)

    return run


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    times: list[float] = []
    result: Any = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--decks", type=int, default=8)
    parser.add_argument("--peer", type=Path, help="PyBaccarat's compute_baccarat_odds.py")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    ours_times, ours = timed(lambda: enumerate_shoe(args.decks), args.runs)
    expected = (ours.counts["banker_win"], ours.counts["player_win"], ours.counts["tie"])
    assert ours.total == perm(52 * args.decks, 6)

    if args.peer is not None:
        baseline_name = f"PyBaccarat compute_baccarat_odds ({args.peer})"
        peer = load_peer(args.peer)
        base_times, base = timed(lambda: peer(args.decks), args.baseline_runs)
    else:
        baseline_name = "naive rank-by-rank exact counter (main bets only)"
        base_times, base = timed(lambda: naive_main_counts(args.decks), args.baseline_runs)
    if tuple(base) != expected:
        raise SystemExit(f"baseline disagrees with the enumeration: {base} != {expected}")

    ours_median, base_median = statistics.median(ours_times), statistics.median(base_times)
    report = {
        "decks": args.decks,
        "ours_runs": args.runs,
        "ours_median_s": ours_median,
        "ours_p99_s": p99(ours_times),
        "ours_max_s": max(ours_times),
        "baseline": baseline_name,
        "baseline_runs": args.baseline_runs,
        "baseline_median_s": base_median,
        "speedup_vs_baseline": base_median / ours_median,
        "process_max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"exact enumeration, {args.decks} decks, {ours.total:,} sequences, {len(ours.joint)} round classes")
    print(
        f"  ours      median {ours_median * 1000:8.1f} ms  p99 {report['ours_p99_s'] * 1000:8.1f} ms  "
        f"max {report['ours_max_s'] * 1000:8.1f} ms  ({args.runs} runs)"
    )
    print(f"  baseline  median {base_median * 1000:8.1f} ms  ({args.baseline_runs} runs): {baseline_name}")
    print(f"  ratio     baseline / ours = {report['speedup_vs_baseline']:.1f}x")
    print(f"  process max RSS {report['process_max_rss_kb'] / 1024:.0f} MiB (both measured in this process)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
