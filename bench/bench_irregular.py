"""The irregular-shoe detectors: false alarms on fair shoes, detection of planted patterns, cost.

1. False alarms: ``--shoes`` fairly shuffled 8-deck shoes dealt one after another (turn, burn,
   rounds to the cut card 16 from the end), each checked against the shoes before it (the
   table's ``recent_shoes``). Per detector: shoes flagged, the rate with its 95 % Wilson
   interval, against the configured ``alpha``.
2. Detection: ``--planted`` shoes for each planted pattern, each a fair shoe with a fair shoe
   before it: ``copy10`` (10 consecutive cards of the previous shoe swapped into place in this
   one), ``factory_deck`` (one copy of each card taken out and put back as a block in factory
   order), ``slug20`` (20 consecutive cards of the previous shoe taken out of this shoe and put
   back together as a block). The pattern lands in the dealt part of the shoe. Rate at which
   the detector meant for it fires (and any detector).
3. Cost: the detectors' CPU time per dealt card against the engine's (``Engine.handle`` over
   the same shoes' inputs, as ``bench_engine`` feeds them), alternated in the same run.
4. Wired cost: the whole shoe audit as the engine runs it (the fold's notes of every card, the
   certificate and the detectors at each shoe's end, against the shoes before it): one engine
   deals ``--cost-shoes`` shoes one after another, with the audit and without it (its fold
   and its shoe-end call switched off), alternated; CPU per dealt card and the ratio.

    .venv/bin/python -m bench.bench_irregular [--shoes 10000] [--planted 1000] [--alpha 0.002] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.bench_engine import _engine_pass, _shoe
from common.cards import ALL_CARDS, Card
from common.inputs import CardRead, EngineInput
from daemon.audit.factory_order import FACTORY_ORDER
from daemon.audit.irregular import Detector, ShoeSequence, detect, thresholds
from daemon.audit.null_model import OUTCOME_STATISTIC, Statistic, deal_shoe
from daemon.audit.null_tables import NULL_TABLES
from daemon.audit.settings import IrregularSettings
from daemon.engine import state as state_module
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.outcome import play_round
from daemon.rules.variants import load_variant_by_name

DECKS = 8
CUT = 16


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial rate."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def shuffled(rng: random.Random) -> list[Card]:
    cards = list(ALL_CARDS) * DECKS
    rng.shuffle(cards)
    return cards


def as_sequence(cards: list[Card], shoe_id: str) -> ShoeSequence:
    dealt = deal_shoe(cards, cut_card_from_end=CUT)
    return ShoeSequence.of(shoe_id, dealt.cards, dealt.winners)


def false_alarms(shoes: int, seed: int, settings: IrregularSettings) -> dict[str, Any]:
    rng = random.Random(seed)
    flagged = {d: 0 for d in Detector}
    any_flag = 0
    history: list[ShoeSequence] = []
    for n in range(shoes):
        shoe = as_sequence(shuffled(rng), f"fair-{n}")
        fired = {f.detector for f in detect(shoe, history, settings)}
        for d in fired:
            flagged[d] += 1
        any_flag += bool(fired)
        history = [*history[-(settings.recent_shoes - 1) :], shoe] if settings.recent_shoes else []
    out: dict[str, Any] = {}
    for d in Detector:
        low, high = wilson(flagged[d], shoes)
        out[d.value] = {
            "flagged": flagged[d],
            "rate": flagged[d] / shoes,
            "ci95": [round(low, 5), round(high, 5)],
            "alpha_within_ci_or_below": low <= settings.alpha,
        }
    low, high = wilson(any_flag, shoes)
    out["any"] = {"flagged": any_flag, "rate": any_flag / shoes, "ci95": [round(low, 5), round(high, 5)]}
    return out


def plant_copy(now: list[Card], earlier: tuple[Card, ...], rng: random.Random, length: int) -> list[Card]:
    """Swap ``length`` consecutive cards of the earlier shoe into place in this one."""
    src = rng.randrange(20, len(earlier) - length)
    dst = rng.randrange(20, len(now) - CUT - 40 - length)
    block = earlier[src : src + length]
    cards = list(now)
    for i, card in enumerate(block):
        j = next(k for k in range(len(cards)) if cards[k] == card and not dst <= k < dst + i + 1)
        cards[dst + i], cards[j] = cards[j], cards[dst + i]
    return cards


def plant_block(now: list[Card], block: list[Card], rng: random.Random) -> list[Card]:
    """Take one copy of each card of ``block`` out of the shoe and put the block back together."""
    rest = list(now)
    for card in block:
        rest.remove(card)
    dst = rng.randrange(20, len(now) - CUT - 40 - len(block))
    return rest[:dst] + block + rest[dst:]


def detection(planted: int, seed: int, settings: IrregularSettings) -> dict[str, Any]:
    rng = random.Random(seed)
    patterns: dict[str, tuple[Detector, Callable[[list[Card], tuple[Card, ...]], list[Card]]]] = {
        "copy10": (Detector.REPEATED_STRETCH, lambda now, prev: plant_copy(now, prev, rng, 10)),
        "factory_deck": (
            Detector.FACTORY_ORDER,
            lambda now, prev: plant_block(now, list(FACTORY_ORDER), rng),
        ),
        "slug20": (
            Detector.REPEATED_STRETCH,
            lambda now, prev: plant_block(now, list(prev[(s := rng.randrange(20, 350)) : s + 20]), rng),
        ),
    }
    out: dict[str, Any] = {}
    for name, (meant, plant) in patterns.items():
        hits = any_hits = 0
        for n in range(planted):
            previous = as_sequence(shuffled(rng), f"prev-{n}")
            shoe = as_sequence(plant(shuffled(rng), previous.cards), f"{name}-{n}")
            fired = {f.detector for f in detect(shoe, [previous], settings)}
            hits += meant in fired
            any_hits += bool(fired)
        low, high = wilson(hits, planted)
        out[name] = {
            "detector": meant.value,
            "detected": hits,
            "of": planted,
            "rate": hits / planted,
            "ci95": [round(low, 4), round(high, 4)],
            "any_detector": any_hits,
        }
    return out


def cost(shoes: int, seed: int, repeats: int, settings: IrregularSettings) -> dict[str, Any]:
    table = TableSettings()
    variant = load_variant_by_name("standard")
    rng = random.Random(seed)
    dealt = [_shoe(table, rng) for _ in range(shoes)]
    sequences: list[ShoeSequence] = []
    for n, (inputs, rounds) in enumerate(dealt):
        cards = tuple(x.card for x in inputs if isinstance(x, CardRead))
        winners = tuple(play_round(r)[0].winner for r in rounds)
        sequences.append(ShoeSequence.of(f"cost-{n}", cards, winners))
    engine_cards = sum(1 for inputs, _ in dealt for x in inputs if isinstance(x, CardRead))
    audit_cards = sum(len(s.cards) for s in sequences)
    engine_ns: list[float] = []
    audit_ns: list[float] = []
    for _ in range(repeats):
        _, cpu_s, _, _ = _engine_pass(dealt, table, variant)
        engine_ns.append(cpu_s * 1e9 / engine_cards)
        start = time.process_time_ns()
        for i, shoe in enumerate(sequences):
            detect(shoe, sequences[max(0, i - settings.recent_shoes) : i], settings)
        audit_ns.append((time.process_time_ns() - start) / audit_cards)
    engine, audit = statistics.median(engine_ns), statistics.median(audit_ns)
    return {
        "shoes": shoes,
        "repeats": repeats,
        "engine_cpu_ns_per_card": round(engine),
        "detectors_cpu_ns_per_card": round(audit),
        "ratio": round(audit / engine, 4),
        "ratios": [round(a / e, 4) for a, e in zip(audit_ns, engine_ns, strict=True)],
    }


_FOLD = "_FOLDS"
"""The fold table ``TableState.apply`` looks each event up in: (the fold's, the audit's) function
per kind; the audit's taken out for the engine without it."""


