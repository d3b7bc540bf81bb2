"""``baccarat-edge rules settle``: every bet's outcome and exact payout for given rounds.

baccarat-edge rules settle --variant standard --player 8s Kd 3c --banker 9h 2d 5s [--json]
baccarat-edge rules settle --variant super-98 --jsonl rounds.jsonl [--decks 8]

Exit 0 when every round settled, 1 when some round was invalid (each named on stderr;
the other lines of a ``--jsonl`` file are still settled), 2 for usage, an unreadable
file or a bad variant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from daemon.rules.resolution import fraction_text
from daemon.rules.settle_round import RoundError, SettledRound, settle_round, shown
from daemon.rules.variants import Variant

_LINE_KEYS = {"player", "banker", "id", "super_round"}


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], decks_type: Callable[[str], int]
) -> None:
    """Register ``rules settle`` under the ``rules`` subcommands."""
    parser = sub.add_parser(
        "settle",
        help="each bet's outcome and exact payout for a round's cards",
        description="Validate a round's cards by the third-card rule and settle every bet of a variant.",
    )
    parser.add_argument(
        "--variant", required=True, help="a variant file, or a shipped variant name (see 'rules variants')"
    )
    parser.add_argument(
        "--player", nargs="+", metavar="CARD", help="the Player's cards in deal order, e.g. 8s Kd"
    )
    parser.add_argument("--banker", nargs="+", metavar="CARD", help="the Banker's cards in deal order")
    parser.add_argument("--super-round", action="store_true", help="the round is a super round (Super 98)")
    parser.add_argument(
        "--jsonl",
        metavar="FILE",
        help='one round a line ("-" for stdin): {"player": [...], "banker": [...]}, '
        'optional "id" (echoed) and "super_round"',
    )
    parser.add_argument(
        "--decks", type=decks_type, help="refuse a card dealt more often than a shoe of this many decks holds"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_settle)


def _settle(args: argparse.Namespace) -> int:
    from daemon.rules.variants import VariantError, load_variant_arg

    if args.jsonl is not None and (args.player or args.banker or args.super_round):
        print("error: give either --jsonl or --player/--banker, not both", file=sys.stderr)
        return 2
    if args.jsonl is None and not (args.player and args.banker):
        print("error: give --player and --banker cards, or --jsonl FILE", file=sys.stderr)
        return 2
    try:
        variant = load_variant_arg(args.variant)
    except VariantError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.jsonl is not None:
        return _settle_lines(variant, args.jsonl, args.decks)
    try:
        settled = settle_round(
            variant, args.player, args.banker, super_round=args.super_round, decks=args.decks
        )
    except RoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        json.dump({"variant": variant.name, **settled.to_dict()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_table(variant, settled)
    return 0


def _settle_lines(variant: Variant, source: str, decks: int | None) -> int:
    try:
        lines = list(_read_lines(source))
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    failed = 0
    for number, line in lines:
        if not line.strip():
            continue
        try:
            result = _settle_line(variant, line, decks)
        except RoundError as exc:
            print(f"error: {source}: line {number}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(json.dumps(result, ensure_ascii=False))
    return 1 if failed else 0


def _read_lines(source: str) -> Iterator[tuple[int, str]]:
    if source == "-":
        yield from enumerate(sys.stdin, start=1)
        return
    with Path(source).open(encoding="utf-8") as stream:
        yield from enumerate(stream.read().splitlines(), start=1)


def _settle_line(variant: Variant, line: str, decks: int | None) -> dict[str, object]:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise RoundError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise RoundError("not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise RoundError("a round must be a JSON object with 'player' and 'banker'")
    unknown = sorted(set(data) - _LINE_KEYS)
    if unknown:
        raise RoundError(
            f"unknown key(s) {', '.join(map(repr, unknown))}; known: banker, id, player, super_round"
        )
    for side in ("player", "banker"):
        if not isinstance(data.get(side), list):
            raise RoundError(f"'{side}' must be a list of card codes")
    super_round = data.get("super_round", False)
    if not isinstance(super_round, bool):
        raise RoundError(f"'super_round' must be true or false, got {shown(super_round)}")
    round_id = data.get("id")
    if round_id is not None and (isinstance(round_id, bool) or not isinstance(round_id, str | int)):
        raise RoundError(f"'id' must be a string or an integer, got {shown(round_id)}")
    settled = settle_round(variant, data["player"], data["banker"], super_round=super_round, decks=decks)
    head: dict[str, object] = {} if round_id is None else {"id": round_id}
    return {**head, "variant": variant.name, **settled.to_dict()}


def _print_table(variant: Variant, settled: SettledRound) -> None:
    outcome = settled.outcome
    print(f"Variant {variant.name!r}" + (", super round" if settled.super_round else ""))
    print(f"Player  {' '.join(c.code for c in outcome.player):<9} = {outcome.player_total}")
    print(f"Banker  {' '.join(c.code for c in outcome.banker):<9} = {outcome.banker_total}")
    winner = outcome.winner.value
    print(f"Winner  {winner}" + (f" by {outcome.margin}" if outcome.margin else ""))
    naturals = _sides(outcome.player_natural, outcome.banker_natural)
    pairs = _sides(outcome.player_pair, outcome.banker_pair)
    print(f"Natural {naturals};  pairs: {pairs};  cards: {outcome.card_count}")
    width = max(len("bet"), *(len(name) for name in settled.bets))
    print(f"{'bet':<{width}}  {'outcome':<7}  {'payout':>8}  {'decimal':>10}")
    for name, resolution in settled.bets.items():
        print(
            f"{name:<{width}}  {resolution.outcome:<7}  {fraction_text(resolution.multiplier):>8}  "
            f"{float(resolution.multiplier):>10.6f}"
        )


def _sides(player: bool, banker: bool) -> str:
    """``"player, banker"``, one of them, or ``"none"``."""
    return ", ".join(side for side, yes in (("player", player), ("banker", banker)) if yes) or "none"
