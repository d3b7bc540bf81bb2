"""Backlog recovery: the broker is down while ~20,000 events pile up in the journal, then it is back.

1. mosquitto (persistent sessions) and a subscriber with a persistent session are up; the real
   daemon starts and comes online.
2. mosquitto stops. Clean shoes are written into the reader's pty at full speed (no pacing;
   the pty's back-pressure is the only limit) until at least ``--events`` are journaled.
   The daemon's RSS is sampled every 0.25 s meanwhile (is it flat?).
3. mosquitto starts again on the same port. Measured: time from the broker listening to the
   journal marking the last backlog event delivered (its PUBACK), events/s over that time and
   over first → last acknowledgement, and the subscriber's copy checked for order and gaps.

With the server acknowledgement on (``--server-ack on``, the default; issue #13) the
subscriber is the game server stand-in: the shipped reference consumer, ``baccarat-edge tail
--checkpoint`` (:class:`daemon.mqtt.ordered_consumer.OrderedConsumer` behind
:class:`daemon.mqtt.consumer_client.ConsumerClient`, persistent session, SQLite checkpoint,
signed acknowledgement every 0.2 s), in its own process as a game server would be, and the
table waits for it: also measured, broker up → the server's acknowledgement of the last backlog
event (read from the journal's meta), and the consumer's checkpoint checked for every event
once, in order. The CPU each process spent per backlog event from broker up to done (the
daemon, mosquitto, the game server, this process) says where the two cores went.

Baseline in the same run: bare paho publishing the same number of same-sized QoS 1 messages
as fast as it can to the same broker, time to the last PUBACK. Target (issue #13: "with server
acknowledgement still drains >= 5,000 events/s"): the table drains its backlog, broker up to the
last PUBACK, at 5,000 events/s or more, in either mode. The rate to the server's
acknowledgement is reported beside it (``server_ack_rate_at_least_5000``) with the CPU each
process spent: it is the game server stand-in's pace on the cores it shares with the table and
the broker, not the table's.

    .venv/bin/python -m bench.bench_backlog [--events 20000] [--inflight-window N]
        [--server-ack on|off|both] [--py-spy FILE] [--json]

``--chain-cost`` measures what the event chain costs the drain, in this process and the same
run: the table's own per-event work of draining (read a page of pending events, build each
signed wire payload, mark the page delivered) on a chained journal and on a copy of it
without the chain columns (what a journal before the chain holds and publishes), alternated
page by page; and the append path (one JCS form and one SHA-256 per event). The end-to-end
drain with and without the chain is compared by alternating this script with a checkout of
the code before the chain (same venv: run it from that checkout's directory).

    .venv/bin/python -m bench.bench_backlog --chain-cost [--events 20000] [--json]
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import collapsed_profile, cpu_seconds, pyspy_start, report, rss_bytes
from bench.rig import (
    Broker,
    DaemonProcess,
    EventRecorder,
    NotifySocket,
    TimedPty,
    await_condition,
    journal_last_seq,
    parse_events,
    seq_report,
    shoe_stream,
    write_config,
)
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from daemon.journal.reading import events_page
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.envelope import event_payload
from daemon.mqtt.secrets import Secret, SigningKeySource
from daemon.mqtt.settings import LEGACY_KEY_ID
from drivers.simulate import VirtualShoe

TABLE_ID = "BACKLOG-1"
EVENTS_PER_SHOE = 700  # a clean 8-deck shoe makes ~730 events; slightly low so we deal enough
TARGET_EVENTS_PER_S = 5000


def _delivery(
    state_dir: Path, after_seq: int, through_seq: int | None = None
) -> tuple[int, int, float | None, float | None]:
    """(events after ``after_seq`` (through ``through_seq``), delivered among them, first and
    last delivered_at). ``through_seq`` leaves out what was journaled after the broker came
    back (e.g. the clearing of ``server_ack_lagging``), so it does not stretch the drain."""
    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True, timeout=5.0)
    try:
        total, delivered, first, last = db.execute(
            "SELECT count(*), count(delivered_at), min(delivered_at), max(delivered_at) "
            "FROM events WHERE seq > ? AND seq <= ?",
            (after_seq, through_seq if through_seq is not None else 2**62),
        ).fetchone()
        return int(total), int(delivered), first, last
    finally:
        db.close()


def paho_burst(port: int, count: int, size: int) -> float:
    """Seconds for bare paho to get ``count`` QoS 1 PUBACKs, publishing as fast as it can."""
    acked = threading.Event()
    done = [0]

    def on_publish(*_args: Any) -> None:
        done[0] += 1
        if done[0] >= count:
            acked.set()

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-burst", protocol=mqtt.MQTTv5)
    client.on_publish = on_publish
    client.connect("127.0.0.1", port)
    client.loop_start()
    payload = b"x" * size
    try:
        start = time.monotonic()
        for _ in range(count):
            client.publish("bench/burst", payload, qos=1)
        if not acked.wait(120):
            raise RuntimeError(f"bare paho: only {done[0]} of {count} acknowledged")
        return time.monotonic() - start
    finally:
        client.loop_stop()
        client.disconnect()


def _median_wire_size(state_dir: Path, events_key: Path, after_seq: int) -> int:
    """Median bytes of the backlog's first 500 event payloads as the table publishes them (signed)."""
    key = SigningKeySource(file=events_key).load()
    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True, timeout=5.0)
    try:
        events = events_page(db, after_seq, None)
    finally:
        db.close()
    return int(statistics.median(len(event_payload(e, TABLE_ID, time.time(), key)) for e in events))


