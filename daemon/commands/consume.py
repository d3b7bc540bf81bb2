"""``baccarat-edge consume``: one member of the game server's consumer group, as a command.

Runs :class:`daemon.fleet.shards.ShardConsumer` for shard K of N on the central broker:
a persistent MQTT 5 session, one durable checkpoint per table, every event's signature
verified, the signed acknowledgement of each table's committed position and a signed
``resend`` for each gap. Each event is handed on as one JSON line (the event as published),
in ``seq`` order per table: appended to ``--output FILE`` exactly once, whatever instant the
member is killed at, or written to the standard input of ``--exec COMMAND`` at least once (the
command prints each ``event_id`` once it applied that event; a repeat after a crash is the
same ``event_id``). :mod:`daemon.fleet.ledger` says how.

Exit status: 0 after a clean stop (SIGTERM, Ctrl-C, ``--count``, ``--timeout``) with no
rejected or conflicting event; 1 when events were rejected, conflicted, a table rolled its
journal back, or the output failed; 2 on bad usage or configuration; 3 broker unreachable at
start; 5 TLS failed (the other command-line MQTT tools' codes).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.mqtt.secrets import Secret


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="run one member of the game server's consumer group: each event once, as JSON lines",
        description=(
            "One shard of the consumer group on the central broker: checkpoints, signed "
            "acknowledgements and resend requests; each event to --output FILE (exactly once) or "
            "to --exec COMMAND's stdin (at least once, same event_id on a repeat), as JSON "
            "lines in seq order per table."
        ),
    )
    from daemon.commands._mqtt_client import add_connection_arguments

    add_connection_arguments(parser, events_key=False, table=False)
    parser.add_argument("--shard", required=True, metavar="K/N", help="this member's shard, e.g. 0/3")
    parser.add_argument(
        "--tables",
        type=Path,
        required=True,
        help="file of every table id of the floor, one a line (# comments)",
    )
    parser.add_argument(
        "--events-keys",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory holding each table's events HMAC key as TABLE.key",
    )
    parser.add_argument("--key-id", required=True, help="the game_server key id of the acknowledgements")
    parser.add_argument(
        "--command-key-file", type=Path, required=True, help="file holding that key (never argv)"
    )
    parser.add_argument(
        "--checkpoint-dir", type=Path, required=True, help="this shard's checkpoints and output ledger"
    )
    sink = parser.add_mutually_exclusive_group(required=True)
    sink.add_argument("--output", type=Path, metavar="FILE", help="append each event to FILE (exactly once)")
    sink.add_argument(
        "--exec",
        dest="exec_command",
        metavar="COMMAND",
        help="write each event to COMMAND's stdin; it prints each event_id once applied (at least once)",
    )
    parser.add_argument(
        "--client-id",
        help="persistent session client id (default baccarat-consumer-<group>)",
    )
    parser.add_argument("--count", type=int, help="stop after handing on this many events")
    parser.add_argument("--timeout", type=float, help="stop after this many seconds")
    parser.set_defaults(handler=run)


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N) with 0 <= K < N; ValueError naming the problem."""
    k_text, sep, n_text = text.partition("/")
    if not sep or not k_text.isdigit() or not n_text.isdigit() or not 0 <= int(k_text) < int(n_text):
        raise ValueError(f"--shard {text!r}: give K/N with 0 <= K < N, e.g. 0/3")
    return int(k_text), int(n_text)


def read_tables(path: Path) -> list[str]:
    """The table ids of a file, one a line; ValueError naming the line that is not one."""
    from daemon.mqtt.topics import TopicError, validate_table_id

    tables: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            validate_table_id(line)
        except TopicError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
        tables.append(line)
    if not tables:
        raise ValueError(f"{path}: no table id")
    return tables


def _load_keys(directory: Path, tables: list[str]) -> dict[str, Secret]:
    from daemon.mqtt.secrets import SigningKeySource

    return {t: SigningKeySource(file=directory / f"{t}.key").load() for t in tables}


class UsageError(Exception):
    """A flag, file or key that cannot be used; the text says which and why."""


