"""Card-to-subscriber latency: bytes into the reader's pty → validated card event at an MQTT subscriber.

The real daemon (``python -m daemon.cli run``) reads an Angel Eye shoe on a pty and publishes
to a mosquitto this script starts on its own port; a subscriber in this process timestamps
every event. Several clean 8-deck shoes are dealt at ``--speed`` times a real dealer (one
card every ``1/speed`` s), so each card is measured on its own, not in a queue.

Per card (one clock, ``time.time()``, shared by both processes):

* ``e2e``      write of the card's first frame into the pty → event received by the subscriber;
* ``decode``   write → the driver's read timestamp (``data.read.read_at``): pty, pyserial, decoder;
* ``engine``   read timestamp → the journal's ``journaled_at`` (input queue hand-off + engine);
* ``commit+publish prep`` ``journaled_at`` → the envelope's ``published_at`` (SQLite commit with
  its fsync, publisher wake-up, journal read, envelope and HMAC);
* ``mqtt``     ``published_at`` → received (paho network thread, broker, subscriber).

Baselines measured in the same run: a bare paho QoS 1 publish → receive of a payload the
size of a card event over the same broker (same pacing); one ``write`` + ``fsync`` of 4 KiB
(one WAL frame) to a file beside the journal, sampled in a thread while the shoes are dealt;
and ``Journal.append`` of a card input with its events on the same disk (the commit alone).
Target: p99(e2e) − p99(baseline) < 5 ms + p99(fsync).

    .venv/bin/python -m bench.bench_latency [--shoes 5] [--speed 100] [--baseline 1500]
        [--py-spy FILE] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import FsyncProbe, Summary, collapsed_profile, fsync_sample, ms, pyspy_start, report
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

TABLE_ID = "LAT-1"


def paho_baseline(port: int, count: int, size: int, gap_s: float) -> list[float]:
    """Seconds from ``publish()`` (QoS 1) to receipt at a subscriber, bare paho, same broker."""
    topic = "bench/baseline"
    recorder = EventRecorder(port, topics=(topic,)).start()
    publisher = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-baseline-pub", protocol=mqtt.MQTTv5)
    publisher.connect("127.0.0.1", port)
    publisher.loop_start()
    sent: dict[int, float] = {}
    try:
        for i in range(count):
            body = f"{i:08d}".encode()
            payload = body + b"x" * max(0, size - len(body))
            sent[i] = time.time()
            publisher.publish(topic, payload, qos=1)
            time.sleep(gap_s)
        await_condition(lambda: recorder.count() >= count, 10.0)
    finally:
        publisher.loop_stop()
        publisher.disconnect()
        recorder.stop()
    return [r.at - sent[int(r.payload[:8])] for r in recorder.snapshot()]


def journal_commit_sample(directory: Path, count: int) -> list[float]:
    """Seconds per ``Journal.append`` of one card read with the two events a round's card makes."""
    from common.cards import Card
    from common.inputs import CardRead, DeviceTarget
    from daemon.engine.events import Event, EventKind
    from daemon.journal.settings import JournalSettings
    from daemon.journal.store import Journal

    journal = Journal(JournalSettings(path=directory / "commit-probe.sqlite3"), "PROBE")
    out: list[float] = []
    try:
        for i in range(count):
            read = CardRead(Card.parse("8s"), time.time(), target=DeviceTarget.P1, transmission_id="1",
                            raw="05 31 44 81 b8 03 34 36")  # fmt: skip
            read_data = {"card": "8s", "device": "reader", "read_at": read.at, "raw": read.raw}
            events = [
                Event(EventKind.CARD_DEALT, read.at, "shoe", i + 1, "reader",
                      {"card": "8s", "slot": "P1", "round": i + 1, "read": read_data}),
                Event(EventKind.ROUND_OPENED, read.at, "shoe", i + 1, "reader", {"hand": i + 1}),
            ]  # fmt: skip
            start = time.perf_counter()
            journal.append([read], events)
            out.append(time.perf_counter() - start)
    finally:
        journal.close()
    return out


