"""Many tables on one broker: N daemon processes, each dealing shoes at 10x real speed.

For each N in ``--tables`` (default 1,2,4,8,16): one mosquitto; N real daemons
(``python -m daemon.cli run``), each with its own Angel Eye shoe on a pty, its own journal
and table id; one subscriber on ``baccarat/v1/+/events`` (what a game server's shared
subscription would get). Every shoe deals clean 8-deck shoes at ``--speed`` (10x: a card
every 0.1 s, 1.5 s between rounds) for ``--duration`` seconds; then delivery is awaited.

Reported per N: broker CPU% and the daemons' mean CPU% over the dealing window, card
latency (write into the pty → subscriber) median/p99/max over every table's cards, event
rate, and losses: events journaled but never received, seq gaps, duplicates. The baseline
is the N=1 run of the same invocation (ratios of p99 latency and broker CPU per table) and
a bare paho QoS 1 publish → receive measured on the same broker before the tables start.

    .venv/bin/python -m bench.bench_tables [--tables 1,2,4,8,16] [--duration 20] [--speed 10] [--json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_latency import paho_baseline
from bench.common import Summary, cpu_seconds, ms, report, rss_bytes
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
from drivers.simulate import VirtualShoe


class Table:
    """One table: a pty shoe, its config and daemon."""

    def __init__(self, root: Path, index: int, port: int, speed: float, seed: int) -> None:
        self.table_id = f"T{index:03d}"
        self.dir = root / self.table_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pty = TimedPty(self.dir.with_suffix(".pty"))
        self.config = write_config(self.dir, self.table_id, self.pty.path, port)
        self.state_dir = self.dir / "state"
        self.notify = NotifySocket(root / f"{self.table_id}.sock")
        self.daemon = DaemonProcess(self.config, self.dir / "daemon.log", notify_socket=self.notify.path)
        self.shoe = VirtualShoe(shoe_stream(3, seed + 17 * index).steps, self.pty, speed=speed)

    def close(self) -> None:
        self.shoe.stop()
        self.daemon.stop()
        self.notify.close()
        self.pty.close()


def run_n(root: Path, broker: Broker, n: int, duration: float, speed: float, seed: int) -> dict[str, Any]:
    recorder = EventRecorder(broker.port).start()
    tables = [Table(root / f"n{n}", i + 1, broker.port, speed, seed) for i in range(n)]
    try:
        for t in tables:
            if t.notify.wait_ready(60.0) is None:
                raise RuntimeError(f"{t.table_id}: no READY:\n{t.daemon.tail()}")
        time.sleep(1.0)  # every publisher connects
        broker_cpu0 = cpu_seconds(broker.pid)
        daemons_cpu0 = sum(cpu_seconds(t.daemon.pid) for t in tables)
        started = time.monotonic()
        for t in tables:
            t.shoe.start()
        time.sleep(duration)
        for t in tables:
            t.shoe.stop()
        wall = time.monotonic() - started
        broker_cpu = cpu_seconds(broker.pid) - broker_cpu0
        daemons_cpu = sum(cpu_seconds(t.daemon.pid) for t in tables) - daemons_cpu0
        rss = [rss_bytes(t.daemon.pid) / 1e6 for t in tables]
        expected = {t.table_id: journal_last_seq(t.state_dir) for t in tables}

        def all_in() -> bool:
            seen: dict[str, int] = {}
            for r in recorder.snapshot():
                table = r.topic.split("/")[2]
                seen[table] = seen.get(table, 0) + 1
            return all(seen.get(k, 0) >= v for k, v in expected.items())

        await_condition(all_in, 30.0, 0.2)
        time.sleep(0.5)
    finally:
        for t in tables:
            t.close()
        recorder.stop()
    envelopes = parse_events(recorder.snapshot())
    order = seq_report([env for _, env in envelopes])
    received: dict[str, set[int]] = {}
    for _, env in envelopes:
        received.setdefault(env["table_id"], set()).add(int(env["seq"]))
    lost = sum(len(set(range(1, last + 1)) - received.get(tid, set())) for tid, last in expected.items())
    latency: list[float] = []
    for t in tables:
        cards = [
            (at, env)
            for at, env in envelopes
            if env["table_id"] == t.table_id and env["kind"] == "card_dealt"
        ]
        cards.sort(key=lambda c: int(c[1]["seq"]))
        for (written_at, frame), (received_at, env) in zip(t.pty.card_writes, cards, strict=False):
            if env["data"]["read"]["raw"] != frame.hex(" "):
                raise RuntimeError(f"{t.table_id}: card seq {env['seq']} does not match the frame written")
            latency.append(received_at - written_at)
    events = sum(expected.values())
    return {
        "tables": n,
        "dealing_s": round(wall, 1),
        "events_journaled": events,
        "events_per_s_all_tables": round(events / wall, 1),
        "cards_measured": len(latency),
        "latency": ms(latency),
        "broker_cpu_pct": round(100 * broker_cpu / wall, 2),
        "daemon_cpu_pct_mean": round(100 * daemons_cpu / wall / n, 2),
        "daemon_rss_mb_max": round(max(rss), 1),
        "lost_events": lost,
        "seq_gaps": order["gaps"],
        "duplicates": order["duplicates"],
        "out_of_order": order["out_of_order"],
    }


def broker_cost(broker: Broker, count: int = 10_000, size: int = 600) -> float:
    """mosquitto CPU microseconds per QoS 1 message (published by one client, delivered to one
    QoS 1 subscriber), from a burst: the unit cost to scale a floor's message rate by."""
    from bench.bench_backlog import paho_burst

    recorder = EventRecorder(broker.port, topics=("bench/burst",)).start()
    try:
        cpu0 = cpu_seconds(broker.pid)
        paho_burst(broker.port, count, size)
        await_condition(lambda: recorder.count() >= count, 30.0)
        return 1e6 * (cpu_seconds(broker.pid) - cpu0) / count
    finally:
        recorder.stop()