def _wired_pass(inputs: list[EngineInput], table: TableSettings, *, audit: str) -> float:
    """CPU seconds of one engine dealing ``inputs`` (every shoe in turn): ``audit`` ``none`` (its
    fold and its shoe-end call off), ``fold`` (the fold's notes only) or ``all``."""
    variant = load_variant_by_name("standard")
    fold = getattr(state_module, _FOLD)
    engine = Engine(table, variant)
    if audit != "all":
        engine.emitter.after_shoe_end = None
    if audit == "none":
        setattr(state_module, _FOLD, {kind: (main, None) for kind, (main, _) in fold.items()})
    try:
        start = time.process_time_ns()
        for inp in inputs:
            engine.handle(inp)
        return (time.process_time_ns() - start) / 1e9
    finally:
        setattr(state_module, _FOLD, fold)


def wired_cost(shoes: int, seed: int, repeats: int, settings: IrregularSettings) -> dict[str, Any]:
    irregular = {"alpha": settings.alpha, "recent_shoes": settings.recent_shoes}
    table = TableSettings.model_validate({"audit": {"irregular": irregular}})
    rng = random.Random(seed)
    inputs: list[EngineInput] = []
    offset = 0.0
    for _ in range(shoes):
        shoe, _ = _shoe(table, rng)
        inputs += [inp._replace(at=inp.at + offset) for inp in shoe]
        offset = inputs[-1].at + 60.0
    cards = sum(1 for x in inputs if isinstance(x, CardRead))
    passes: dict[str, list[float]] = {"none": [], "fold": [], "all": []}
    order = list(passes)
    for n in range(repeats):
        for audit in order[n % 3 :] + order[: n % 3]:  # each variant first, middle and last in turn
            passes[audit].append(_wired_pass(inputs, table, audit=audit) * 1e9 / cards)
    bare, fold, wired = (statistics.median(passes[k]) for k in ("none", "fold", "all"))
    return {
        "shoes": shoes,
        "repeats": repeats,
        "cards": cards,
        "engine_without_audit_cpu_ns_per_card": round(bare),
        "engine_with_audit_fold_only_cpu_ns_per_card": round(fold),
        "engine_with_audit_cpu_ns_per_card": round(wired),
        "fold_added": round(fold / bare - 1, 4),
        "added": round(wired / bare - 1, 4),
        "added_per_pass": [round(w / b - 1, 4) for w, b in zip(passes["all"], passes["none"], strict=True)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=10_000)
    parser.add_argument("--planted", type=int, default=1_000)
    parser.add_argument("--alpha", type=float, default=0.002)
    parser.add_argument("--recent-shoes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cost-shoes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cost-only", action="store_true", help="only the two cost parts (3 and 4)")
    args = parser.parse_args(argv)
    settings = IrregularSettings(
        alpha=args.alpha, decks=DECKS, cut_card_from_end=CUT, recent_shoes=args.recent_shoes
    )
    started = time.monotonic()
    limits = thresholds(settings, settings.recent_shoes)
    table = NULL_TABLES[DECKS]
    result = {
        "alpha": args.alpha,
        "recent_shoes": args.recent_shoes,
        "thresholds": {
            "outcome_run": {w.value: n for w, n in limits.outcome_run.items()},
            "same_rank": limits.same_rank,
            "same_suit": limits.same_suit,
            "repeated_stretch": limits.repeated_stretch,
            "factory_order": limits.factory_order,
        },
        "simulated_tail_at_threshold": {
            "outcome_run": round(
                sum(table.tail(OUTCOME_STATISTIC[w], n) for w, n in limits.outcome_run.items()), 5
            ),
            "same_rank": round(table.tail(Statistic.SAME_RANK, limits.same_rank), 5),
            "same_suit": round(table.tail(Statistic.SAME_SUIT, limits.same_suit), 5),
        },
        "cost": cost(args.cost_shoes, args.seed, args.repeats, settings),
        "wired_cost": wired_cost(args.cost_shoes, args.seed, args.repeats, settings),
    }
    if not args.cost_only:
        result["false_alarms"] = false_alarms(args.shoes, args.seed, settings)
        result["detection"] = detection(args.planted, args.seed + 1, settings)
    result["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