def _setup(args: argparse.Namespace) -> tuple[Any, tuple[int, int], list[str], dict[str, Any], Secret]:
    """Connection options, shard, tables, this shard's events keys and the game server's key;
    UsageError naming the problem."""
    from daemon.commands._mqtt_client import resolve
    from daemon.fleet.shards import shard_of
    from daemon.mqtt.secrets import SecretError, SigningKeySource

    try:
        shard, shards = parse_shard(args.shard)
        tables = read_tables(args.tables)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    conn = resolve(args, table_required=False)
    if isinstance(conn, str):
        raise UsageError(conn)
    if not conn.mqtt5:
        raise UsageError("a group member needs MQTT 5 (shared subscriptions, a persistent session)")
    try:
        keys = _load_keys(args.events_keys, [t for t in tables if shard_of(t, shards) == shard])
        ack_key = SigningKeySource(file=args.command_key_file).load()
    except SecretError as exc:
        raise UsageError(str(exc)) from None
    return conn, (shard, shards), tables, keys, ack_key


def _open_ledger(args: argparse.Namespace) -> Any:
    """The output (``--output`` file or ``--exec`` command) and its ledger; UsageError."""
    from daemon.fleet.ledger import CommandSink, FileSink, Ledger, LedgerError, Sink

    sink: Sink
    if args.exec_command is not None:
        command = shlex.split(args.exec_command)
        if not command:
            raise UsageError("--exec: no command")
        sink = CommandSink(command)
    else:
        sink = FileSink(args.output)
    try:
        return Ledger(args.checkpoint_dir / "consume-ledger.sqlite3", sink)
    except (LedgerError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from daemon.commands._mqtt_client import ClientFailure, connect_failure, new_client
    from daemon.fleet.shards import ShardConsumer, group_name

    try:
        conn, (shard, shards), tables, keys, ack_key = _setup(args)
        ledger = _open_ledger(args)
    except UsageError as exc:
        print(f"consume: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()

    def hand_on(table: str, envelope: dict[str, Any]) -> None:
        ledger.take(table, envelope)
        if args.count is not None and ledger.handed >= args.count:
            done.set()

    group = group_name(shard, shards)
    try:
        client = new_client(conn, "consume", client_id=args.client_id or f"baccarat-consumer-{group}")
    except ClientFailure as failure:
        ledger.close()
        return failure.report("consume")
    member = ShardConsumer(
        conn.host,
        conn.port,
        tables,
        shard,
        shards,
        keys=keys,
        checkpoint_dir=args.checkpoint_dir,
        ack_key_id=args.key_id,
        ack_key=ack_key,
        on_processed=hand_on,
        before_commit=ledger.commit,
        client=client,
    )
    try:
        member.start()
    except (OSError, ValueError) as exc:
        ledger.close()
        return connect_failure(conn, exc).report("consume")
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    if member.subscribed.wait(30):
        print(
            f"consume: shard {shard}/{shards} ({group}): {len(keys)} tables, "
            f"checkpoints in {args.checkpoint_dir}",
            file=sys.stderr,
            flush=True,
        )
    try:
        _wait(member, done, args.timeout)
    finally:
        member.stop()
        ledger.close()
    return _report(member, ledger)


def _wait(member: Any, done: threading.Event, timeout: float | None) -> None:
    """Until ``done`` (SIGTERM, ``--count``), Ctrl-C, ``timeout`` or a failure of the member."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while not done.wait(0.2) and member.failure is None:
            if deadline is not None and time.monotonic() > deadline:
                return
    except KeyboardInterrupt:
        return


def _report(member: Any, ledger: Any) -> int:
    stats = [c.stats for c in member.consumers.values()]
    rejected = sum(s.rejected for s in stats)
    conflicts = sum(s.conflicts for s in stats)
    rollbacks = [r for c in member.consumers.values() for r in c.rollbacks]
    reveal_problems = [r for c in member.consumers.values() for r in c.reveal_problems]
    for report in [
        *(x for c in member.consumers.values() for x in c.conflicts),
        *rollbacks,
        *reveal_problems,
    ]:
        print(f"consume: {report}", file=sys.stderr)
    if member.failure is not None:
        print(f"consume: stopped: {member.failure}", file=sys.stderr)
    print(
        f"consume: {ledger.handed} events handed on, {ledger.repeats} repeats skipped, "
        f"{sum(s.duplicates for s in stats)} duplicates dropped, {rejected} rejected, {conflicts} conflicts, "
        f"{len(rollbacks)} rollbacks, {len(reveal_problems)} reveals failed their commitment",
        file=sys.stderr,
    )
    return 1 if (rejected or conflicts or rollbacks or reveal_problems or member.failure is not None) else 0
