"""Camera confidence figures: right and wrong reads per confidence and per decision path.

The engine uses a camera read only at ``camera.min_confidence`` or above. This script
measures, on real card art (tests/camera/synth.py frames, the same decks and conditions as
``bench.bench_camera``, foreign deck included), which confidences the recogniser gives the
cards it names right and the ones it names wrong, so that the default threshold can accept
the first and reject the second. A one-corner read is counted separately by whether the
whole face names the same card.

    .venv/bin/python -m bench.camera_confidence [--frames 26] [--seeds 7,11] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from typing import Any

import cv2

from common.cards import ALL_CARDS
from drivers.camera.recognize import Recognition, Recognizer
from drivers.camera.templates import learn_templates
from tests.camera.fetch_art import ensure_decks
from tests.camera.synth import CONDITIONS, SynthFrame, frame_set, load_faces

FOREIGN = "foreign_deck"
BUCKETS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0001)


def truth_under(frame: SynthFrame, rec: Recognition) -> str | None:
    """The code of the card lying on top at the recognition's centre (None: no card there)."""
    for index in reversed(range(len(frame.cards))):
        contour = frame.cards[index].corners.reshape(-1, 1, 2)
        if cv2.pointPolygonTest(contour, rec.outline.center, False) >= 0:
            return frame.cards[index].card.code
    return None


def path_of(rec: Recognition) -> str:
    """The decision path, with one-corner reads split by whether the face names the same card."""
    if rec.reason == "read (one corner)":
        assert rec.card is not None
        agrees = rec.face is not None and ALL_CARDS[rec.face.label] == rec.card
        return "read (one corner), face agrees" if agrees else "read (one corner), face elsewhere"
    return rec.reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=26, help="frames per deck and condition (4 cards each)")
    parser.add_argument("--seeds", default="7,11", help="comma-separated frame-set seeds")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    decks = ensure_decks()
    recognizers = {deck: Recognizer(learn_templates(folder, deck)) for deck, folder in decks.items()}
    seeds = [int(seed) for seed in args.seeds.split(",")]
    paths: dict[str, dict[str, Any]] = defaultdict(lambda: {"right": 0, "wrong": 0, "min": 1.0, "max": 0.0})
    buckets: dict[float, dict[str, int]] = {low: {"right": 0, "wrong": 0} for low in BUCKETS[:-1]}
    wrong_examples: list[str] = []
    for deck, folder in decks.items():
        faces = load_faces(folder)
        for c_index, condition in enumerate((*CONDITIONS, FOREIGN)):
            recognizer = recognizers[deck]
            if condition == FOREIGN:
                recognizer = next(r for name, r in recognizers.items() if name != deck)
            drawn = "clean" if condition == FOREIGN else condition
            for seed in seeds:
                for frame in frame_set(faces, drawn, args.frames, seed=seed * 100 + c_index):
                    for rec in recognizer.recognize_frame(frame.image):
                        if rec.card is None:
                            continue
                        verdict = "right" if truth_under(frame, rec) == rec.card.code else "wrong"
                        row = paths[path_of(rec)]
                        row[verdict] += 1
                        row["min"] = min(row["min"], rec.confidence)
                        row["max"] = max(row["max"], rec.confidence)
                        low = max(b for b in BUCKETS[:-1] if rec.confidence >= b)
                        buckets[low][verdict] += 1
                        if verdict == "wrong":
                            where = f"{deck} {condition}: {rec.card.code}"
                            wrong_examples.append(f"{where} at {rec.confidence:.3f} ({path_of(rec)})")
    if args.json:
        print(json.dumps({"paths": paths, "buckets": buckets, "wrong": wrong_examples}, sort_keys=True))
        return 0
    print(f"{'decision path':<58} {'right':>6} {'wrong':>6} {'min':>6} {'max':>6}")
    for name in sorted(paths, key=lambda n: -paths[n]["right"]):
        row = paths[name]
        print(f"{name:<58} {row['right']:>6} {row['wrong']:>6} {row['min']:>6.3f} {row['max']:>6.3f}")
    print(f"\n{'confidence':<14} {'right':>6} {'wrong':>6}")
    for low, high in itertools.pairwise(BUCKETS):
        row = buckets[low]
        bracket = "]" if high > 1 else ")"
        print(f"[{low:.2f}, {min(high, 1.0):.2f}{bracket}   {row['right']:>6} {row['wrong']:>6}")
    for example in wrong_examples:
        print(f"    wrong: {example}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
