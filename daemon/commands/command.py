"""``baccarat-edge command``: sign one command with a keyring key, send it, print the reply.

The key is read from a file (``--command-key-file``; ``--key-file`` is the TLS client key of
the shared connection flags), never from the command line. The broker, login and table come
from ``--config`` and/or the connection flags, as for ``tail``; with the table's events key
(from ``--config`` or ``--events-key-file``) the reply's signature is checked.

``--arg name=value`` gives one argument; the value is read as JSON when it parses (``true``,
``3``, ``{"P1": "8s"}``) and as text otherwise (``reason=card exposed``).

Exit status: 0 accepted, 1 refused (the reply's code and reason are printed), 2 no reply, a
reply whose signature does not verify, or a usage/connection error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

REPLY_TIMEOUT_S = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "command",
        help="sign one command with a keyring key, send it to the table, print the reply",
        description="Signs ACTION with the command key KEY_ID (read from --command-key-file), "
        "publishes it on baccarat/v1/<table>/cmd and prints the table's reply. "
        "Exit 0 accepted, 1 refused, 2 no reply or error.",
    )
    from daemon.mqtt.client_options import add_connection_arguments

    add_connection_arguments(parser, events_key=True)
    parser.add_argument("--key-id", required=True, help="the keyring key id (broker.signing.command_keys)")
    parser.add_argument(
        "--command-key-file",
        type=Path,
        required=True,
        help="file holding that key (never on the command line)",
    )
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one argument of the action (repeatable)",
    )
    parser.add_argument(
        "--timeout", type=float, default=REPLY_TIMEOUT_S, help="seconds to wait for the reply"
    )
    parser.add_argument("action", help="the action, e.g. void_round (see daemon/mqtt/README.md)")
    parser.set_defaults(handler=run)


def parse_args_list(pairs: list[str]) -> dict[str, Any] | str:
    """``["reason=misdeal", "hand=3"]`` as a command's args; an error text for a bad pair."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            return f"--arg {pair!r}: give NAME=VALUE"
        try:
            out[name] = json.loads(text)
        except ValueError:
            out[name] = text
    return out


def run(args: argparse.Namespace) -> int:
    import paho.mqtt.client as mqtt

    from daemon.mqtt.client_options import build_client, resolve
    from daemon.mqtt.secrets import SecretError, SigningKeySource
    from daemon.mqtt.settings import KEY_ID_PATTERN
    from daemon.mqtt.signing import verify
    from daemon.service.supervisor import CommandSender

    if not re.match(KEY_ID_PATTERN, args.key_id):
        return _fail(f"--key-id {args.key_id!r}: 1-32 of a-z 0-9 _ . - (starting with a letter or digit)")
    command_args = parse_args_list(args.arg)
    if isinstance(command_args, str):
        return _fail(command_args)
    conn = resolve(args)
    if isinstance(conn, str):
        return _fail(conn)
    try:
        key = SigningKeySource(file=args.command_key_file).load()
    except SecretError as exc:
        return _fail(str(exc))
    try:
        client = build_client(conn, "command")
    except (OSError, ValueError) as exc:
        return _fail(f"TLS set-up failed: {exc}")
    sender = CommandSender(client, conn.table, key, key_id=args.key_id)
    subscribed = threading.Event()
    failure: list[str] = []

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            failure.append(f"broker refused the connection: {reason}")
            subscribed.set()
            return
        c.subscribe(sender.reply_topic, qos=1)

    def on_subscribe(c: mqtt.Client, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
        subscribed.set()

    def on_message(c: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        sender.on_reply(bytes(message.payload))

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    try:
        client.connect(conn.host, conn.port, keepalive=30)
    except (OSError, ValueError) as exc:
        return _fail(f"cannot connect to {conn.host}:{conn.port}: {exc}")
    client.loop_start()
    try:
        if not subscribed.wait(args.timeout):
            return _fail(f"no subscription to {sender.reply_topic} within {args.timeout:g} s")
        if failure:
            return _fail(failure[0])
        reply = sender.send(args.action, command_args, timeout=args.timeout)
    finally:
        client.disconnect()
        client.loop_stop()
    if "status" not in reply:
        return _fail(str(reply["reason"]))
    if conn.events_key is not None and not verify(reply, conn.events_key):
        return _fail("the reply's signature does not verify with the table's events key")
    print(json.dumps(reply, sort_keys=True))
    return 0 if reply["status"] == "accepted" else 1


def _fail(message: str) -> int:
    print(f"command: {message}", file=sys.stderr)
    return 2