def run(
    shoes: int, speed: float, baseline_count: int, seed: int, profile: Path | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp_name:
        tmp = Path(tmp_name)
        stream = shoe_stream(shoes, seed)
        with Broker(tmp / "broker") as broker:
            recorder = EventRecorder(
                broker.port, topics=("baccarat/v1/+/events", "baccarat/v1/+/status")
            ).start()
            pty = TimedPty(tmp / "shoe")
            config = write_config(tmp / "table", TABLE_ID, pty.path, broker.port)
            notify = NotifySocket(tmp / "notify.sock")
            daemon = DaemonProcess(config, tmp / "daemon.log", notify_socket=notify.path)
            try:
                if notify.wait_ready(30.0) is None:
                    raise RuntimeError(f"the daemon did not report READY:\n{daemon.tail()}")
                online = await_condition(
                    lambda: any(r.topic.endswith("/status") and b'"online"' in r.payload
                                for r in recorder.snapshot()), 15.0)  # fmt: skip
                if not online:
                    raise RuntimeError(f"the daemon did not come online:\n{daemon.tail()}")
                shoe = VirtualShoe(stream.steps, pty, speed=speed)
                started = time.monotonic()
                spy = None if profile is None else pyspy_start(daemon.pid, 10.0, profile)
                with FsyncProbe(tmp) as probe:
                    shoe.run()
                if spy is not None:
                    spy.wait(30)
                dealt_s = time.monotonic() - started
                state_dir = tmp / "table" / "state"
                last = journal_last_seq(state_dir)
                delivered = await_condition(
                    lambda: sum(1 for r in recorder.snapshot() if r.topic.endswith("/events")) >= last, 60.0
                )
                if not delivered:
                    raise RuntimeError("not every journaled event reached the subscriber within 60 s")
                journaled_at = _journaled_at(state_dir)
            finally:
                daemon.stop()
                notify.close()
                pty.close()
            recorder.stop()
            events = [
                (at, env) for at, env in parse_events(recorder.snapshot()) if "seq" in env and "kind" in env
            ]
            cards = [(at, env) for at, env in events if env["kind"] == "card_dealt"]
            if len(cards) != len(pty.card_writes):
                raise RuntimeError(f"{len(pty.card_writes)} card frames written, {len(cards)} cards received")
            stages: dict[str, list[float]] = {k: [] for k in ("e2e", "decode", "engine", "commit", "mqtt")}
            for (written_at, frame), (received_at, env) in zip(pty.card_writes, cards, strict=True):
                read = env["data"]["read"]
                if read["raw"] != frame.hex(" "):
                    raise RuntimeError(f"event seq {env['seq']} is not the frame written ({frame.hex(' ')})")
                journaled = journaled_at[int(env["seq"])]
                stages["e2e"].append(received_at - written_at)
                stages["decode"].append(read["read_at"] - written_at)
                stages["engine"].append(journaled - read["read_at"])
                stages["commit"].append(env["published_at"] - journaled)
                stages["mqtt"].append(received_at - env["published_at"])
            card_bytes = [len(r.payload) for r in recorder.snapshot() if b'"card_dealt"' in r.payload]
            size = int(statistics.median(card_bytes))
            baseline = paho_baseline(broker.port, baseline_count, size, gap_s=1.0 / speed)
        fsync = probe.samples + fsync_sample(tmp, 100)
        commit = journal_commit_sample(tmp, 300)
    e2e, base, fs = ms(stages["e2e"]), ms(baseline), ms(fsync)
    added = Summary(e2e.n, e2e.median - base.median, e2e.p99 - base.p99, e2e.max - base.max)
    budget_p99 = 5.0 + fs.p99
    figures: dict[str, Any] = {
        "shoes": shoes,
        "cards": len(cards),
        "events": len(events),
        "speed": speed,
        "dealing_s": round(dealt_s, 1),
        "card_event_bytes_median": size,
        "order": seq_report([env for _, env in events]),
        "latency_ms": {
            "e2e (write -> subscriber)": e2e.text(),
            "  decode (write -> read_at)": ms(stages["decode"]).text(),
            "  engine (read_at -> journaled_at)": ms(stages["engine"]).text(),
            "  commit+publish prep (-> published_at)": ms(stages["commit"]).text(),
            "  mqtt (published_at -> subscriber)": ms(stages["mqtt"]).text(),
            "baseline paho QoS1 publish -> receive": base.text(),
            "baseline write 4 KiB+fsync (same disk, during run)": fs.text(),
            "journal append alone (same disk)": ms(commit).text(),
            "added = e2e - baseline (per percentile)": (
                f"median {added.median:.2f} ms  p99 {added.p99:.2f} ms"
            ),
        },
        "ratio_e2e_to_baseline_p50": round(e2e.median / base.median, 2),
        "ratio_e2e_to_baseline_p99": round(e2e.p99 / base.p99, 2),
        "target_p99_added_ms": f"< 5 + fsync p99 = {budget_p99:.2f}",
        "target_met": added.p99 < budget_p99,
    }
    if profile is not None and profile.exists():
        figures["py_spy_daemon_first_10s"] = collapsed_profile(profile)
    return figures


def _journaled_at(state_dir: Path) -> dict[int, float]:
    import sqlite3

    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True)
    try:
        return {int(s): float(j) for s, j in db.execute("SELECT seq, journaled_at FROM events")}
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shoes", type=int, default=5, help="8-deck shoes dealt (about 405 cards each)")
    parser.add_argument("--speed", type=float, default=100.0, help="times a real dealer (1 card/s)")
    parser.add_argument("--baseline", type=int, default=1500, help="bare paho messages for the baseline")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--py-spy", type=Path, default=None, metavar="FILE",
        help="profile the daemon's first 10 s of dealing with py-spy (collapsed stacks to FILE)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args.shoes, args.speed, args.baseline, args.seed, args.py_spy)
    report("card-to-subscriber latency", figures, args.json)
    return 0 if figures["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
