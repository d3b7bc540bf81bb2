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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="live terminal view of a table from its MQTT topics",
        description="Subscribe to baccarat/v1/<table>/# and show the table live.",
    )
    parser.add_argument("--table", help="table id (default: table_id of --config)")
    parser.add_argument(
        "--broker",
        default=None,
        help="mqtt://host:port or mqtts://host:port (default: mqtt://localhost:1883, or --config's broker)",
    )
    parser.add_argument("--config", type=Path, help="take broker and table from this daemon config file")
    parser.add_argument("--ca-file", type=Path, help="CA bundle for mqtts:// (system store when unset)")
    parser.add_argument("--cert-file", type=Path, help="client certificate (PEM) for mqtts://")
    parser.add_argument("--key-file", type=Path, help="client key (PEM) for mqtts://")
    parser.add_argument("--username", help="broker user name")
    parser.add_argument(
        "--password-file", type=Path, help="file holding the broker password (never on the command line)"
    )
    parser.add_argument("--mqtt", choices=["3.1.1", "5"], default="5", help="MQTT protocol version")
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument(
        "--wait", type=float, default=3.0, help="--once: seconds to wait for the retained topics"
    )
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours")
    parser.set_defaults(handler=run)


def _connection(args: argparse.Namespace) -> dict[str, Any] | str:
    """Host, port, TLS and credentials from the flags (or the daemon config); an error text."""
    conn: dict[str, Any] = {
        "host": "localhost",
        "port": 1883,
        "tls": False,
        "ca_file": args.ca_file,
        "cert_file": args.cert_file,
        "key_file": args.key_file,
        "username": args.username,
        "password": None,
        "mqtt5": args.mqtt == "5",
        "table": args.table,
    }
    if args.config is not None:
        from daemon.service.config import load_config
        from daemon.service.configfile import ConfigError

        try:
            cfg = load_config(args.config).config
        except ConfigError as exc:
            return str(exc)
        broker = cfg.broker
        conn.update(
            host=broker.host,
            port=broker.effective_port,
            tls=broker.tls.enabled,
            ca_file=args.ca_file or broker.tls.ca_file,
            cert_file=args.cert_file or broker.tls.cert_file,
            key_file=args.key_file or broker.tls.key_file,
            mqtt5=broker.protocol.value == "mqtt5",
            table=args.table or cfg.table_id,
        )
        if broker.auth is not None and args.username is None:
            conn["username"] = broker.auth.username
            if broker.auth.password is not None:
                try:
                    conn["password"] = broker.auth.password.load().reveal_text()
                except ValueError as exc:
                    return str(exc)
    if args.broker is not None:
        url = urlsplit(args.broker if "://" in args.broker else f"mqtt://{args.broker}")
        if url.scheme not in ("mqtt", "mqtts"):
            return f"--broker {args.broker!r}: the scheme must be mqtt:// or mqtts://"
        conn["tls"] = url.scheme == "mqtts"
        conn["host"] = url.hostname or "localhost"
        try:
            conn["port"] = url.port or (8883 if conn["tls"] else 1883)
        except ValueError:
            return f"--broker {args.broker!r}: the port is not a number"
    if args.password_file is not None:
        try:
            conn["password"] = args.password_file.read_text().rstrip("\r\n")
        except OSError as exc:
            return f"--password-file {args.password_file}: {exc.strerror}"
    if not conn["table"]:
        return "give --table ID (or --config FILE with a table_id)"
    return conn


def run(args: argparse.Namespace) -> int:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from daemon.mqtt.topics import TableTopics, TopicError
    from daemon.service.table_view import TableView, render

    conn = _connection(args)
    if isinstance(conn, str):
        print(f"monitor: {conn}", file=sys.stderr)
        return 2
    try:
        topics = TableTopics(conn["table"])
    except TopicError as exc:
        print(f"monitor: {exc}", file=sys.stderr)
        return 2
    view = TableView(conn["table"])
    lock = threading.Lock()
    changed = threading.Event()
    connected = threading.Event()
    connect_error: list[str] = []

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id="",
        protocol=mqtt.MQTTv5 if conn["mqtt5"] else mqtt.MQTTv311,
    )
    if conn["tls"]:
        client.tls_set(
            ca_certs=str(conn["ca_file"]) if conn["ca_file"] else None,
            certfile=str(conn["cert_file"]) if conn["cert_file"] else None,
            keyfile=str(conn["key_file"]) if conn["key_file"] else None,
        )
    if conn["username"]:
        client.username_pw_set(conn["username"], conn["password"])

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
        client.connect(conn["host"], conn["port"], keepalive=30)
    except OSError as exc:
        print(f"monitor: cannot reach the broker at {conn['host']}:{conn['port']}: {exc}", file=sys.stderr)
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