def _server_ack_seq(state_dir: Path) -> int:
    """The seq the game server acknowledged, from the journal's meta (read-only)."""
    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True, timeout=5.0)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'server_ack_seq'").fetchone()
        return 0 if row is None else int(row[0])
    finally:
        db.close()


class GameServer:
    """The game server stand-in: the shipped reference consumer, ``baccarat-edge tail
    --checkpoint``, in its own process (a game server is another machine, so it must not share
    the bench's interpreter lock), acknowledging with the table's legacy command key (key id
    :data:`LEGACY_KEY_ID`: it holds the game_server role; bench/rig.py configures no keyring)."""

    def __init__(self, config: Path, table_dir: Path) -> None:
        self.checkpoint = table_dir / "game-server-checkpoint.sqlite3"
        self._stderr = table_dir / "game-server.stderr"
        self._stderr_file = open(self._stderr, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "tail", "--config", str(config), "--json",
             "--checkpoint", str(self.checkpoint), "--key-id", LEGACY_KEY_ID,
             "--command-key-file", str(table_dir / "command.key"), "--client-id", "bench-game-server"],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr_file,
        )  # fmt: skip
        if not await_condition(lambda: b"subscribed" in self._stderr.read_bytes(), 15.0):
            self.stop()
            raise RuntimeError(f"the game server stand-in did not subscribe:\n{self.report()}")

    def stop(self) -> None:
        """Ctrl-C, as an operator ends it: it commits, acknowledges and prints its summary."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stderr_file.close()

    def report(self) -> str:
        return self._stderr.read_text(errors="replace")

    def checkpoint_figures(self, acknowledged: int) -> dict[str, Any]:
        """What the stopped consumer's checkpoint holds and what its summary said."""
        checkpoint = Checkpoint(self.checkpoint, TABLE_ID)
        try:
            seqs = [seq for seq, _ in checkpoint.processed_seqs()]
        finally:
            checkpoint.close()
        summary = re.search(r"(\d+) duplicates dropped; (\d+) rejected; (\d+) conflicts", self.report())
        return {
            "server_acknowledged_seq": acknowledged,
            "processed": len(seqs),
            "once_in_seq_order": seqs == list(range(1, len(seqs) + 1)),
            "duplicates_dropped": int(summary.group(1)) if summary else None,
            "rejected": int(summary.group(2)) if summary else None,
            "conflicts": int(summary.group(3)) if summary else None,
        }


