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
subscriber is the reference consumer (:class:`daemon.mqtt.ordered_consumer.OrderedConsumer`
behind :class:`daemon.mqtt.consumer_client.ConsumerClient`, persistent session, SQLite
checkpoint, signed acknowledgement every 0.2 s) and the table waits for it: also measured,
broker up → the server's acknowledgement of the last backlog event (read from the journal's
meta), and the consumer's checkpoint checked for every event once, in order.

Baseline in the same run: bare paho publishing the same number of same-sized QoS 1 messages
as fast as it can to the same broker, time to the last PUBACK. Target: at least 5,000 events/s
(to the last PUBACK, and with the server acknowledgement on, to the server's acknowledgement).

    .venv/bin/python -m bench.bench_backlog [--events 20000] [--inflight-window N]
        [--server-ack on|off|both] [--py-spy FILE] [--json]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import collapsed_profile, pyspy_start, report, rss_bytes
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
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer_client import ConsumerClient
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.secrets import SigningKeySource
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


def _server_ack_seq(state_dir: Path) -> int:
    """The seq the game server acknowledged, from the journal's meta (read-only)."""
    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True, timeout=5.0)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'server_ack_seq'").fetchone()
        return 0 if row is None else int(row[0])
    finally:
        db.close()


def _game_server(table_dir: Path, port: int) -> tuple[ConsumerClient, OrderedConsumer]:
    """The reference consumer, acknowledging with the table's legacy command key (it holds the
    game_server role; bench/rig.py configures no keyring)."""
    consumer = OrderedConsumer(
        TABLE_ID,
        Checkpoint(table_dir / "game-server-checkpoint.sqlite3", TABLE_ID),
        SigningKeySource(file=table_dir / "events.key").load(),
    )
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-game-server", protocol=mqtt.MQTTv5)
    runner = ConsumerClient(client, consumer, None, SigningKeySource(file=table_dir / "command.key").load())
    runner.connect("127.0.0.1", port)
    if not runner.subscribed.wait(10):
        raise RuntimeError("the game server stand-in did not subscribe")
    return runner, consumer


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
        broker.port, persistent=True, topics=("baccarat/v1/+/events", "baccarat/v1/+/status")
    ).start()
    pty = TimedPty(tmp / "shoe")
    delivery: dict[str, Any] = {} if inflight_window is None else {"inflight_window": inflight_window}
    delivery["server_ack"] = {"enabled": server_ack}
    config = write_config(tmp / "table", TABLE_ID, pty.path, broker.port, delivery=delivery)
    game: tuple[ConsumerClient, OrderedConsumer] | None = None
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
            game = _game_server(tmp / "table", broker.port)
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
        broker.start()
        up_wall = time.time()
        up = time.monotonic()
        finished = await_condition(
            lambda: _delivery(state_dir, before, last_backlog_seq)[1] >= backlog, 180.0, 0.1
        )
        if not finished:
            raise RuntimeError(f"backlog not acknowledged within 180 s:\n{daemon.tail()}")
        drained_s = time.monotonic() - up
        server_acked_s: float | None = None
        if server_ack:
            if not await_condition(lambda: _server_ack_seq(state_dir) >= last_backlog_seq, 180.0, 0.02):
                raise RuntimeError(
                    f"the server did not acknowledge the backlog within 180 s:\n{daemon.tail()}"
                )
            server_acked_s = time.monotonic() - up
        _, _, first_ack, last_ack = _delivery(state_dir, before, last_backlog_seq)
        if spy is not None:
            spy.wait(30)
        received_all = await_condition(
            lambda: sum(1 for r in recorder.snapshot() if r.topic.endswith("/events")) >= before + backlog,
            60.0,
        )
        checkpoint: dict[str, Any] | None = None
        if game is not None:
            runner, consumer = game
            with runner.lock:
                seqs = [seq for seq, _ in consumer.checkpoint.processed_seqs()]
            checkpoint = {
                "server_acknowledged_seq": _server_ack_seq(state_dir),
                "processed": len(seqs),
                "once_in_seq_order": seqs == list(range(1, len(seqs) + 1)),
                "duplicates_dropped": consumer.stats.duplicates,
                "conflicts": consumer.stats.conflicts,
                "resends_asked": len(runner.resends_asked),
            }
    finally:
        daemon.stop()
        notify.close()
        pty.close()
        recorder.stop()
        if game is not None:
            game[0].stop()
            game[1].checkpoint.close()
    envelopes = [env for _, env in parse_events(recorder.snapshot()) if "seq" in env and "kind" in env]
    backlog_envs = [e for e in envelopes if int(e["seq"]) > before]
    sizes = [len(r.payload) for r in recorder.snapshot() if r.topic.endswith("/events")]
    size = int(statistics.median(sizes))
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
        "subscriber": {
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
        figures["target_met"] = rate_up >= TARGET_EVENTS_PER_S and rate_server >= TARGET_EVENTS_PER_S
    if profile is not None and profile.exists():
        figures["py_spy_drain_first_4s"] = collapsed_profile(profile)
    return figures


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
        help="profile the daemon's first 4 s of draining with py-spy (collapsed stacks to FILE)",
    )  # fmt: skip
    parser.add_argument(
        "--server-ack",
        choices=["on", "off", "both"],
        default="on",
        help="delivery.server_ack.enabled, with the reference consumer acknowledging (default on); "
        "both: a run without, then one with, and their ratio",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
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
