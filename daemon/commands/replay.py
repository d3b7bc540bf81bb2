"""``baccarat-edge replay FIXTURE``: play a hardware fixture back through the real driver.

Serial fixtures go through a pseudo-terminal the serial driver opens like a
device; USB fixtures through a pyusb backend serving the recorded reports. By
default the inputs feed a fresh engine (the fixture's table settings) and its
events are printed as JSON lines; ``--inputs`` prints the driver's inputs
instead; ``--check`` compares the events with ``<name>.expected.jsonl`` and exits
1 on the first difference; ``--write-expected`` writes them there (volatile fields
removed), which is how a recorded fixture gets its expected stream: review it before
committing it, since it is what this engine produces, not an independent oracle.
``--realtime`` keeps the recorded timing (``--speed`` scales it); otherwise the replay
runs as fast as the driver reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a hardware fixture through the real driver (and engine)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("fixture", type=Path, help="a *.fixture.jsonl file")
    parser.add_argument("--realtime", action="store_true", help="keep the recorded timing")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="with --realtime: time factor (2 = twice as fast)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--inputs", action="store_true", help="print the driver's engine inputs, not engine events"
    )
    mode.add_argument(
        "--check", action="store_true", help="compare with the expected events; exit 1 on a difference"
    )
    mode.add_argument(
        "--write-expected",
        action="store_true",
        help="write the events to NAME.expected.jsonl beside the fixture (replacing it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-event output, only the summary")
    parser.set_defaults(handler=run)


def _progress(done: int, total: int) -> None:
    if done % 200 == 0 or done == total:
        print(
            f"\rreplay: {done}/{total} steps", end="\n" if done == total else "", file=sys.stderr, flush=True
        )


def run(args: argparse.Namespace) -> int:
    from drivers.base import log_to_stderr
    from drivers.fixtures import FixtureError, load_expected, load_fixture

    log_to_stderr()
    if args.speed <= 0:
        print("error: --speed must be positive", file=sys.stderr)
        return 2
    try:
        fixture = load_fixture(args.fixture)
    except FixtureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header = fixture.header
    print(
        f"replay: {header.name} ({header.protocol}, {header.origin}: {header.provenance}), "
        f"{len(fixture.steps)} steps",
        file=sys.stderr,
    )
    if args.inputs:
        return _replay_inputs(fixture, args)

    from daemon.simulation.golden import engine_events
    from daemon.simulation.library import expected_json

    def show(event: dict[str, Any]) -> None:
        if not args.quiet and not args.check and not args.write_expected:
            print(json.dumps(event, sort_keys=True), flush=True)

    events, result = engine_events(
        fixture, realtime=args.realtime, speed=args.speed, on_event=show, on_progress=_progress
    )
    print(
        f"replay: {len(events)} events; driver health {json.dumps(result.health, sort_keys=True)}",
        file=sys.stderr,
    )
    if args.write_expected:
        from drivers.fixtures import expected_path_for, write_expected

        target = expected_path_for(args.fixture)
        replaced = " (replaced)" if target.exists() else ""
        try:
            write_expected(target, events)
        except OSError as exc:
            print(f"error: cannot write {target}: {exc.strerror}", file=sys.stderr)
            return 2
        print(f"wrote {len(events)} events to {target}{replaced}", file=sys.stderr)
        return 0
    if not args.check:
        return 0
    expected_path = fixture.expected_path
    if expected_path is None or not expected_path.is_file():
        print(f"error: no expected events beside {args.fixture}", file=sys.stderr)
        return 2
    try:
        expected = load_expected(expected_path)
    except FixtureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    got = expected_json(events)
    for index, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            print(f"DIFFERENT at event {index}:\n  expected {json.dumps(want, sort_keys=True)}\n"
                  f"  got      {json.dumps(have, sort_keys=True)}")  # fmt: skip
            return 1
    if len(expected) != len(got):
        print(f"DIFFERENT: expected {len(expected)} events, got {len(got)}")
        return 1
    print(f"OK: {len(got)} events match {expected_path}")
    return 0


def _replay_inputs(fixture: Any, args: argparse.Namespace) -> int:
    from drivers.protocols.frames import input_to_dict
    from drivers.replay import replay_fixture

    def sink(item: Any) -> None:
        if args.quiet:
            return
        record = input_to_dict(item)
        print(json.dumps(record, sort_keys=True, default=str), flush=True)

    result = replay_fixture(fixture, sink, realtime=args.realtime, speed=args.speed, on_progress=_progress)
    print(f"replay: driver health {json.dumps(result.health, sort_keys=True)}", file=sys.stderr)
    return 0