def run(
    target_events: int,
    seed: int,
    inflight_window: int | None,
    profile: Path | None = None,
    server_ack: bool = True,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-backlog-") as tmp_name:
        tmp = Path(tmp_name)
        shoes = -(-target_events // EVENTS_PER_SHOE)
        stream = shoe_stream(shoes, seed)
        broker = Broker(tmp / "broker", persistent=True).start()
        try:
            return _run_on(tmp, broker, stream, shoes, inflight_window, profile, server_ack)
        finally:
            broker.stop()


def _run_on(
    tmp: Path,
    broker: Broker,
    stream: Any,
    shoes: int,
    inflight_window: int | None,
    profile: Path | None,
    server_ack: bool,
) -> dict[str, Any]:
    recorder = EventRecorder(
        broker.port,
        persistent=True,
        # With the server acknowledgement on, the game server stand-in is the events
        # subscriber (its checkpoint is checked); a second copy would only take CPU from it.
        topics=("baccarat/v1/+/status", "baccarat/v1/+/cmd")
        if server_ack
        else ("baccarat/v1/+/events", "baccarat/v1/+/status"),
    ).start()
    pty = TimedPty(tmp / "shoe")
    delivery: dict[str, Any] = {} if inflight_window is None else {"inflight_window": inflight_window}
    delivery["server_ack"] = {"enabled": server_ack}
    config = write_config(tmp / "table", TABLE_ID, pty.path, broker.port, delivery=delivery)
    game: GameServer | None = None
    state_dir = tmp / "table" / "state"
    notify = NotifySocket(tmp / "notify.sock")
    daemon = DaemonProcess(config, tmp / "daemon.log", notify_socket=notify.path)
    rss: list[tuple[float, int, int]] = []  # (s since the broker went down, RSS bytes, journaled)
    try:
        if notify.wait_ready(30.0) is None:
            raise RuntimeError(f"the daemon did not report READY:\n{daemon.tail()}")
        if not await_condition(lambda: any(b'"online"' in r.payload for r in recorder.snapshot()), 15.0):
            raise RuntimeError(f"the daemon did not come online:\n{daemon.tail()}")
        if server_ack:
            game = GameServer(config, tmp / "table")
        before = journal_last_seq(state_dir)
        broker.stop()
        down_at = time.monotonic()
        shoe = VirtualShoe(stream.steps, pty, speed=1e9)
        shoe.start()
        last_seen, stable_since = -1, time.monotonic()
        while True:  # until the shoe is written and the journal stopped growing for 1 s
            time.sleep(0.25)
            seq = journal_last_seq(state_dir)
            rss.append((time.monotonic() - down_at, rss_bytes(daemon.pid), seq - before))
            if seq != last_seen:
                last_seen, stable_since = seq, time.monotonic()
            elif shoe.done.is_set() and time.monotonic() - stable_since > 1.0:
                break
            if not daemon.alive():
                raise RuntimeError(f"the daemon died:\n{daemon.tail()}")
        accumulate_s = stable_since - down_at
        backlog, delivered, _, _ = _delivery(state_dir, before)
        last_backlog_seq = journal_last_seq(state_dir)
        spy = None if profile is None else pyspy_start(daemon.pid, 4.0, profile)
        game_profile = None if profile is None or game is None else profile.with_suffix(".game-server.txt")
        game_spy = (
            None if game_profile is None or game is None else pyspy_start(game.proc.pid, 4.0, game_profile)
        )
        cpu_before = cpu_seconds(daemon.pid)
        others_before = (time.process_time(), 0.0 if game is None else cpu_seconds(game.proc.pid))
        broker.start()
        up_wall = time.time()
        up = time.monotonic()
        finished = await_condition(
            lambda: _delivery(state_dir, before, last_backlog_seq)[1] >= backlog, 180.0, 0.1
        )
        if not finished:
            raise RuntimeError(f"backlog not acknowledged within 180 s:\n{daemon.tail()}")
        drained_s = time.monotonic() - up
        drain_cpu_s = cpu_seconds(daemon.pid) - cpu_before
        server_acked_s: float | None = None
        if server_ack:
            if not await_condition(lambda: _server_ack_seq(state_dir) >= last_backlog_seq, 180.0, 0.02):
                raise RuntimeError(
                    f"the server did not acknowledge the backlog within 180 s:\n{daemon.tail()}"
                )
            server_acked_s = time.monotonic() - up
        assert broker.proc is not None
        cpu_to_done = {  # broker up -> the last PUBACK, or the server's acknowledgement when on
            "table_daemon": cpu_seconds(daemon.pid) - cpu_before,
            "mosquitto": cpu_seconds(broker.proc.pid),
            "game_server": 0.0 if game is None else cpu_seconds(game.proc.pid) - others_before[1],
            "bench_and_subscriber": time.process_time() - others_before[0],
        }
        _, _, first_ack, last_ack = _delivery(state_dir, before, last_backlog_seq)
        for started in (spy, game_spy):
            if started is not None:
                started.wait(30)
        received_all = server_ack or await_condition(
            lambda: sum(1 for r in recorder.snapshot() if r.topic.endswith("/events")) >= before + backlog,
            60.0,
        )
        checkpoint: dict[str, Any] | None = None
        if game is not None:
            game.stop()
            checkpoint = game.checkpoint_figures(_server_ack_seq(state_dir))
            checkpoint["resends_asked"] = sum(
                1 for r in recorder.snapshot() if r.topic.endswith("/cmd") and b'"resend"' in r.payload
            )
    finally:
        daemon.stop()
        notify.close()
        pty.close()
        recorder.stop()
        if game is not None:
            game.stop()
    envelopes = [env for _, env in parse_events(recorder.snapshot()) if "seq" in env and "kind" in env]
    backlog_envs = [e for e in envelopes if int(e["seq"]) > before]
    size = _median_wire_size(state_dir, tmp / "table" / "events.key", before)
    burst_s = paho_burst(broker.port, backlog, size)
    if first_ack is None or last_ack is None:
        raise RuntimeError("no delivery time recorded in the journal")
    rate_up = backlog / (last_ack - up_wall)
    rate_acks = backlog / max(1e-9, last_ack - first_ack)
    rss_mb = [r / 1e6 for _, r, _ in rss]
    growing = [r for r in rss if r[0] <= accumulate_s] or rss
    quarter = max(2, len(growing) // 4)

    def rate(window: list[tuple[float, int, int]]) -> float:
        return (window[-1][2] - window[0][2]) / max(1e-9, window[-1][0] - window[0][0])

    half = len(rss_mb) // 2
    figures: dict[str, Any] = {
        "inflight_window": inflight_window or "the daemon's default (broker.delivery.inflight_window)",
        "backlog_events": backlog,
        "delivered_before_broker_up": delivered,
        "shoes_written": shoes,
        "accumulate_s": round(accumulate_s, 1),
        "accumulate_events_per_s": round(backlog / accumulate_s),
        "accumulate_events_per_s_first_quarter": round(rate(growing[:quarter])),
        "accumulate_events_per_s_last_quarter": round(rate(growing[-quarter:])),
        "broker_up_to_last_ack_s": round(last_ack - up_wall, 2),
        "broker_up_to_first_ack_s": round(first_ack - up_wall, 2),
        "first_to_last_ack_s": round(last_ack - first_ack, 2),
        "drain_observed_s": round(drained_s, 2),
        "events_per_s_from_broker_up": round(rate_up),
        "events_per_s_first_to_last_ack": round(rate_acks),
        "baseline_bare_paho_burst_s": round(burst_s, 2),
        "baseline_bare_paho_msgs_per_s": round(backlog / burst_s),
        "ratio_drain_time_to_baseline": round((last_ack - first_ack) / burst_s, 2),
        "daemon_cpu_us_per_event_drained": round(drain_cpu_s * 1e6 / backlog, 1),
        "cpu_us_per_event_to_done": {name: round(s * 1e6 / backlog, 1) for name, s in cpu_to_done.items()},
        "subscriber": "the game server stand-in: game_server_checkpoint"
        if server_ack
        else {
            "received_all": received_all,
            "backlog_copies_received": len(backlog_envs),
            **seq_report(backlog_envs),
        },
        "daemon_rss_mb": {
            "samples": len(rss_mb),
            "at_broker_down": round(rss_mb[0], 1),
            "median_first_half": round(statistics.median(rss_mb[:half] or rss_mb), 1),
            "median_second_half": round(statistics.median(rss_mb[half:]), 1),
            "max": round(max(rss_mb), 1),
            "at_end": round(rss_mb[-1], 1),
        },
        "server_ack": server_ack,
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "target_met": rate_up >= TARGET_EVENTS_PER_S,
    }
    if server_acked_s is not None and checkpoint is not None:
        rate_server = backlog / server_acked_s
        figures["broker_up_to_server_ack_of_last_s"] = round(server_acked_s, 2)
        figures["events_per_s_to_server_ack"] = round(rate_server)
        figures["ratio_server_ack_time_to_baseline"] = round(server_acked_s / burst_s, 2)
        figures["game_server_checkpoint"] = checkpoint
        figures["server_ack_rate_at_least_5000"] = rate_server >= TARGET_EVENTS_PER_S
    if profile is not None and profile.exists():
        figures["py_spy_drain_first_4s"] = collapsed_profile(profile)
    if game_profile is not None and game_profile.exists():
        figures["py_spy_game_server_first_4s"] = collapsed_profile(game_profile)
    return figures


def chain_cost(events: int, rounds: int = 7) -> dict[str, Any]:
    """Same-run figures of the chain's cost on the drain path (see the module docstring)."""
    key = Secret(b"bench events key of the backlog table", "bench")
    with tempfile.TemporaryDirectory(prefix="bench-chain-") as tmp:
        chained_path, plain_path = Path(tmp) / "chained.sqlite3", Path(tmp) / "plain.sqlite3"
        journal = Journal(JournalSettings(path=chained_path), TABLE_ID)
        batch = [
            DeliveryEvent(
                "card_dealt",
                1_764_400_000.0 + n / 8,
                {"card": "8s", "slot": "P1", "round": 1 + n // 6, "read": {"raw": "0x1f", "frame": n}},
                shoe_id="shoe-0001",
                hand=1 + n // 6,
                source="reader",
            )
            for n in range(events)
        ]
        started = time.process_time()
        for first in range(0, events, 50):  # a card or a round at a time, as a table journals
            journal.append([], batch[first : first + 50])
        append_us = (time.process_time() - started) / events * 1e6
        journal.close()
        shutil.copyfile(chained_path, plain_path)
        with sqlite3.connect(plain_path) as db:  # the same events as a journal before the chain holds them
            db.execute("UPDATE events SET epoch = NULL, prev_hash = NULL, hash = NULL")
        journals = {
            True: Journal(JournalSettings(path=chained_path), TABLE_ID),
            False: Journal(JournalSettings(path=plain_path), TABLE_ID),
        }
        # The table's own drain work per event: read a page of pending events, build each
        # signed wire payload, mark the page delivered (the PUBACKs). CPU time of this
        # single-threaded process (on a shared, loaded machine wall time mostly measures the
        # wait for a core), the two journals alternated page by page so load shifts hit both.
        spent_by_round: dict[bool, list[float]] = {True: [], False: []}
        wire_bytes = {True: 0, False: 0}
        for _ in range(rounds):
            spent = {True: 0.0, False: 0.0}
            after = {True: 0, False: 0}
            while True:
                pages = 0
                for chained, drained in journals.items():
                    started = time.process_time()
                    page = drained.pending(after_seq=after[chained], limit=500)
                    if page:
                        size = sum(len(event_payload(event, TABLE_ID, time.time(), key)) for event in page)
                        drained.mark_delivered([event.seq for event in page])
                        after[chained] = page[-1].seq
                        pages += 1
                        wire_bytes[chained] = max(wire_bytes[chained], size // len(page))
                    spent[chained] += time.process_time() - started
                if not pages:
                    break
            for chained, drained in journals.items():
                spent_by_round[chained].append(spent[chained])
                with sqlite3.connect(chained_path if chained else plain_path) as db:  # pending again
                    db.execute("UPDATE events SET delivered_at = NULL")
                drained.close()
                journals[chained] = Journal(
                    JournalSettings(path=chained_path if chained else plain_path), TABLE_ID
                )
        for drained in journals.values():
            drained.close()
    chained_us = statistics.median(spent_by_round[True]) / events * 1e6
    plain_us = statistics.median(spent_by_round[False]) / events * 1e6
    return {
        "events": events,
        "rounds": rounds,
        "append_cpu_us_per_event_with_chain": round(append_us, 1),
        "drain_cpu_us_per_event_chained": round(chained_us, 2),
        "drain_cpu_us_per_event_without_chain": round(plain_us, 2),
        "wire_bytes_per_event_chained": wire_bytes[True],
        "wire_bytes_per_event_without_chain": wire_bytes[False],
        "ratio_chained_to_without": round(chained_us / plain_us, 3),
        "within_10_percent": chained_us <= 1.10 * plain_us,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000, help="backlog to accumulate (at least)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--inflight-window",
        type=int,
        default=None,
        help="broker.delivery.inflight_window (default: the daemon's)",
    )
    parser.add_argument(
        "--py-spy", type=Path, default=None, metavar="FILE",
        help="profile the daemon's first 4 s of draining with py-spy (collapsed stacks to FILE; the game "
        "server stand-in's to FILE with the suffix .game-server.txt)",
    )  # fmt: skip
    parser.add_argument(
        "--server-ack",
        choices=["on", "off", "both"],
        default="on",
        help="delivery.server_ack.enabled, with the reference consumer acknowledging (default on); "
        "both: a run without, then one with, and their ratio",
    )
    parser.add_argument(
        "--chain-cost",
        action="store_true",
        help="the event chain's cost on the drain path, same run (no broker)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.chain_cost:
        cost = chain_cost(args.events)
        report("the event chain's cost on the backlog drain", cost, args.json)
        return 0 if cost["within_10_percent"] else 1
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.server_ack]
    runs = [run(args.events, args.seed, args.inflight_window, args.py_spy, mode) for mode in modes]
    if len(runs) == 1:
        figures = runs[0]
    else:
        off, on = runs
        figures = {
            "puback_only": off,
            "server_ack": on,
            "ratio_puback_drain_rate_on_to_off": round(
                on["events_per_s_from_broker_up"] / off["events_per_s_from_broker_up"], 2
            ),
            "ratio_server_ack_rate_to_puback_only_rate": round(
                on["events_per_s_to_server_ack"] / off["events_per_s_from_broker_up"], 2
            ),
            "target_met": off["target_met"] and on["target_met"],
        }
    report("backlog recovery after a broker outage", figures, args.json)
    return 0 if figures["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
