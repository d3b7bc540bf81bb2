"""``baccarat-edge demo``: the README's first command — no hardware, no system broker.

Starts an embedded MQTT broker, a simulated shoe on a pseudo-terminal and the
daemon on the embedded default config with a temporary state directory; shows the
table live while one shoe is dealt (fast), then prints a summary and exits 0 when
every journaled event reached the broker in order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _hands(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the daemon on a simulated shoe with an embedded broker (no hardware needed)",
        description="Deal one simulated shoe through the real daemon and show the table live.",
    )
    parser.add_argument(
        "--speed", type=_positive, default=100.0,
        help="how many times faster than a real dealer (default 100: a whole shoe in ~20 s)",
    )  # fmt: skip
    parser.add_argument("--hands", type=_hands, default=None, help="stop after this many hands")
    parser.add_argument("--decks", type=int, choices=range(1, 9), default=8, metavar="1-8", help="decks")
    parser.add_argument("--seed", type=int, default=None, help="shuffle seed (random when unset)")
    parser.add_argument("--protocol", choices=["angel_eye", "ascii_lines"], default="angel_eye",
                        help="the simulated reader's wire protocol")  # fmt: skip
    parser.add_argument(
        "--game-flow", choices=["betting_window", "cards_only"], default="betting_window",
        help="betting_window (default): the demo also plays the game server, opening and closing "
        "betting for each round; cards_only: rounds told apart by the cards alone",
    )  # fmt: skip
    parser.add_argument(
        "--fault", action="append", default=[], metavar="KIND@HAND",
        help="inject a dealing mistake (repeatable); betting_window: late_unneeded@5, exposed@2, "
        "cut_card@9, unscanned@4 (the round's last card never read), empty_window@3, unplug_mid_round@3 "
        "(the reader unplugged after P1/B1, P2/B2 dealt unseen), late_close@2 (close_betting, issued before "
        "the first card, arrives 0.3 s after it), quick_reopen@2 (betting reopened 0.8 s after the round, "
        "then an unneeded card); cards_only: misread@3, unneeded_card@5, ...",
    )  # fmt: skip
    parser.add_argument(
        "--reveal", choices=["open", "squeeze"], default="open",
        help="open (default): every card shown as it is read; squeeze: each card dealt face down "
        "(a commitment), the demo's game server reveals each slot in order (betting_window only)",
    )  # fmt: skip
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--live", dest="live", action="store_true", default=None, help="full-screen live view")
    view.add_argument("--lines", dest="live", action="store_false", help="one line per round")
    parser.add_argument("--state-dir", type=Path, help="keep the journal and daemon log here")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from daemon.service.demo import DemoOptions, DemoRun, parse_flow_fault, summary, summary_json
    from daemon.simulation.dealer import FaultSpec

    if args.reveal == "squeeze" and args.game_flow != "betting_window":
        print(
            "demo: --reveal squeeze needs --game-flow betting_window (the game server reveals)",
            file=sys.stderr,
        )
        return 2
    for fault in args.fault:
        try:
            if args.game_flow == "betting_window":
                parse_flow_fault(fault)
            else:
                FaultSpec.parse(fault)
        except ValueError as exc:
            print(f"demo: --fault {fault}: {exc}", file=sys.stderr)
            return 2
    options = DemoOptions(
        speed=args.speed,
        hands=args.hands,
        decks=args.decks,
        seed=args.seed,
        protocol=args.protocol,
        faults=tuple(args.fault),
        game_flow=args.game_flow,
        reveal=args.reveal,
        live_view=args.live,
        state_dir=args.state_dir,
    )
    result = DemoRun(options).run()
    sys.stdout.write(summary_json(result) + "\n" if args.json else summary(result))
    if args.state_dir is not None and result.log_file is not None:
        print(f"Journal and daemon log kept in {args.state_dir} (log: {result.log_file})")
    return 0 if result.complete else 1
