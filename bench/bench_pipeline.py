"""Decoder + engine throughput with no I/O: Angel Eye bytes of many shoes → decoder → engine.

The bytes are what the simulated shoe writes into the pty (every frame sent three times,
marks continuing across shoes); each transmission is fed to ``AngelEyeDecoder.feed`` as
the serial driver does (``drop_duplicates()`` set, as ``drivers.base.ReaderDriver`` sets it:
repeats are counted, not built into frames), and every input goes through ``Engine.handle``
(the table settings the bench daemons use). One thread, so the
figure is one core's.

Reported per pass (median over ``--repeats`` interleaved passes): cards per second of wall
time and per CPU second, per-card time (decode of its three transmissions + ``handle``)
median/p99/max, and the same for two baselines in the same run: the decoder alone over the
same bytes, and bare ``play_round`` over the same rounds (the third-card rule, nothing else).
Target: at least 50,000 cards/s on one core.

    .venv/bin/python -m bench.bench_pipeline [--shoes 20] [--repeats 5] [--profile] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.common import Summary, report
from bench.rig import forwarded, shoe_stream
from common.cards import Card
from common.inputs import CardRead
from common.slots import SLOT_NAMED, Slot
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.outcome import play_round
from daemon.rules.variants import Variant, load_variant_by_name
from drivers.protocols.angel_eye import AngelEyeDecoder

TARGET_CARDS_PER_S = 50_000


@dataclass(frozen=True, slots=True)
class Workload:
    transmissions: list[tuple[float, bytes]]
    rounds: list[list[Card]]
    cards: int


def workload(shoes: int, seed: int) -> Workload:
    stream = shoe_stream(shoes, seed)
    transmissions = [(s.t, s.data) for s in stream.steps if s.data is not None]
    # The rounds as dealt, for the play_round baseline: decode once, group round cards.
    rounds: list[list[Card]] = []
    current: list[Card] = []
    decoder = AngelEyeDecoder()
    for at, data in transmissions:
        for frame in decoder.feed(data, at):
            inp = frame.input
            if frame.duplicate or not isinstance(inp, CardRead) or inp.target is None:
                continue
            if SLOT_NAMED.get(inp.target) is Slot.P1 and current:
                rounds.append(current)
                current = []
            if inp.target in SLOT_NAMED:
                current.append(inp.card)
    if current:
        rounds.append(current)
    return Workload(transmissions, rounds, stream.card_frames)


def pipeline_pass(
    work: Workload, settings: TableSettings, variant: Variant
) -> tuple[float, float, list[int]]:
    """(wall s, CPU s, ns per card) of decoder + engine over every transmission."""
    decoder = AngelEyeDecoder()
    decoder.drop_duplicates()  # as the reader driver sets it
    engine = Engine(settings, variant)
    per_card: list[int] = []
    clock = time.perf_counter_ns
    pending = 0  # ns spent on transmissions since the last card went through the engine
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for at, data in work.transmissions:
        start = clock()
        card = False
        for inp in forwarded(decoder.feed(data, at)):
            engine.handle(inp)
            card = card or isinstance(inp, CardRead)
        pending += clock() - start
        if card:
            per_card.append(pending)
            pending = 0
    return time.perf_counter() - wall0, time.process_time() - cpu0, per_card


def decoder_pass(work: Workload) -> tuple[float, float, list[int]]:
    """The baseline: the decoder alone over the same bytes (configured as the driver runs it)."""
    decoder = AngelEyeDecoder()
    decoder.drop_duplicates()
    per_card: list[int] = []
    clock = time.perf_counter_ns
    pending = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for at, data in work.transmissions:
        start = clock()
        card = False
        for frame in decoder.feed(data, at):
            card = card or (isinstance(frame.input, CardRead) and not frame.duplicate)
        pending += clock() - start
        if card:
            per_card.append(pending)
            pending = 0
    return time.perf_counter() - wall0, time.process_time() - cpu0, per_card


def play_round_pass(work: Workload) -> float:
    start = time.perf_counter()
    for cards in work.rounds:
        play_round(cards)
    return time.perf_counter() - start


def run(shoes: int, repeats: int, seed: int) -> dict[str, Any]:
    work = workload(shoes, seed)
    settings = TableSettings(device_starts_shoe=True, unneeded_card_window_s=0)
    variant = load_variant_by_name(settings.variant)
    rates: dict[str, list[float]] = {"pipeline": [], "pipeline_cpu": [], "decoder": [], "decoder_cpu": []}
    round_rates: list[float] = []
    per_card: dict[str, list[int]] = {"pipeline": [], "decoder": []}
    round_cards = sum(len(r) for r in work.rounds)
    for _ in range(repeats):  # interleaved: every figure sees the same machine load
        wall, cpu, cards = pipeline_pass(work, settings, variant)
        rates["pipeline"].append(len(cards) / wall)
        rates["pipeline_cpu"].append(len(cards) / cpu)
        per_card["pipeline"] += cards
        wall, cpu, cards = decoder_pass(work)
        rates["decoder"].append(len(cards) / wall)
        rates["decoder_cpu"].append(len(cards) / cpu)
        per_card["decoder"] += cards
        round_rates.append(round_cards / play_round_pass(work))
    pipe = statistics.median(rates["pipeline"])
    pipe_cpu = statistics.median(rates["pipeline_cpu"])
    dec = statistics.median(rates["decoder"])
    return {
        "shoes": shoes,
        "cards_per_pass": len(per_card["pipeline"]) // repeats,
        "transmissions_per_pass": len(work.transmissions),
        "repeats": repeats,
        "pipeline_cards_per_s": round(pipe),
        "pipeline_cards_per_cpu_s": round(pipe_cpu),
        "pipeline_per_card_us": Summary.of([x / 1000 for x in per_card["pipeline"]]).text("us"),
        "baseline_decoder_cards_per_s": round(dec),
        "baseline_decoder_cards_per_cpu_s": round(statistics.median(rates["decoder_cpu"])),
        "baseline_decoder_per_card_us": Summary.of([x / 1000 for x in per_card["decoder"]]).text("us"),
        "baseline_play_round_cards_per_s": round(statistics.median(round_rates)),
        "ratio_pipeline_time_to_decoder": round(dec / pipe, 2),
        "target_cards_per_s": TARGET_CARDS_PER_S,
        "target_met": pipe_cpu >= TARGET_CARDS_PER_S,
    }


def profile(shoes: int, seed: int, top: int = 25) -> str:
    """cProfile of one pipeline pass, sorted by own time."""
    work = workload(shoes, seed)
    settings = TableSettings(device_starts_shoe=True, unneeded_card_window_s=0)
    variant = load_variant_by_name(settings.variant)
    profiler = cProfile.Profile()
    profiler.enable()
    pipeline_pass(work, settings, variant)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=20, help="8-deck shoes per pass (about 405 cards each)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one pass instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.profile:
        print(profile(args.shoes, args.seed))
        return 0
    figures = run(args.shoes, args.repeats, args.seed)
    report("decoder + engine throughput (no I/O, one core)", figures, args.json)
    return 0 if figures["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