def run(counts: list[int], duration: float, speed: float, seed: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-tables-") as tmp_name:
        root = Path(tmp_name)
        with Broker(root / "broker") as broker:
            base = ms(paho_baseline(broker.port, 300, 600, gap_s=0.01))
            unit = broker_cost(broker)
            for n in counts:
                rows.append(run_n(root, broker, n, duration, speed, seed))
    first_p99 = rows[0]["latency"].p99
    first_broker_per_table = rows[0]["broker_cpu_pct"] / rows[0]["tables"]
    out: dict[str, Any] = {
        "speed": speed,
        "duration_s": duration,
        "baseline_paho_qos1_publish_receive": base.text(),
        "broker_cpu_us_per_qos1_message_in_and_out": round(unit, 1),
    }
    for row in rows:
        lat: Summary = row.pop("latency")
        row["latency_ms"] = lat.text()
        row["latency_p99_ratio_to_first"] = round(lat.p99 / first_p99, 2)
        per_table = row["broker_cpu_pct"] / row["tables"]
        row["broker_cpu_pct_per_table"] = round(per_table, 3)
        row["broker_cpu_per_table_ratio_to_first"] = (
            round(per_table / first_broker_per_table, 2)
            if first_broker_per_table > 0
            else "n/a (N=1 below 0.01 s)"
        )
        out[f"N={row['tables']}"] = {k: v for k, v in row.items() if k != "tables"}
    out["loss_free"] = all(r["lost_events"] == 0 and r["seq_gaps"] == 0 for r in rows)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", default="1,2,4,8,16", help="comma-separated table counts")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of dealing per table count")
    parser.add_argument("--speed", type=float, default=10.0, help="times a real dealer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.tables.split(",") if x.strip()]
    figures = run(counts, args.duration, args.speed, args.seed)
    report("many tables on one broker", figures, args.json)
    return 0 if figures["loss_free"] else 1


if __name__ == "__main__":
    sys.exit(main())
