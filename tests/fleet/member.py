"""A shard member in its own process, for the kill tests: ``python -m tests.fleet.member``.

It runs :class:`~daemon.fleet.shards.ShardConsumer` with an ``on_event`` callback whose
effect is a row in an ``effects`` table written inside the checkpoint's transaction, and
ends itself with ``os._exit`` at a numbered point when ``--kill-at POINT:N`` says so:

* ``event-before:N`` — on entering the N-th callback, before its effect is written;
* ``event-inside:N`` — inside it, right after the effect is written;
* ``event-after:N`` — after the N-th callback returned (in ``on_processed``);
* ``commit-before:N`` — at the N-th commit with effects pending, before anything commits;
* ``commit-after:N`` — right after that commit (and its acknowledgements) went out.

SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

from daemon.fleet.shards import ShardConsumer
from daemon.mqtt.secrets import SecretSource

KILLED = 137
POINTS = ("event-before", "event-inside", "event-after", "commit-before", "commit-after")

EFFECTS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS effects(n INTEGER PRIMARY KEY AUTOINCREMENT, "
    "table_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL)"
)


class KillSwitch:
    """Counts passes at each point; ends the process at the chosen one."""

    def __init__(self, spec: str | None) -> None:
        self.point: str | None = None
        self.at = 0
        if spec is not None:
            point, _, at = spec.partition(":")
            self.point, self.at = point, int(at)
        if self.point is not None and self.point not in POINTS:
            raise SystemExit(f"unknown kill point {self.point}")
        self.passes = dict.fromkeys(POINTS, 0)

    def reach(self, point: str) -> None:
        self.passes[point] += 1
        if point == self.point and self.passes[point] == self.at:
            os._exit(KILLED)


class Member(ShardConsumer):
    """The shard member with the kill switch around its commit."""

    def __init__(self, switch: KillSwitch, **kwargs: Any) -> None:
        self.switch = switch
        self.pending = 0
        super().__init__(on_event=self.apply, on_processed=self.applied, **kwargs)

    def apply(self, table: str, envelope: dict[str, Any], db: sqlite3.Connection) -> None:
        self.switch.reach("event-before")
        db.execute(EFFECTS_SCHEMA)
        db.execute(
            "INSERT INTO effects(table_id, seq, event_id) VALUES (?, ?, ?)",
            (table, envelope["seq"], envelope["event_id"]),
        )
        self.pending += 1
        self.switch.reach("event-inside")

    def applied(self, _table: str, _envelope: dict[str, Any]) -> None:
        self.switch.reach("event-after")

    def tick(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, 0
        if pending:
            self.switch.reach("commit-before")
        super().tick()
        if pending:
            self.switch.reach("commit-after")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--table", action="append", required=True, help="TABLE=KEYFILE")
    parser.add_argument("--checkpoints", type=Path, required=True)
    parser.add_argument("--gs-key", type=Path, required=True)
    parser.add_argument("--kill-at")
    args = parser.parse_args()
    keys = {t.split("=")[0]: SecretSource(file=Path(t.split("=")[1])).load() for t in args.table}
    member = Member(
        KillSwitch(args.kill_at),
        host="127.0.0.1",
        port=args.port,
        tables=list(keys),
        shard=0,
        shards=1,
        keys=keys,
        checkpoint_dir=args.checkpoints,
        ack_key_id="gs-1",
        ack_key=SecretSource(file=args.gs_key).load(),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    member.start()
    stop.wait()
    member.stop()


if __name__ == "__main__":
    main()
