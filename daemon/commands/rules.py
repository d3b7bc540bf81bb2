"""``baccarat-edge rules``: exact enumeration, bet odds (RTP), variant file checks, settlement.

baccarat-edge rules enumerate --decks 8 [--json]
baccarat-edge rules rtp --variant standard --decks 8 [--json]
baccarat-edge rules check config/variants/tiger.yaml
baccarat-edge rules variants
baccarat-edge rules settle --variant standard --player 8s Kd --banker 9h 2d 5s
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from daemon.commands._rules_settle import add_parser as add_settle_parser

MAX_DECKS = 8
_DECKS_HELP = f"decks in the shoe, 1-{MAX_DECKS} (default 8)"


def _decks(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--decks must be a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_DECKS:
        raise argparse.ArgumentTypeError(f"--decks must be 1..{MAX_DECKS}, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rules",
        help="exact odds of the baccarat rules and bets; check variant files",
        description="Exact enumeration of every 6-card sequence of a shoe, and exact bet odds per variant.",
    )
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    sub = parser.add_subparsers(dest="rules_command", metavar="ACTION")

    enumerate_parser = sub.add_parser("enumerate", help="exact counts of round outcomes for an N-deck shoe")
    enumerate_parser.add_argument(
        "--decks", type=_decks, default=8, help="decks in the shoe, 1-8 (default 8)"
    )
    enumerate_parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    enumerate_parser.set_defaults(handler=_enumerate)

    rtp_parser = sub.add_parser("rtp", help="exact win/push/lose, house edge and RTP of every bet")
    rtp_parser.add_argument(
        "--variant", required=True, help="a variant file, or a shipped variant name (see 'rules variants')"
    )
    rtp_parser.add_argument("--decks", type=_decks, default=8, help=_DECKS_HELP)
    rtp_parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rtp_parser.set_defaults(handler=_rtp)

    check_parser = sub.add_parser("check", help="validate variant files; errors name file, bet and field")
    check_parser.add_argument("files", nargs="+", help="variant YAML files")
    check_parser.set_defaults(handler=_check)

    variants_parser = sub.add_parser("variants", help="list the shipped variant files")
    variants_parser.set_defaults(handler=_variants)

    add_settle_parser(sub, _decks)


def _enumerate(args: argparse.Namespace) -> int:
    from daemon.rules.enumerate import enumerate_shoe

    result = enumerate_shoe(args.decks)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    total = result.total
    print(f"Exact enumeration, {args.decks} deck(s): {total:,} ordered 6-card sequences")
    width = max(len(key) for key in result.counts)
    print(f"{'count':<{width}}  {'sequences':>26}  {'probability':>12}")
    for key, n in result.counts.items():
        print(f"{key:<{width}}  {n:>26,}  {n / total:>12.8f}")
    return 0


def _rtp(args: argparse.Namespace) -> int:
    from daemon.rules.enumerate import enumerate_shoe
    from daemon.rules.rtp import variant_odds
    from daemon.rules.variants import VariantError, load_variant_arg

    try:
        variant = load_variant_arg(args.variant)
    except VariantError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    enumeration = enumerate_shoe(args.decks)
    odds = variant_odds(variant, enumeration)
    die = variant.super_round
    if args.json:
        report = {
            "variant": variant.name,
            "decks": args.decks,
            "total": enumeration.total,
            "super_round": None
            if die is None
            else {
                "die_faces": die.die_faces,
                "super_faces": die.super_faces,
                "probability": str(die.probability),
            },
            "bets": [o.to_dict() for o in odds],
        }
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"Variant {variant.name!r}, {args.decks} deck(s), exact over {enumeration.total:,} sequences")
    if die is not None:
        print(
            f"Super round: {die.die_faces}-sided die shows one of {die.super_faces} "
            f"(probability {die.probability}); super-round payouts are weighted by it"
        )
    width = max(len(o.name) for o in odds)
    print(
        f"{'bet':<{width}}  {'kind':<14} {'P(win)':>9} {'P(push)':>9} {'P(lose)':>9} "
        f"{'house edge':>11} {'RTP':>9}  exact expected return"
    )
    for o in odds:
        print(
            f"{o.name:<{width}}  {o.kind:<14} {float(o.p_win):>9.6f} {float(o.p_push):>9.6f} "
            f"{float(o.p_lose):>9.6f} {float(o.house_edge) * 100:>10.4f}% {float(o.rtp) * 100:>8.4f}%  "
            f"{o.expected_return}"
        )
    return 0


def _check(args: argparse.Namespace) -> int:

    from daemon.rules.variants import VariantError, load_variant

    failed = 0
    for name in args.files:
        try:
            variant = load_variant(Path(name))
        except VariantError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: ok, variant {variant.name!r} with {len(variant.bets)} bet(s)")
    return 1 if failed else 0


def _variants(args: argparse.Namespace) -> int:
    from daemon.rules.variants import VARIANTS_DIR, VariantError, load_variant_by_name, shipped_variant_names

    for name in shipped_variant_names():
        try:
            variant = load_variant_by_name(name)
        except VariantError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{name:<16} {len(variant.bets):>3} bets  {variant.description}")
    print(f"(files in {VARIANTS_DIR})")
    return 0
