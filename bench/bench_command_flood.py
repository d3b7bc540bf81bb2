"""A flood of junk commands against a dealing table: journal growth and dealing, flood vs none.

The real daemon (``python -m daemon.cli run``, production-shaped config from ``bench.rig``)
deals clean shoes from a pty at ``--speed`` x a dealer's pace. Two phases of ``--seconds``
each, in one run: the *baseline* deals with no commands; the *flood* deals the same way while
a client publishes junk commands of ``--size`` bytes (QoS 0, as fast as it can) on the table's
``cmd`` topic. Reported per phase: commands sent, journal growth (database + WAL), cards
journaled, ``command_refused`` events journaled and the commands they account for (one by
one, or counted into a window's summary). Issue #13's target: 60 s of 15 kB junk at full rate
grows the journal by < 5 MB and the table keeps dealing.

    .venv/bin/python -m bench.bench_command_flood [--seconds 60] [--speed 10] [--size 15000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from bench.common import report
from bench.rig import Broker, DaemonProcess, NotifySocket, TimedPty, shoe_stream, write_config
from drivers.simulate import VirtualShoe

TABLE_ID = "FLOOD-1"


def _journal_bytes(state_dir: Path) -> int:
    """The database file's size once the WAL is checkpointed into it (the WAL itself is
    reused, so its size says little about growth)."""
    path = state_dir / "journal.sqlite3"
    db = sqlite3.connect(path, timeout=10.0)
    try:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        db.close()
    return path.stat().st_size


def _counts(state_dir: Path) -> dict[str, int]:
    db = sqlite3.connect(f"file:{state_dir / 'journal.sqlite3'}?mode=ro", uri=True)
    try:
        cards = db.execute("SELECT count(*) FROM events WHERE kind = 'card_dealt'").fetchone()[0]
        rows = db.execute("SELECT body FROM events WHERE kind = 'command_refused'").fetchall()
    finally:
        db.close()
    accounted = sum(int(json.loads(body)["data"].get("aggregated", 1)) for (body,) in rows)
    return {"cards": int(cards), "refused_events": len(rows), "refused_accounted": accounted}


class Flooder:
    """Publishes junk commands as fast as paho takes them, until stopped."""

    def __init__(self, port: int, size: int) -> None:
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="flooder", protocol=mqtt.MQTTv5)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        self.payload = json.dumps({"command_id": "junk", "pad": os.urandom(size // 2).hex()}).encode()
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        topic = f"baccarat/v1/{TABLE_ID}/cmd"
        while not self._stop.is_set():
            info = self.client.publish(topic, self.payload, qos=0)
            if info.rc == mqtt.MQTT_ERR_SUCCESS:
                self.sent += 1
            else:
                time.sleep(0.001)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.client.loop_stop()
        self.client.disconnect()


def _phase(
    steps: list[Any], shoe: TimedPty, speed: float, state_dir: Path, flood: Flooder | None, settle_s: float
) -> dict[str, Any]:
    before_bytes, before = _journal_bytes(state_dir), _counts(state_dir)
    written_before = len(shoe.card_writes)
    if flood is not None:
        flood.start()
    started = time.monotonic()
    VirtualShoe(steps, shoe, speed=speed).run()
    seconds = time.monotonic() - started
    if flood is not None:
        flood.stop()
    time.sleep(settle_s)  # the daemon journals what it read, and closes the refusal window
    after = _counts(state_dir)
    return {
        "seconds": round(seconds, 1),
        "cards_written": len(shoe.card_writes) - written_before,
        "commands_sent": 0 if flood is None else flood.sent,
        "journal_growth_bytes": _journal_bytes(state_dir) - before_bytes,
        **{key: after[key] - before[key] for key in after},
    }


def run(seconds: float, speed: float, size: int) -> dict[str, Any]:
    stream = shoe_stream(3, seed=4)
    span = seconds * speed  # dealer-seconds of steps per phase
    first = [s for s in stream.steps if s.t < span]
    second = [s.model_copy(update={"t": s.t - span}) for s in stream.steps if span <= s.t < 2 * span]
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp_name:
        tmp = Path(tmp_name)
        with Broker(tmp / "broker") as broker:
            shoe = TimedPty(tmp / "shoe")
            config = write_config(tmp / "table", TABLE_ID, shoe.path, broker.port)
            notify = NotifySocket(tmp / "notify.sock")
            daemon = DaemonProcess(config, tmp / "daemon.log", notify_socket=notify.path)
            state_dir = tmp / "table" / "state"
            try:
                if notify.wait_ready(30.0) is None:
                    raise RuntimeError(f"the daemon did not report READY:\n{daemon.tail()}")
                time.sleep(1.0)
                baseline = _phase(first, shoe, speed, state_dir, None, 2.0)
                # past the refusal window (10 s by default), so its summary is journaled
                flood = _phase(second, shoe, speed, state_dir, Flooder(broker.port, size), 12.0)
                alive = daemon.alive()
            finally:
                daemon.stop()
                notify.close()
                shoe.close()
    met = (
        alive
        and flood["journal_growth_bytes"] < 5_000_000
        and flood["cards"] == flood["cards_written"]
        and baseline["cards"] == baseline["cards_written"]
    )
    return {
        "seconds_per_phase": seconds,
        "speed": speed,
        "command_bytes": size,
        "baseline": baseline,
        "flood": flood,
        "flood_commands_per_s": round(flood["commands_sent"] / max(flood["seconds"], 1e-9)),
        "ratio_growth_flood_to_baseline": round(
            flood["journal_growth_bytes"] / max(baseline["journal_growth_bytes"], 1), 2
        ),
        "daemon_alive": alive,
        "target": "flood growth < 5 MB; every card written into the shoe journaled, flood or not",
        "target_met": met,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    parser.add_argument("--speed", type=float, default=10.0, help="times a real dealer (1 card/s)")
    parser.add_argument("--size", type=int, default=15_000, help="bytes per junk command")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args.seconds, args.speed, args.size)
    report("command flood", figures, args.json)
    return 0 if figures["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
