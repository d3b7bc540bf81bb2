"""A floor of N tables on one mosquitto, from one process, against the reference consumer.

The load generator speaks the real contract: one MQTT 5 connection per table (client id
``edge-<table>``, Last Will ``offline``), retained ``status`` at connect, retained ``health``
every 10 s, and at ``--rate`` cards per second per table (default 1, phases staggered) the
events of a real round (``round_opened``, ``bets_offered``, ``card_dealt`` x4,
``verdict_checked``, ``round_completed``: 2 events per card) signed with the table's key as
the daemon signs them (``daemon.mqtt.envelope.event_payload``), QoS 1, plus the retained
``state`` after each round. All N connections are driven by one thread (a selector over
the paho sockets), so the generator is one process whatever N.

The consumer is a separate process in the consumer group's shape (daemon/fleet/shards.py:
one shard, one MQTT 5 shared subscription per table, persistent session, QoS 1) with the
reference consumer (daemon/mqtt/consumer.py: signature verified with each table's key,
dedup by event_id, seq gaps) per table; not the durable checkpoint and acknowledgements of
issue #13. It timestamps every new event on arrival.

For each N in ``--tables`` (default 50,500; the first is the baseline of the ratios):
  * paced phase (``--duration`` s at table rate): broker CPU per message and per event
    (``/proc/<pid>/stat`` of mosquitto over the window), broker CPU share, end-to-end latency
    (generator's ``published_at`` -> consumer arrival, same host clock) median/p99/max,
    the generator's and the consumer's CPU share;
  * burst phase (``--burst`` events per table back to back): consumer throughput (events/s
    from the first to the last arrival) and broker CPU per event at full speed;
  * loss: every event sent must arrive at the consumer exactly once, in seq order, with a
    verified signature (new events, duplicates, rejected, gaps, out-of-order per run).
Tables per broker core = N / (broker CPU share in the paced phase).

    .venv/bin/python -m bench.bench_fleet_scale [--tables 50,500] [--duration 60] [--rate 1] [--json]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import cpu_seconds, ms, report
from daemon.fleet.collect import collect
from daemon.mqtt.client_options import ClientOptions
from daemon.mqtt.secrets import Secret
from tests.fleet.synthetic import SyntheticTable
from tests.support.broker import MosquittoBroker

HEALTH_EVERY_S = 10.0


def table_ids(count: int) -> list[str]:
    return [f"T{n:04d}" for n in range(count)]


def table_key(table_id: str) -> Secret:
    return Secret(f"bench-events-key-{table_id}".encode(), "bench")


class Floor:
    """N tables, one MQTT 5 connection each, all driven by this thread."""

    def __init__(self, port: int, count: int) -> None:
        self.tables = [
            SyntheticTable(t, key=table_key(t), last_read_at=time.time()) for t in table_ids(count)
        ]
        self.clients: list[mqtt.Client] = []
        self.selector = selectors.DefaultSelector()
        self.acked = 0
        self.sent = 0
        self.events = 0
        self.cards = 0
        self.dirty: set[mqtt.Client] = set()
        for table in self.tables:
            client = mqtt.Client(
                CallbackAPIVersion.VERSION2, client_id=f"edge-{table.table_id}", protocol=mqtt.MQTTv5
            )
            client.max_inflight_messages_set(116)
            client.max_queued_messages_set(0)
            offline = SyntheticTable(table.table_id, key=table.key, online=False)
            client.will_set(
                f"baccarat/v1/{table.table_id}/status", offline.status(time.time()), qos=1, retain=True
            )
            client.on_publish = self._on_publish
            client.connect("127.0.0.1", port, keepalive=30)
            sock = client.socket()
            assert sock is not None
            self.selector.register(sock, selectors.EVENT_READ, client)
            self.clients.append(client)
        self.pump_until(lambda: all(c.is_connected() for c in self.clients), 60)
        now = time.time()
        for table, client in zip(self.tables, self.clients, strict=True):
            self.publish(client, f"baccarat/v1/{table.table_id}/status", table.status(now), True)
            self.publish(client, f"baccarat/v1/{table.table_id}/health", table.health(now), True)
            self.publish(client, f"baccarat/v1/{table.table_id}/state", table.state(now), True)

    def _on_publish(self, *_args: object) -> None:
        self.acked += 1

    def publish(self, client: mqtt.Client, topic: str, payload: bytes, retain: bool) -> None:
        client.publish(topic, payload, qos=1, retain=retain)
        self.dirty.add(client)
        self.sent += 1
        if topic.endswith("/events"):
            self.events += 1

    def pump(self, timeout: float) -> None:
        """One pass: read what arrived, write what is queued, keepalive."""
        for key, _mask in self.selector.select(timeout):
            client: mqtt.Client = key.data
            client.loop_read(1000)
        # paho writes at publish() when it can; finish what a full socket buffer left
        dirty, self.dirty = self.dirty, set()
        for client in dirty:
            if client.want_write():
                client.loop_write()
                self.dirty.add(client)

    def pump_until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit("bench: the broker did not keep up (timed out waiting for acknowledgements)")
            self.pump(0.01)
            for client in self.clients:
                client.loop_misc()

    def run_paced(self, duration: float, rate: float) -> None:
        """Deal at ``rate`` cards/s per table for ``duration`` seconds, phases staggered."""
        period = 1.0 / rate
        start = time.monotonic()
        count = len(self.tables)
        # (due, kind, table index): kind 0 = a card, 1 = a health report
        due = [(start + period * n / count, 0, n) for n in range(count)]
        due += [(start + HEALTH_EVERY_S * n / count, 1, n) for n in range(count)]
        heapq.heapify(due)
        next_misc = start
        while (now := time.monotonic()) < start + duration:
            wall = time.time()
            while due and due[0][0] <= now:
                at, kind, i = heapq.heappop(due)
                table, client = self.tables[i], self.clients[i]
                if kind == 0:
                    table.last_read_at = wall
                    self.cards += 1
                    for topic, payload, retain in table.deal_card(wall):
                        self.publish(client, topic, payload, retain)
                    heapq.heappush(due, (at + period, 0, i))
                else:
                    self.publish(client, f"baccarat/v1/{table.table_id}/health", table.health(wall), True)
                    heapq.heappush(due, (at + HEALTH_EVERY_S, 1, i))
            if now >= next_misc:
                next_misc = now + 1.0
                for client in self.clients:
                    client.loop_misc()
            self.pump(max(0.0, min(0.01, due[0][0] - time.monotonic())))
        self.pump_until(lambda: self.acked >= self.sent, 120)

    def run_burst(self, per_table: int) -> None:
        """``per_table`` cards per table back to back (every table at once)."""
        for _ in range(per_table):
            wall = time.time()
            for table, client in zip(self.tables, self.clients, strict=True):
                self.cards += 1
                for topic, payload, retain in table.deal_card(wall):
                    self.publish(client, topic, payload, retain)
            self.pump(0)
        self.pump_until(lambda: self.acked >= self.sent, 300)

    def close(self) -> None:
        for client in self.clients:
            client.disconnect()
            client.loop_write()
        self.selector.close()


# ---------------------------------------------------------------- consumer process


class BenchConsumer:
    """The consumer group's shape (``daemon/fleet/shards.py``: one MQTT 5 shared subscription
    per table of the shard, persistent session, QoS 1) feeding the verify/dedup/gap reference
    consumer (:class:`~daemon.mqtt.consumer.EventConsumer`) per table. Without the durable
    checkpoint and acknowledgements of issue #13 (``ShardConsumer``): their SQLite commits and
    ack messages are not in these figures."""

    def __init__(self, port: int, tables: list[str], on_event: Any) -> None:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        from daemon.fleet.shards import shard_filters
        from daemon.mqtt.consumer import EventConsumer

        self.filters = shard_filters(tables, 0, 1)
        self.consumers = {t: EventConsumer(t, key=table_key(t), require_signature=True) for t in tables}
        self.on_event = on_event
        self.subscribed = threading.Event()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="bench-consumer", protocol=mqtt.MQTTv5
        )
        self.client.max_inflight_messages_set(100)
        self.client.on_connect = lambda c, *_: c.subscribe([(f, 1) for f in self.filters])
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        self.client.connect("127.0.0.1", port, keepalive=15, clean_start=False, properties=props)
        self.client.loop_start()

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        table = message.topic.split("/")[2]
        consumer = self.consumers.get(table)
        if consumer is not None:
            self.on_event(table, consumer.feed(bytes(message.payload)))

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def consume(port: int, count: int, out: Path) -> None:
    """The consumer process: collect until SIGTERM, then write the figures to ``out``."""
    from daemon.mqtt.consumer import Received, Verdict

    tables = table_ids(count)
    arrivals: list[tuple[float, float]] = []  # (arrival, published_at)
    seqs: dict[str, list[int]] = {}
    problems: list[str] = []

    def on_event(table: str, result: Received) -> None:
        arrived = time.time()
        if result.verdict is Verdict.NEW and result.envelope is not None:
            arrivals.append((arrived, result.envelope["published_at"]))
            seqs.setdefault(table, []).append(result.envelope["seq"])
        elif len(problems) < 20:
            problems.append(f"{table}: {result.verdict.value} {result.reason}")

    consumer = BenchConsumer(port, tables, on_event)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    consumer.subscribed.wait(60)
    Path(str(out) + ".ready").write_text("1")
    progress = Path(str(out) + ".progress")
    while not stop[0]:
        time.sleep(0.25)
        progress.write_text(str(len(arrivals)))
    consumer.stop()
    stats = [c.stats for c in consumer.consumers.values()]
    document = {
        "arrivals": arrivals,
        "highest": {t: c.highest_seq for t, c in consumer.consumers.items()},
        "in_order": all(s == sorted(s) for s in seqs.values()),
        "new": sum(s.new for s in stats),
        "duplicates": sum(s.duplicates for s in stats),
        "rejected": sum(s.rejected for s in stats),
        "conflicts": sum(s.conflicts for s in stats),
        "out_of_order": sum(s.out_of_order for s in stats),
        "gaps": sum(len(c.unexplained_gaps) for c in consumer.consumers.values()),
        "problems": problems,
    }
    out.write_text(json.dumps(document))


# ---------------------------------------------------------------- one run


def wait_for_consumer(out: Path, expected: int, stall_s: float = 60.0) -> float | None:
    """Seconds until the consumer counted ``expected`` new events; None if it stalled."""
    progress = Path(str(out) + ".progress")
    started = last_change = time.monotonic()
    seen = -1
    while time.monotonic() - last_change < stall_s:
        try:
            count = int(progress.read_text() or "0")
        except (OSError, ValueError):
            count = 0
        if count >= expected:
            return round(time.monotonic() - started, 2)
        if count != seen:
            seen, last_change = count, time.monotonic()
        time.sleep(0.25)
    return None


def window(arrivals: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    return [a for a in arrivals if start <= a[1] < end]


def run(count: int, duration: float, rate: float, burst: int, workdir: Path) -> dict[str, Any]:
    broker = MosquittoBroker(
        workdir / f"broker-{count}",
        extra_config="max_queued_messages 3000000\nmax_inflight_messages 100\nlog_type none",
    )
    broker.start()
    out = workdir / f"consumer-{count}.json"
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.bench_fleet_scale",
            "--consume",
            str(broker.port),
            str(count),
            str(out),
        ],
    )
    try:
        deadline = time.monotonic() + 60
        while not Path(str(out) + ".ready").exists():
            if time.monotonic() > deadline or consumer.poll() is not None:
                raise SystemExit("bench: the consumer did not start")
            time.sleep(0.05)
        connect_start = time.monotonic()
        floor = Floor(broker.port, count)
        connect_s = time.monotonic() - connect_start
        floor.pump_until(lambda: floor.acked >= floor.sent, 60)
        time.sleep(1.0)
        me = os.getpid()
        b0, g0, c0, w0, s0, e0, k0 = (
            cpu_seconds(broker.pid),
            cpu_seconds(me),
            cpu_seconds(consumer.pid),
            time.monotonic(),
            floor.sent,
            floor.events,
            floor.cards,
        )
        paced_from = time.time()
        floor.run_paced(duration, rate)
        paced_to = time.time()
        b1, g1, c1, w1, s1, e1, k1 = (
            cpu_seconds(broker.pid),
            cpu_seconds(me),
            cpu_seconds(consumer.pid),
            time.monotonic(),
            floor.sent,
            floor.events,
            floor.cards,
        )
        drained_s = wait_for_consumer(out, floor.events)
        c2 = cpu_seconds(consumer.pid)  # the paced events (and nothing else) processed by now
        burst_from = time.time()
        bb0, e2 = cpu_seconds(broker.pid), floor.events
        floor.run_burst(burst)
        bb1, e3 = cpu_seconds(broker.pid), floor.events
        burst_drained_s = wait_for_consumer(out, floor.events)
        got_fleet = collect(
            ClientOptions(
                host="127.0.0.1",
                port=broker.port,
                tls=None,
                username=None,
                password=None,
                mqtt5=True,
                table="",
                events_key=None,
            )
        )
        fleet_s = got_fleet.seconds
        fleet_tables = len(got_fleet.fleet)
        total_events = floor.events
        highest_sent = {t.table_id: t.seq for t in floor.tables}
        floor.close()
    finally:
        consumer.send_signal(signal.SIGTERM)
        consumer.wait(120)
        broker.stop()
    got = json.loads(out.read_text())
    arrivals = [tuple(a) for a in got["arrivals"]]
    paced = window(arrivals, paced_from, paced_to)
    burst_arrivals = [a for a in arrivals if a[1] >= burst_from]
    burst_span = (
        max(a[0] for a in burst_arrivals) - min(a[1] for a in burst_arrivals) if burst_arrivals else 0
    )
    wall = w1 - w0
    broker_share = (b1 - b0) / wall
    lost = sum(max(0, highest_sent[t] - got["highest"].get(t, 0)) for t in highest_sent)
    return {
        "tables": count,
        "connect_s": round(connect_s, 2),
        "paced_wall_s": round(wall, 1),
        "paced_messages_in": s1 - s0,
        "paced_events": e1 - e0,
        "paced_msgs_per_s": round((s1 - s0) / wall, 1),
        "broker_cpu_share": round(broker_share, 4),
        "broker_cpu_us_per_message_in": round(1e6 * (b1 - b0) / max(1, s1 - s0), 1),
        "broker_cpu_us_per_event": round(1e6 * (b1 - b0) / max(1, e1 - e0), 1),
        "paced_cards": k1 - k0,
        "paced_cards_per_table_s": round((k1 - k0) / count / wall, 3),
        "broker_cpu_us_per_card": round(1e6 * (b1 - b0) / max(1, k1 - k0), 1),
        "tables_per_broker_core": round(1 / ((b1 - b0) / max(1, k1 - k0) * rate)) if b1 > b0 else None,
        "consumer_drained_after_paced_s": drained_s,
        "consumer_drained_after_burst_s": burst_drained_s,
        "fleet_view_collect_s": round(fleet_s, 2),
        "fleet_view_tables": fleet_tables,
        "generator_cpu_share": round((g1 - g0) / wall, 3),
        "consumer_cpu_share": round((c1 - c0) / wall, 3),
        "consumer_cpu_us_per_event": round(1e6 * (c2 - c0) / max(1, e1 - e0), 1),
        "generator_cpu_us_per_card": round(1e6 * (g1 - g0) / max(1, k1 - k0), 1),
        "latency_paced": ms([arr - pub for arr, pub in paced]).as_dict(2),
        "burst_events": e3 - e2,
        "burst_consumer_events_per_s": round(len(burst_arrivals) / burst_span) if burst_span else None,
        "burst_broker_cpu_us_per_event": round(1e6 * (bb1 - bb0) / max(1, e3 - e2), 1),
        "latency_burst": ms([arr - pub for arr, pub in burst_arrivals]).as_dict(1),
        "events_sent": total_events,
        "events_received_new": got["new"],
        "lost": lost,
        "duplicates": got["duplicates"],
        "rejected": got["rejected"],
        "conflicts": got["conflicts"],
        "gaps": got["gaps"],
        "out_of_order": got["out_of_order"],
        "in_order": got["in_order"],
        "problems": got["problems"][:5],
    }


def _ratio(value: float, baseline: float) -> float | None:
    return round(value / baseline, 2) if baseline else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", default="50,500", help="comma-separated table counts (first = baseline)")
    parser.add_argument("--duration", type=float, default=60.0, help="paced phase, seconds")
    parser.add_argument("--rate", type=float, default=1.0, help="cards per second per table")
    parser.add_argument("--burst", type=int, default=20, help="cards per table in the burst phase")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--consume", nargs=3, metavar=("PORT", "TABLES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.consume:
        consume(int(args.consume[0]), int(args.consume[1]), Path(args.consume[2]))
        return 0
    counts = [int(n) for n in args.tables.split(",")]
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        for count in counts:
            runs[str(count)] = run(count, args.duration, args.rate, args.burst, Path(tmp))
    base = runs[str(counts[0])]
    ratios = {
        f"{n} vs {counts[0]}": {
            "broker_cpu_per_event": _ratio(r["broker_cpu_us_per_event"], base["broker_cpu_us_per_event"]),
            "p99_latency": _ratio(r["latency_paced"]["p99"], base["latency_paced"]["p99"]),
        }
        for n, r in runs.items()
        if n != str(counts[0])
    }
    report(
        "fleet scale: N tables -> one mosquitto -> reference consumer",
        {"runs": runs, "ratios": ratios},
        args.json,
    )
    lost = sum(r["lost"] + r["gaps"] + r["rejected"] for r in runs.values())
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
