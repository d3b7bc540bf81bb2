"""A command for ``baccarat-edge consume --exec`` in the tests, as a game server would write
one: ``python -m tests.fleet.apply_events FILE``. It applies each event once — appends its
line to FILE unless FILE already holds its ``event_id`` (a repeat after a crash: the member
hands events at least once) — and confirms it by printing the ``event_id``. An exclusive
lock on FILE keeps a new run from reading it while an old one still writes."""

from __future__ import annotations

import fcntl
import json
import os
import sys


def main() -> None:
    with open(sys.argv[1], "a+", encoding="utf-8") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.seek(0)
        applied = {json.loads(line)["event_id"] for line in out if line.endswith("\n")}
        for line in sys.stdin:
            event_id = json.loads(line)["event_id"]
            if event_id not in applied:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())
                applied.add(event_id)
            print(event_id, flush=True)


if __name__ == "__main__":
    main()
