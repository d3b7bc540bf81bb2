"""``baccarat-edge fleet``: every table on a broker, worst first, from its retained topics.

Subscribes to ``baccarat/v1/+/status``, ``+/health`` and ``+/state``, gathers the retained
messages until the broker is quiet (``--quiet``) or ``--timeout`` passed, validates each
against the contract (an invalid payload is shown as invalid, never read) and prints one row
per table: status and since when, version, config digest, variant, shoe and hand, age of
the last card, undelivered backlog, the game server's acknowledgement lag, open alerts by
severity. ``--json`` prints the same as JSON; ``--metrics`` as Prometheus text;
``--serve-metrics HOST:PORT`` keeps running as a Prometheus exporter. See daemon/fleet/README.md.

Exit status: 0 when every table is ok, 1 when any is warning or critical or none was
found, 2 on a usage or connection error.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.fleet.tables import Thresholds
    from daemon.mqtt.client_options import ClientOptions


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "fleet",
        help="every table on a broker, worst first (terminal, --json, Prometheus exporter)",
        description="Show every table on a broker from its retained status, health and state topics.",
    )
    from daemon.commands._mqtt_client import add_connection_arguments

    add_connection_arguments(parser, events_key=False, table=False)
    parser.add_argument("--json", action="store_true", help="print the fleet as one JSON document")
    parser.add_argument("--metrics", action="store_true", help="print the Prometheus exposition once")
    parser.add_argument(
        "--serve-metrics",
        metavar="HOST:PORT",
        help="keep running and serve /metrics (Prometheus) on HOST:PORT, e.g. 127.0.0.1:9108",
    )
    parser.add_argument(
        "--quiet", type=float, default=0.5, help="stop gathering after this many seconds without a message"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="stop gathering after this many seconds")
    parser.add_argument("--limit", type=int, help="terminal view: list only the worst N tables")
    parser.add_argument(
        "--stale-after", type=float, default=60.0, help="online with no health report this long: stale"
    )
    parser.add_argument(
        "--backlog-age", type=float, default=30.0, help="warn when the oldest undelivered event is older"
    )
    parser.add_argument(
        "--ack-lag", type=float, default=30.0, help="warn when the game server's ack lags this many seconds"
    )
    parser.add_argument("--card-age", type=float, help="warn when a table had no card this many seconds")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from daemon.commands._mqtt_client import resolve
    from daemon.fleet.collect import CollectError, collect
    from daemon.fleet.metrics import exposition
    from daemon.fleet.render import as_json, render_table
    from daemon.fleet.tables import Thresholds, worst_first

    for name in ("quiet", "timeout", "stale_after", "backlog_age", "ack_lag", "card_age"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            print(f"fleet: --{name.replace('_', '-')} must be above 0", file=sys.stderr)
            return 2
    conn = resolve(args, table_required=False)
    if isinstance(conn, str):
        print(f"fleet: {conn}", file=sys.stderr)
        return 2
    limits = Thresholds(args.stale_after, args.backlog_age, args.ack_lag, args.card_age)
    if args.serve_metrics:
        return _serve(args, conn, limits)
    try:
        got = collect(conn, quiet_s=args.quiet, timeout_s=args.timeout)
    except (CollectError, OSError, ValueError) as exc:
        print(f"fleet: {exc}", file=sys.stderr)
        return 2
    if not got.complete:
        print(
            f"fleet: --timeout {args.timeout:g} s stopped the gathering while messages were still "
            f"arriving ({got.messages} so far): tables may be missing; raise --timeout",
            file=sys.stderr,
        )
    now = time.time()
    summaries = worst_first(got.fleet.records(), now, limits)
    if args.json:
        print(as_json(summaries, now, got.messages, got.complete))
    elif args.metrics:
        sys.stdout.write(exposition(summaries, got.messages, True, got.fleet.ignored_topics))
    else:
        colour = not args.no_color and sys.stdout.isatty()
        print(render_table(summaries, now, colour=colour, limit=args.limit))
    if not summaries:
        print(
            "fleet: no table on this broker (or this account may not read baccarat/v1/+/status, "
            "health, state)",
            file=sys.stderr,
        )
        return 1
    return 0 if all(s.level == "ok" for s in summaries) else 1


def _serve(args: argparse.Namespace, conn: ClientOptions, limits: Thresholds) -> int:
    from daemon.fleet.collect import LiveFleet
    from daemon.fleet.exporter import MetricsServer, parse_address

    try:
        address = parse_address(args.serve_metrics)
    except ValueError as exc:
        print(f"fleet: {exc}", file=sys.stderr)
        return 2
    try:
        live = LiveFleet(conn)
    except (OSError, ValueError) as exc:
        print(f"fleet: TLS set-up failed: {exc}", file=sys.stderr)
        return 2
    # An unreachable broker does not stop the exporter: it serves broker_connected 0 (and
    # /healthz 503) while the connection is retried.
    not_yet = live.start(timeout_s=min(args.timeout, 5.0))
    if not_yet is not None:
        print(f"fleet: {not_yet}; serving meanwhile", file=sys.stderr, flush=True)
    try:
        server = MetricsServer(live, address, limits)
    except OSError as exc:
        live.stop()
        print(f"fleet: cannot listen on {args.serve_metrics}: {exc}", file=sys.stderr)
        return 2
    server.start()
    print(f"fleet: serving http://{address[0]}:{server.port}/metrics", file=sys.stderr, flush=True)
    stop = threading.Event()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        live.stop()
    return 0
