"""``baccarat-edge monitor``: a live terminal view of one table from its MQTT topics.

Shows the round in progress (cards and totals), the last results, the shoe's bead
plate and big road, the hand number, the bets offered this hand, open alerts and
the reader/broker health. Plain ANSI, no curses. ``--once`` prints one frame after
the retained topics (status, state, health) arrived, for scripts and tests.

Exit status: the MQTT tools' own (:mod:`daemon.commands._mqtt_client`): 0 done, 2 bad usage,
3 broker unreachable, 4 login refused, 5 TLS failed, 6 connection refused otherwise.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daemon.commands._mqtt_client import EXIT_CODES_HELP, add_connection_arguments

    parser = subparsers.add_parser(
        "monitor",
        help="live terminal view of a table from its MQTT topics",
        description="Subscribe to baccarat/v1/<table>/# and show the table live.",
        epilog=EXIT_CODES_HELP,
    )
    add_connection_arguments(parser, events_key=False)
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument(
        "--wait", type=float, default=3.0, help="--once: seconds to wait for the retained topics"
    )
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from daemon.commands._mqtt_client import ClientFailure, resolve_or_fail, subscribed
    from daemon.mqtt.topics import TableTopics
    from daemon.service.table_text import render
    from daemon.service.table_view import TableView

    try:
        conn = resolve_or_fail(args)
        view = TableView(conn.table)
        lock = threading.Lock()
        changed = threading.Event()

        def on_message(topic: str, payload: bytes) -> None:
            with lock:
                view.apply(topic, payload)
            changed.set()

        with subscribed(conn, name="monitor", topic=TableTopics(conn.table).all, on_message=on_message):
            colour = not args.no_color and sys.stdout.isatty()
            if args.once:
                _wait_for_retained(view, lock, args.wait)
                with lock:
                    sys.stdout.write(render(view, colour=colour))
                return 0
            _show_live(view, lock, changed, colour=colour)
    except ClientFailure as failure:
        return failure.report("monitor")
    except KeyboardInterrupt:
        pass
    return 0


def _show_live(view: Any, lock: threading.Lock, changed: threading.Event, *, colour: bool) -> None:
    """Redraw the table on each change until Ctrl-C."""
    from daemon.service.table_text import render

    while True:
        changed.wait(1.0)
        changed.clear()
        with lock:
            frame = render(view, colour=colour)
        sys.stdout.write("\x1b[H\x1b[2J" + frame)
        sys.stdout.flush()
        time.sleep(0.1)  # at most ~10 frames a second


def _wait_for_retained(view: Any, lock: threading.Lock, wait: float) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with lock:
            if view.status is not None and view.state is not None and view.health is not None:
                return
        time.sleep(0.05)
