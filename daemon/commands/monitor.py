"""``baccarat-edge monitor``: a live terminal view of one table from its MQTT topics.

Shows the round in progress (cards and totals), the last results, the shoe's bead
plate and big road, the hand number, the bets offered this hand, open alerts and
the reader/broker health. Plain ANSI, no curses. ``--once`` prints one frame after
the retained topics (status, state, health) arrived, for scripts and tests.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="live terminal view of a table from its MQTT topics",
        description="Subscribe to baccarat/v1/<table>/# and show the table live.",
    )
    from daemon.mqtt.client_options import add_connection_arguments

    add_connection_arguments(parser, events_key=False)
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument(
        "--wait", type=float, default=3.0, help="--once: seconds to wait for the retained topics"
    )
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import paho.mqtt.client as mqtt

    from daemon.mqtt.client_options import build_client, resolve
    from daemon.mqtt.topics import TableTopics
    from daemon.service.table_view import TableView, render

    conn = resolve(args)
    if isinstance(conn, str):
        print(f"monitor: {conn}", file=sys.stderr)
        return 2
    topics = TableTopics(conn.table)
    view = TableView(conn.table)
    lock = threading.Lock()
    changed = threading.Event()
    connected = threading.Event()
    connect_error: list[str] = []
    try:
        client = build_client(conn, "monitor")
    except (OSError, ValueError) as exc:
        print(f"monitor: TLS set-up failed: {exc}", file=sys.stderr)
        return 2

    def on_connect(c: mqtt.Client, _u: object, _f: object, reason: Any, _p: object = None) -> None:
        if getattr(reason, "is_failure", False):
            connect_error.append(str(reason))
            connected.set()
            return
        c.subscribe(topics.all, qos=1)
        connected.set()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with lock:
            view.apply(msg.topic, bytes(msg.payload))
        changed.set()

    client.on_connect = on_connect
    client.on_message = on_message
    try:
        client.connect(conn.host, conn.port, keepalive=30)
    except (OSError, ValueError) as exc:
        print(f"monitor: cannot reach the broker at {conn.host}:{conn.port}: {exc}", file=sys.stderr)
        return 3
    client.loop_start()
    colour = not args.no_color and sys.stdout.isatty()
    try:
        if not connected.wait(10) or connect_error:
            reason = connect_error[0] if connect_error else "no answer within 10 s"
            print(f"monitor: the broker refused the connection: {reason}", file=sys.stderr)
            return 3
        if args.once:
            _wait_for_retained(view, lock, args.wait)
            with lock:
                sys.stdout.write(render(view, colour=colour))
            return 0
        while True:
            changed.wait(1.0)
            changed.clear()
            with lock:
                frame = render(view, colour=colour)
            sys.stdout.write("\x1b[H\x1b[2J" + frame)
            sys.stdout.flush()
            time.sleep(0.1)  # at most ~10 frames a second
    except KeyboardInterrupt:
        return 0
    finally:
        client.loop_stop()
        client.disconnect()


def _wait_for_retained(view: Any, lock: threading.Lock, wait: float) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with lock:
            if view.status is not None and view.state is not None and view.health is not None:
                return
        time.sleep(0.05)
