"""``baccarat-edge tail``: the reference consumer of a table's event stream.

Subscribes to ``baccarat/v1/<table>/events``, checks each event's signature, drops
duplicates by ``event_id``, reports ``seq`` gaps (and gaps explained by a dead-letter alert)
and prints the events. With ``--all`` it also prints status, state, health, alerts and
command replies. The dedup/gap/verify logic is :class:`daemon.mqtt.consumer.EventConsumer`.

A squeeze table's ``card_revealed`` events are checked against the commitment of their
``card_dealt`` (:mod:`daemon.mqtt.reveal_check`): each one prints ``REVEAL VERIFIED``, or
``REVEAL UNCHECKED`` (its deal came before this tail started), or the named problem
(``reveal_mismatch``: the card shown is not the card committed at the deal, ...).

Exit status: 0 when every event verified, every reveal matched its commitment and no gap is
left unexplained, 1 otherwise; the
connection failures are the MQTT tools' own (:mod:`daemon.commands._mqtt_client`): 2 bad
usage, 3 broker unreachable, 4 login or subscription refused, 5 TLS failed, 6 connection
refused otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daemon.commands._mqtt_client import EXIT_CODES_HELP, add_connection_arguments

    parser = subparsers.add_parser(
        "tail",
        help="print a table's events: verify signatures, drop duplicates, report seq gaps",
        description=(
            "Reference consumer of baccarat/v1/<table>/events: verifies each event's HMAC, "
            "deduplicates by event_id, reports seq gaps, prints events."
        ),
        epilog=EXIT_CODES_HELP,
    )
    add_connection_arguments(parser, events_key=True)
    parser.add_argument(
        "--all", action="store_true", help="also print status, state, health, alerts, replies"
    )
    parser.add_argument("--json", action="store_true", help="print each accepted event as one JSON line")
    parser.add_argument("--count", type=int, help="exit after this many new events")
    parser.add_argument("--timeout", type=float, help="exit after this many seconds")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="run as the game server's reference consumer: durable SQLite checkpoint FILE, every event "
        "once in seq order, signed acknowledgements on ack and resend requests for gaps "
        "(needs --key-id and --command-key-file: a game_server key)",
    )
    parser.add_argument("--key-id", help="with --checkpoint: the game_server keyring key id")
    parser.add_argument(
        "--command-key-file", type=Path, help="with --checkpoint: file holding that key (never argv)"
    )
    parser.add_argument(
        "--client-id",
        help="with --checkpoint: the persistent session's client id (default baccarat-edge-consumer-TABLE)",
    )
    parser.set_defaults(handler=run)


class Tail:
    """Feeds received payloads to the consumer and prints what they turned out to be."""

    def __init__(self, table: str, key: Any, args: argparse.Namespace, out: TextIO) -> None:
        from daemon.mqtt.consumer import EventConsumer
        from daemon.mqtt.topics import TableTopics

        self.topics = TableTopics(table)
        # With a key every event must carry a valid signature (EventConsumer's rule).
        self.consumer = EventConsumer(table, key=key)
        self.args = args
        self.out = out
        self.lock = threading.Lock()
        self.done = threading.Event()

    def on_payload(self, topic: str, payload: bytes) -> None:
        from daemon.mqtt.consumer import Verdict

        with self.lock:
            if topic != self.topics.events:
                if self.args.all:
                    self._print_other(topic, payload)
                return
            result = self.consumer.feed(payload)
            envelope = result.envelope or {}
            if result.verdict is Verdict.REJECTED:
                self._warn(f"REJECTED event: {result.reason}")
            elif result.verdict is Verdict.CONFLICT:
                self._warn(f"CONFLICT: {result.reason}")
            elif result.verdict is Verdict.DUPLICATE:
                if not self.args.json:
                    self._warn(
                        f"duplicate seq={envelope.get('seq')} event_id={envelope.get('event_id')} dropped"
                    )
            else:
                if result.new_gaps:
                    self._warn(f"GAP: missing seq {_ranges(result.new_gaps)}")
                if result.filled_gap:
                    self._warn(f"late arrival fills seq {envelope['seq']}")
                if result.reveal is not None:
                    self.say_reveal(result.reveal)
                self._print_event(envelope)
                if self.args.count is not None and self.consumer.stats.new >= self.args.count:
                    self.done.set()

    def _print_event(self, envelope: dict[str, Any]) -> None:
        if self.args.json:
            print(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False), file=self.out, flush=True)
            return
        stamp = time.strftime("%H:%M:%S", time.localtime(envelope["ts"]))
        data = json.dumps(envelope["data"], separators=(",", ":"), ensure_ascii=False)
        if "sig" not in envelope:
            signed = "unsigned"
        elif self.consumer.key is None:
            signed = "signature not checked: no key"
        else:
            signed = "signature verified"
        print(
            f"{stamp} seq={envelope['seq']} shoe={envelope.get('shoe_id')} hand={envelope.get('hand')} "
            f"{envelope['kind']} [{envelope['source']}, {signed}] {data}",
            file=self.out,
            flush=True,
        )

    def _print_other(self, topic: str, payload: bytes) -> None:
        name = topic[len(self.topics.base) + 1 :]
        text = payload.decode("utf-8", errors="replace")
        if self.args.json:
            print(json.dumps({"topic": name, "payload": text}), file=self.out, flush=True)
        else:
            print(f"[{name}] {text}", file=self.out, flush=True)

    def say_reveal(self, verdict: Any) -> None:
        """One line on stderr for a squeeze reveal's check: the problem's name first when it failed."""
        if verdict.ok:
            self._warn(f"REVEAL {verdict.status.value.upper()}: {verdict.describe()}")
        else:
            self._warn(f"REVEAL PROBLEM {verdict.describe()}")

    def _warn(self, message: str) -> None:
        print(f"tail: {message}", file=sys.stderr, flush=True)

    def summary(self) -> str:
        stats = self.consumer.stats
        parts = [
            f"{stats.new} events",
            f"{stats.duplicates} duplicates dropped",
            f"{stats.rejected} rejected",
            f"{stats.conflicts} conflicts",
            f"highest seq {self.consumer.highest_seq}",
        ]
        reveals = self.consumer.reveals
        if reveals.verified or reveals.unchecked or stats.reveal_problems:
            parts.append(
                f"reveals: {reveals.verified} verified, {reveals.unchecked} unchecked, "
                f"{stats.reveal_problems} failed"
            )
        gaps = self.consumer.unexplained_gaps
        parts.append(f"unexplained gaps: {_ranges(gaps)}" if gaps else "no unexplained gap")
        if self.consumer.explained:
            parts.append(f"dead-lettered seqs: {_ranges(sorted(self.consumer.explained))}")
        return "; ".join(parts)

    @property
    def clean(self) -> bool:
        stats = self.consumer.stats
        return (
            not self.consumer.unexplained_gaps
            and stats.rejected == 0
            and stats.conflicts == 0
            and stats.reveal_problems == 0
        )


def _ranges(seqs: Any) -> str:
    values = sorted(seqs)
    if not values:
        return "-"
    out: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = value
    out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def run(args: argparse.Namespace) -> int:
    from daemon.commands._mqtt_client import ClientFailure, resolve_or_fail, subscribed

    try:
        conn = resolve_or_fail(args)
        if args.checkpoint is not None:
            return run_consumer(args, conn)
        tail = Tail(conn.table, conn.events_key, args=args, out=sys.stdout)
        topic = tail.topics.all if args.all else tail.topics.events
        with subscribed(conn, name="tail", topic=topic, on_message=tail.on_payload):
            print(f"tail: subscribed to {topic}", file=sys.stderr, flush=True)
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a live tail: still print the summary
                tail.done.wait(args.timeout)
    except ClientFailure as failure:
        return failure.report("tail")
    print(f"tail: {tail.summary()}", file=sys.stderr)
    return 0 if tail.clean else 1


def run_consumer(args: argparse.Namespace, conn: Any) -> int:
    """``tail --checkpoint``: the reference consumer (:mod:`daemon.mqtt.consumer_client`).
    Raises :class:`~daemon.commands._mqtt_client.ClientFailure` when it cannot connect."""
    from daemon.commands._mqtt_client import ClientFailure, ExitCode, connect_failure, new_client
    from daemon.mqtt.checkpoint import Checkpoint
    from daemon.mqtt.consumer import Verdict
    from daemon.mqtt.consumer_client import ConsumerClient
    from daemon.mqtt.ordered_consumer import Fed, OrderedConsumer
    from daemon.mqtt.secrets import SecretError, SigningKeySource

    if args.key_id is None or args.command_key_file is None:
        raise ClientFailure(
            ExitCode.USAGE, "--checkpoint needs --key-id and --command-key-file (a game_server key)"
        )
    if not conn.mqtt5:
        raise ClientFailure(ExitCode.USAGE, "--checkpoint needs MQTT 5 (a persistent session with an expiry)")
    try:
        key = SigningKeySource(file=args.command_key_file).load()
    except SecretError as exc:
        raise ClientFailure(ExitCode.USAGE, str(exc)) from exc
    client = new_client(conn, "consumer", client_id=args.client_id or f"baccarat-edge-consumer-{conn.table}")
    tail = Tail(conn.table, conn.events_key, args=args, out=sys.stdout)
    consumer = OrderedConsumer(conn.table, Checkpoint(args.checkpoint, conn.table), conn.events_key)
    processed = 0
    done = threading.Event()
    reported: list[str] = []
    stopped_said: list[str | None] = [None]

    def on_fed(fed: Fed) -> None:
        if fed.verdict in (Verdict.REJECTED, Verdict.CONFLICT, Verdict.LOST):
            tail._warn(f"{fed.verdict.value.upper()}: {fed.reason}")
        for verdict in fed.reveals:
            tail.say_reveal(verdict)
        for report in consumer.rollbacks[len(reported) :]:
            tail._warn(f"ROLLBACK: {report}")
            reported.append(report)
        if consumer.stopped != stopped_said[0]:  # the contract's stop and resume, said once each
            if consumer.stopped is None:
                tail._warn("RESUMED: the table's rollback alert says where its history goes on")
            else:
                tail._warn(
                    f"STOPPED: {consumer.stopped} (acknowledging the position until the table's alert)"
                )
            stopped_said[0] = consumer.stopped

    def on_processed(envelope: dict[str, Any]) -> None:
        nonlocal processed
        processed += 1
        tail._print_event(envelope)
        if args.count is not None and processed >= args.count:
            done.set()

    runner = ConsumerClient(client, consumer, args.key_id, key, on_processed=on_processed, on_fed=on_fed)
    try:
        runner.connect(conn.host, conn.port)
    except (OSError, ValueError) as exc:
        consumer.checkpoint.close()
        raise connect_failure(conn, exc) from exc
    if runner.subscribed.wait(10):
        print(
            f"tail: subscribed to {tail.topics.events} (checkpoint {args.checkpoint})",
            file=sys.stderr,
            flush=True,
        )
    try:
        done.wait(args.timeout)
    except KeyboardInterrupt:
        pass
    finally:
        runner.stop()
        lost = len(consumer.checkpoint.lost())
        consumer.checkpoint.close()
    stats = consumer.stats
    print(
        f"tail: {processed} events processed in order; position {consumer.position}; "
        f"{stats.duplicates} duplicates dropped; {stats.rejected} rejected; {stats.conflicts} conflicts; "
        f"{len(consumer.rollbacks)} rollbacks; {lost} events listed lost, "
        f"{consumer.recovered} recovered; missing: {_ranges(consumer.missing)}"
        + (f"; {stats.reveal_problems} reveals failed their commitment" if stats.reveal_problems else "")
        + (f"; HOLDING: {consumer.stopped}" if consumer.stopped else ""),
        file=sys.stderr,
    )
    trouble = (
        stats.rejected
        or stats.conflicts
        or stats.reveal_problems
        or consumer.rollbacks
        or consumer.missing
        or consumer.stopped
    )
    return 1 if trouble else 0
