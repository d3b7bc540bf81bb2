"""``baccarat-edge command``: sign one command with a keyring key, send it, print the reply.

The key is read from a file (``--command-key-file``; ``--key-file`` is the TLS client key of
the shared connection flags), never from the command line. The broker, login and table come
from ``--config`` and/or the connection flags, as for ``tail``; with the table's events key
(from ``--config`` or ``--events-key-file``) the reply's signature is checked.

``--arg name=value`` gives one argument; the value is read as JSON when it parses (``true``,
``3``, ``{"P1": "8s"}``) and as text otherwise (``reason=card exposed``).

Exit status: 0 accepted, 1 refused (the reply's code and reason are printed), 7 no reply in
time, 8 a reply whose signature does not verify; the usage and connection failures are the
MQTT tools' own (:mod:`daemon.commands._mqtt_client`): 2 bad usage, 3 broker unreachable,
4 login or subscription refused, 5 TLS failed, 6 connection refused otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

REPLY_TIMEOUT_S = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daemon.commands._mqtt_client import EXIT_CODES_HELP, add_connection_arguments

    parser = subparsers.add_parser(
        "command",
        help="sign one command with a keyring key, send it to the table, print the reply",
        description="Signs ACTION with the command key KEY_ID (read from --command-key-file), "
        "publishes it on baccarat/v1/<table>/cmd and prints the table's reply.",
        epilog=EXIT_CODES_HELP,
    )
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
    from daemon.commands._mqtt_client import ClientFailure

    try:
        return _send(args)
    except ClientFailure as failure:
        return failure.report("command")


def _send(args: argparse.Namespace) -> int:
    """Sign, send, await and print; raises ``ClientFailure`` for every failure."""
    from daemon.commands._mqtt_client import ClientFailure, ExitCode, resolve_or_fail, subscribed
    from daemon.mqtt.secrets import SecretError, SigningKeySource
    from daemon.mqtt.settings import KEY_ID_PATTERN
    from daemon.mqtt.signing import verify
    from daemon.mqtt.supervisor_commands import CommandSender
    from daemon.mqtt.topics import TableTopics

    if not re.match(KEY_ID_PATTERN, args.key_id):
        raise ClientFailure(
            ExitCode.USAGE,
            f"--key-id {args.key_id!r}: 1-32 of a-z 0-9 _ . - (starting with a letter or digit)",
        )
    command_args = parse_args_list(args.arg)
    if isinstance(command_args, str):
        raise ClientFailure(ExitCode.USAGE, command_args)
    conn = resolve_or_fail(args)
    try:
        key = SigningKeySource(file=args.command_key_file).load()
    except SecretError as exc:
        raise ClientFailure(ExitCode.USAGE, str(exc)) from exc
    sender: CommandSender | None = None  # made once connected; no reply can come before

    def on_reply(_topic: str, payload: bytes) -> None:
        if sender is not None:
            sender.on_reply(payload)

    reply_topic = TableTopics(conn.table).cmd_reply
    with subscribed(
        conn, name="command", topic=reply_topic, on_message=on_reply, timeout=args.timeout
    ) as client:
        sender = CommandSender(client, conn.table, key, key_id=args.key_id)
        reply = sender.send(args.action, command_args, timeout=args.timeout)
    if "status" not in reply:
        raise ClientFailure(ExitCode.NO_REPLY, str(reply["reason"]))
    if conn.events_key is not None and not verify(reply, conn.events_key):
        raise ClientFailure(
            ExitCode.REPLY_UNVERIFIED, "the reply's signature does not verify with the table's events key"
        )
    print(json.dumps(reply, sort_keys=True))
    return 0 if reply["status"] == "accepted" else 1
