"""``baccarat-edge simulate``: a virtual shoe on a pseudo-terminal, or written to a fixture.

Shuffles N decks, deals a shoe by the rules (indicator and burn, third-card rule,
cut card), optionally with faults (``--fault KIND@HAND``, repeatable), and either
plays the chosen protocol's bytes into a pty a daemon can open (its path is
printed; ``--link`` gives it a stable name) or writes a fixture file
(``--fixture``, with ``--expected`` for the engine event stream it must produce).
``--library DIR`` regenerates the committed fixture library.

``--game-flow betting_window`` deals the way a table with a betting window runs: the
game server opens and closes betting for each round (``open_betting``/``close_betting`` with its
round id, supervisor steps of the fixture), or with ``--betting-source button`` the dealer's
button (a line or key of the reader), or ``shoe_lock`` the Angel Eye shoe's lock frames; faults
are then ``late_unneeded``, ``exposed``, ``misread_deal_on``, ``cut_card`` and ``outage`` at a round
(``--fault outage@2``: the edge is down while round 3 is dealt; fixtures only).
``--reader-signals`` makes a line or HID reader send its cut card itself (the simulator's lines
and codes, written into the fixture's ``protocol_settings``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drivers.fixtures import FixtureStep


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="virtual shoe: deal a shoe into a pty, or write it as a fixture",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--protocol", default="angel_eye", choices=["angel_eye", "ascii_lines", "usb_hid"])
    parser.add_argument("--decks", type=int, default=8, help="decks in the shoe (1-8, default 8)")
    parser.add_argument("--seed", type=int, default=1, help="shuffle seed (same seed, same shoe)")
    parser.add_argument(
        "--hands", type=int, default=None, help="stop after this many hands (default: the cut card)"
    )
    parser.add_argument(
        "--cut-card-from-end", type=int, default=16, help="cards behind the cut card (default 16)"
    )
    parser.add_argument("--burn-each-round", action="store_true", help="burn one card before every round")
    parser.add_argument("--cut-card-policy", default="finish_current_round",
                        choices=["finish_current_round", "one_more_round"])  # fmt: skip
    parser.add_argument("--fault", action="append", default=[], metavar="KIND@HAND",
                        help="inject a fault, e.g. misread@3 (kinds: drivers/README.md)")  # fmt: skip
    parser.add_argument("--game-flow", default="cards_only", choices=["cards_only", "betting_window"],
                        help="betting_window: deal inside the game server's betting windows")  # fmt: skip
    parser.add_argument("--betting-source", default="server", choices=["server", "button", "shoe_lock"],
                        help="with betting_window: who opens and closes betting")  # fmt: skip
    parser.add_argument("--reader-signals", action="store_true",
                        help="with betting_window: a line/HID reader sends the cut card itself")  # fmt: skip
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--fixture", type=Path, help="write a fixture file instead of playing into a pty")
    out.add_argument(
        "--library", type=Path, metavar="DIR", help="regenerate the committed fixture library into DIR"
    )
    parser.add_argument(
        "--expected", action="store_true", help="with --fixture: also write the expected events"
    )
    parser.add_argument("--link", type=Path, help="symlink pointing at the pty (a stable device path)")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="time factor for the pty (10 = ten times faster)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from daemon.simulation.dealer import DealSettings, FaultSpec, make_fixture, plan_shoe
    from drivers.base import log_to_stderr
    from drivers.fixtures import EXPECTED_SUFFIX, FIXTURE_SUFFIX, load_fixture, write_expected
    from drivers.simulate import encode_plan

    log_to_stderr()
    if args.library is not None:
        from daemon.simulation.library import write_library

        for path, count in write_library(args.library):
            print(f"{path}: {count} events")
        return 0
    if not 1 <= args.decks <= 8:
        print("error: --decks must be 1..8", file=sys.stderr)
        return 2
    if args.speed <= 0:
        print("error: --speed must be positive", file=sys.stderr)
        return 2
    if args.game_flow == "betting_window":
        return _run_flow(args)
    try:
        faults = [FaultSpec.parse(text) for text in args.fault]
    except ValueError as exc:
        print(f"error: --fault: {exc}", file=sys.stderr)
        return 2
    deal = DealSettings(
        decks=args.decks,
        seed=args.seed,
        max_hands=args.hands,
        cut_card_from_end=args.cut_card_from_end,
        burn_before_each_round=args.burn_each_round,
        cut_card_policy=args.cut_card_policy,
    )
    if args.fixture is not None:
        name = args.fixture.name.removesuffix(FIXTURE_SUFFIX).removesuffix(".jsonl")
        try:
            fixture = make_fixture(name, args.protocol, deal, faults)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        fixture.save(args.fixture)
        print(f"{args.fixture}: {len(fixture.steps)} steps, {fixture.header.generator['hands']} hands")
        if args.expected:
            from daemon.simulation.golden import engine_events

            events, _ = engine_events(load_fixture(args.fixture))
            expected = args.fixture.with_name(name + EXPECTED_SUFFIX)
            write_expected(expected, events)
            print(f"{expected}: {len(events)} events")
        return 0
    if args.protocol == "usb_hid":
        print(
            "error: a keyboard-wedge reader is USB, not a serial line: use --fixture and `replay`",
            file=sys.stderr,
        )
        return 2
    try:
        plan = plan_shoe(deal, faults)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _play(encode_plan(plan, args.protocol, args.seed), args)


def _run_flow(args: argparse.Namespace) -> int:
    """``--game-flow betting_window``: a fixture (or pty) of a flow game (``flow_library.FlowEntry``)."""
    from daemon.simulation.flow_dealer import FLOW_FAULTS, FlowFault
    from daemon.simulation.flow_library import FlowEntry
    from drivers.fixtures import EXPECTED_SUFFIX, FIXTURE_SUFFIX, load_fixture, write_expected

    faults: list[FlowFault] = []
    for text in args.fault:
        kind, sep, number = text.partition("@")
        if kind not in FLOW_FAULTS or not sep or not number.isdigit() or int(number) < 1:
            known = ", ".join(FLOW_FAULTS)
            print(f"error: --fault {text!r}: expected KIND@ROUND, KIND one of {known}", file=sys.stderr)
            return 2
        faults.append(FlowFault(kind, int(number)))
    if args.betting_source == "shoe_lock" and args.protocol != "angel_eye":
        print("error: --betting-source shoe_lock needs --protocol angel_eye", file=sys.stderr)
        return 2
    rounds = args.hands or max(1, (args.decks * 52 - 11 - 6) // 6)
    if args.hands is None and not any(f.kind == "cut_card" for f in faults):
        faults.append(FlowFault("cut_card", rounds))  # a whole shoe ends at its cut card
    name = "flow"
    if args.fixture is not None:
        name = args.fixture.name.removesuffix(FIXTURE_SUFFIX).removesuffix(".jsonl")
    entry = FlowEntry(name, args.protocol, "", (), tuple(faults), args.betting_source, args.reader_signals,
                      seed=args.seed, rounds=rounds)  # fmt: skip
    try:
        fixture = entry.fixture()
    except StopIteration:
        print(f"error: {rounds} rounds need more cards than {args.decks} decks hold", file=sys.stderr)
        return 2
    if args.fixture is None:
        if args.protocol == "usb_hid" or any(f.kind == "outage" for f in faults):
            print("error: a USB reader or an outage needs --fixture and `replay`", file=sys.stderr)
            return 2
        return _play(fixture.steps, args)
    fixture.save(args.fixture)
    print(f"{args.fixture}: {len(fixture.steps)} steps, {len(entry.game().round_ids)} rounds")
    if args.expected:
        from daemon.simulation.golden import engine_events

        events, _ = engine_events(load_fixture(args.fixture))
        expected = args.fixture.with_name(name + EXPECTED_SUFFIX)
        write_expected(expected, events)
        print(f"{expected}: {len(events)} events")
    return 0


def _play(steps: Sequence[FixtureStep], args: argparse.Namespace) -> int:
    from drivers.pty_device import PtyDevice
    from drivers.simulate import VirtualShoe

    device = PtyDevice(args.link)
    print(
        f"virtual {args.protocol} shoe on {device.path}" + (f" -> {device.slave_name}" if args.link else "")
    )
    print(
        "open it as the reader's url, then press Enter to start dealing (stdin at EOF: start now)", flush=True
    )
    try:
        sys.stdin.readline()

        def supervisor(step: object, t: float) -> None:
            print(f"[{t:8.2f}] supervisor would send: {step}", flush=True)

        def progress(done: int, total: int) -> None:
            if done % 100 == 0 or done == total:
                print(f"\r{done}/{total} steps", end="", file=sys.stderr, flush=True)

        VirtualShoe(steps, device, speed=args.speed, on_supervisor=supervisor, on_progress=progress).run()
        print(file=sys.stderr)
    finally:
        device.close()
    return 0
