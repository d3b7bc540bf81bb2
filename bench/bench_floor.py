"""A floor past one broker: sites bridged to a central broker, simulated tables, the
consumer group as ``baccarat-edge consume`` processes, a member killed and the central
broker restarted during the run.

* Brokers: ``--sites`` site mosquittos (the ``site.conf`` blocks marked *tested*: MQTT 5
  bridge, QoS 1, persistent session) bridged to one central mosquitto (``central.conf``'s
  tested block), plain TCP on loopback, persistence on.
* Tables: ``--tables`` simulated tables spread over the sites (one MQTT 5 connection per
  site carries its tables). Each deals ``--rate`` cards per second (the events of a real
  round, 2 per card, signed as the daemon signs them; a retained ``state`` per round) and
  behaves as a table with the game server's acknowledgement on: it keeps every event until
  an ``ack`` names its seq (or a later one) and publishes again what a ``resend`` command
  asks for (the command's signature is not checked here; the tables' own code does that).
* Consumers: ``--shards`` processes of ``baccarat-edge consume --shard K/N --output FILE``
  on the central broker (checkpoints, signed acknowledgements, resends).
* Faults: at 1/3 of ``--duration`` shard 1's member is SIGKILLed and started again 2 s
  later; at 2/3 the central broker is restarted (stopped, 2 s away, started).

Figures: events/s acknowledged by the group (over 5 s windows: the median in the steady
phase before the kill, and the peak, while catching up), the catch-up time after the central
restart (until every table is acknowledged up to what it had dealt when the central came
back), the drain time after dealing stops, and at the end, from the output files: events
lost, events repeated, tables out of ``seq`` order (all must be 0). Load average and CPU
seconds of each part are printed: the machine is shared.

    nice -n 10 .venv/bin/python -m bench.bench_floor [--sites 5] [--tables 500] [--shards 3]
        [--duration 90] [--rate 0.25] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

from bench.common import cpu_seconds, report
from daemon.mqtt.secrets import Secret
from tests.fleet.bridged import central_config, site_config
from tests.fleet.synthetic import SyntheticTable
from tests.support.broker import MosquittoBroker
from tests.support.secrets import write_secret

GS_KEY = "bench game server key, long enough\n"
RATE_WINDOW = 5
"""Acknowledgement rates are taken over windows of this many 1 s samples (the flow is bursty)."""


def table_key(table_id: str) -> str:
    return f"bench-events-key-of-{table_id}"


class Site:
    """The simulated tables of one site on one connection to its site broker."""

    def __init__(self, name: str, port: int, tables: list[str]) -> None:
        self.name = name
        self.tables = {t: SyntheticTable(t, key=Secret(table_key(t).encode(), "bench")) for t in tables}
        self.held: dict[str, dict[int, bytes]] = {t: {} for t in tables}
        self.acked = dict.fromkeys(tables, 0)
        self.resent = 0
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"bench-{name}", protocol=mqtt.MQTTv5
        )
        self.client.max_inflight_messages_set(1000)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, _r: object, _p: object) -> None:
        client.subscribe([("baccarat/v1/+/cmd", 1), ("baccarat/v1/+/ack", 1)])

    def _on_message(self, client: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        table, kind = message.topic.split("/")[2:4]
        if table not in self.tables:
            return
        body = json.loads(message.payload)
        with self.lock:
            if kind == "ack":
                seq = int(body["seq"])
                self.acked[table] = max(self.acked[table], seq)
                for held in [s for s in self.held[table] if s <= seq]:
                    del self.held[table][held]
                return
            if body.get("action") != "resend":
                return
            first, last = body["args"]["from_seq"], body["args"]["to_seq"]
            again = [(s, p) for s, p in sorted(self.held[table].items()) if first <= s <= last]
            self.resent += len(again)
        for _, payload in again:
            client.publish(f"baccarat/v1/{table}/events", payload, qos=1)

    def deal(self, table: str, now: float) -> None:
        with self.lock:
            sim = self.tables[table]
            out = sim.deal_card(now)
            events = [p for t, p, _ in out if t.endswith("/events")]
            first = sim.seq - len(events) + 1
            for offset, payload in enumerate(events):
                self.held[table][first + offset] = payload
        for topic, payload, retain in out:
            self.client.publish(topic, payload, qos=1, retain=retain)

    def final_state(self, now: float) -> None:
        for table, sim in self.tables.items():
            self.client.publish(f"baccarat/v1/{table}/state", sim.state(now), qos=1, retain=True)

    def dealt(self) -> dict[str, int]:
        with self.lock:
            return {t: s.seq for t, s in self.tables.items()}

    def acknowledged(self) -> dict[str, int]:
        with self.lock:
            return dict(self.acked)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def start_member(workdir: Path, port: int, shard: int, shards: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "daemon.cli", "consume", "--broker", f"mqtt://127.0.0.1:{port}"]
    command += ["--shard", f"{shard}/{shards}", "--tables", str(workdir / "tables.txt")]
    command += ["--events-keys", str(workdir / "keys"), "--key-id", "gs-1"]
    command += ["--command-key-file", str(workdir / "gs.key")]
    command += [
        "--checkpoint-dir",
        str(workdir / f"shard-{shard}"),
        "--output",
        str(workdir / f"out-{shard}.jsonl"),
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if b"consume: shard" not in line:
        raise SystemExit(f"member {shard} did not start: {line.decode()}")
    return proc


def stop_member(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return err.decode()


def verify(workdir: Path, shards: int, dealt: dict[str, int]) -> dict[str, int]:
    """Lost, repeated and out-of-order counts from the output files."""
    seqs: dict[str, list[int]] = {}
    for shard in range(shards):
        path = workdir / f"out-{shard}.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                event = json.loads(line)
                seqs.setdefault(event["table_id"], []).append(event["seq"])
    lost = repeated = out_of_order = 0
    for table, last in dealt.items():
        got = seqs.get(table, [])
        lost += len(set(range(1, last + 1)) - set(got))
        repeated += len(got) - len(set(got))
        out_of_order += got != sorted(got)
    return {"events_lost": lost, "events_repeated": repeated, "tables_out_of_order": out_of_order}


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    tables = [f"S{n % args.sites}T{n:04d}" for n in range(args.tables)]
    (workdir / "tables.txt").write_text("\n".join(tables) + "\n")
    (workdir / "keys").mkdir()
    for table in tables:
        write_secret(workdir / "keys" / f"{table}.key", table_key(table) + "\n")
    write_secret(workdir / "gs.key", GS_KEY)
    central = MosquittoBroker(workdir / "central", persistent=True, extra_config=central_config()).start()
    site_brokers = [
        MosquittoBroker(
            workdir / f"site-{s}", persistent=True, extra_config=site_config(f"site-{s}", central.port)
        ).start()
        for s in range(args.sites)
    ]
    members = [start_member(workdir, central.port, k, args.shards) for k in range(args.shards)]
    sites = [
        Site(f"site-{s}", site_brokers[s].port, [t for t in tables if t.startswith(f"S{s}T")])
        for s in range(args.sites)
    ]
    cpu_members = 0.0
    samples: list[tuple[float, int]] = []
    load_start = os.getloadavg()
    started = time.monotonic()
    kill_at, restart_at, end_at = (started + args.duration * f for f in (1 / 3, 2 / 3, 1))
    next_card = {t: started + (n % 100) / 100 / args.rate for n, t in enumerate(tables)}
    site_of = {t: sites[n % args.sites] for n, t in enumerate(tables)}
    killed = central_restarted = False
    member_back_at: float | None = None
    central_back_at: float | None = None
    cpu_central = 0.0
    catch_up_target: dict[str, int] | None = None
    catch_up: dict[str, float] = {}
    steady: tuple[float, float] = (started + 5, kill_at)

    def acknowledged() -> dict[str, int]:
        out: dict[str, int] = {}
        for site in sites:
            out.update(site.acknowledged())
        return out

    def dealt() -> dict[str, int]:
        out: dict[str, int] = {}
        for site in sites:
            out.update(site.dealt())
        return out

    last_sample = started
    while (now := time.monotonic()) < end_at:
        for table, due in next_card.items():
            if due <= now:
                site_of[table].deal(table, time.time())
                next_card[table] = due + 1 / args.rate
        if now - last_sample >= 1.0:
            last_sample = now
            samples.append((now, sum(acknowledged().values())))
        if not killed and now >= kill_at:
            killed = True
            cpu_members += cpu_seconds(members[1].pid)
            members[1].send_signal(signal.SIGKILL)
            members[1].wait(30)
            members[1].stderr.close()  # type: ignore[union-attr]
            member_back_at = now + 2.0
        if member_back_at is not None and now >= member_back_at:
            member_back_at = None
            members[1] = start_member(workdir, central.port, 1, args.shards)
        if not central_restarted and now >= restart_at:
            central_restarted = True
            cpu_central += cpu_seconds(central.pid)
            central.stop()
            central_back_at = now + 2.0
        if central_back_at is not None and now >= central_back_at:
            central_back_at = None
            central.start()
            catch_up_target = dealt()
            catch_up["restarted"] = time.monotonic()
        if catch_up_target is not None and "seconds" not in catch_up:
            acked = acknowledged()
            if all(acked[t] >= s for t, s in catch_up_target.items()):
                catch_up["seconds"] = time.monotonic() - catch_up["restarted"]
        time.sleep(0.05)
    for site in sites:
        site.final_state(time.time())
    final = dealt()
    dealing_ended = time.monotonic()
    while time.monotonic() - dealing_ended < 300:
        acked = acknowledged()
        now = time.monotonic()
        if now - last_sample >= 1.0:
            last_sample = now
            samples.append((now, sum(acked.values())))
        if (
            catch_up_target is not None
            and "seconds" not in catch_up
            and all(acked[t] >= s for t, s in catch_up_target.items())
        ):
            catch_up["seconds"] = now - catch_up["restarted"]
        if all(acked[t] >= s for t, s in final.items()):
            break
        time.sleep(0.1)
    drain_s = time.monotonic() - dealing_ended
    load_end = os.getloadavg()
    cpu_members += sum(cpu_seconds(m.pid) for m in members)
    cpu_central += cpu_seconds(central.pid)
    cpu_sites = sum(cpu_seconds(b.pid) for b in site_brokers)
    reports = [stop_member(m) for m in members]
    for site in sites:
        site.close()
    for broker in site_brokers:
        broker.stop()
    central.stop()
    windows = list(zip(samples, samples[RATE_WINDOW:], strict=False))  # 5 s apart
    rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in windows]
    steady_rates = [
        (b[1] - a[1]) / (b[0] - a[0]) for a, b in windows if steady[0] <= a[0] and b[0] <= steady[1]
    ]
    total = sum(final.values())
    return {
        "setup": f"{args.sites} sites, {args.tables} tables, {args.shards} shards, "
        f"{args.rate} cards/s per table, {args.duration:g} s",
        "events_dealt": total,
        "offered_events_per_s": round(total / args.duration, 1),
        "acknowledged_events_per_s_steady_median": round(statistics.median(steady_rates), 1)
        if steady_rates
        else None,
        "acknowledged_events_per_s_peak": round(max(rates), 1) if rates else None,
        "catch_up_after_central_restart_s": round(catch_up["seconds"], 2) if "seconds" in catch_up else None,
        "drain_after_dealing_stops_s": round(drain_s, 2),
        "events_resent_on_request": sum(s.resent for s in sites),
        **verify(workdir, args.shards, final),
        "member_reports": [r.strip().splitlines()[-1] if r.strip() else "" for r in reports],
        "cpu_s": {
            "members": round(cpu_members, 1),
            "central_broker": round(cpu_central, 1),
            "site_brokers": round(cpu_sites, 1),
        },
        "loadavg_1m_start_end": [round(load_start[0], 2), round(load_end[0], 2)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--rate", type=float, default=0.25, help="cards per second per table")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.shards < 2:
        parser.error("--shards must be at least 2 (shard 1's member is the one killed)")
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        figures = run(args, Path(tmp))
    report("bench_floor", figures, args.json)
    bad = figures["events_lost"] or figures["events_repeated"] or figures["tables_out_of_order"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
