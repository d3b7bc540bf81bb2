"""``baccarat-edge journal verify|export FILE``: check a journal file, or export its events.

``verify`` reads the whole file (read-only; the daemon may be running): SQLite's integrity
check, the meta, every ``seq`` (a missing one must have been removed by compaction), the
event bodies and the inputs events name. Exit status: 0 whole, 1 damaged (each problem is
printed, then the way out), 2 unreadable (missing, empty, not an SQLite file).

``export`` writes the events as JSON lines in ``seq`` order (the stored body with ``seq``,
``event_id``, ``table_id``, ``origin``, ``journaled_at``, ``delivered_at``, ``dead_letter``),
e.g. ``baccarat-edge journal export journal.sqlite3.damaged --from-seq 1201 | jq .kind``.
Exit status: 0 all written, 1 reading stopped part-way (what was written stands), 2 unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "journal",
        help="verify a journal file, or export its events as JSON lines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="journal_command", metavar="ACTION", required=True)
    verify = actions.add_parser("verify", help="check a journal file thoroughly (read-only)")
    verify.add_argument("file", type=Path, help="the journal (SQLite) file")
    verify.add_argument("--json", action="store_true", help="one JSON object instead of text")
    verify.set_defaults(handler=_verify)
    export = actions.add_parser("export", help="print the events as JSON lines, in seq order")
    export.add_argument("file", type=Path, help="the journal (SQLite) file")
    export.add_argument("--from-seq", type=int, default=1, metavar="N", help="first seq (default 1)")
    export.add_argument("--to-seq", type=int, metavar="M", help="last seq (default: the newest)")
    export.add_argument("--out", type=Path, metavar="F", help="write to F instead of stdout")
    export.set_defaults(handler=_export)


def _verify(args: argparse.Namespace) -> int:
    from daemon.journal.integrity import verify_journal, way_out

    report = verify_journal(args.file)
    status = 0 if report.ok else 1 if report.readable else 2
    if args.json:
        print(
            json.dumps(
                {
                    "file": str(report.path),
                    "ok": report.ok,
                    "readable": report.readable,
                    "problems": report.problems,
                    "table_id": report.table_id,
                    "journal_id": report.journal_id,
                    "epoch": report.epoch,
                    "last_seq": report.last_seq,
                    "events": report.events,
                    "undelivered": report.undelivered,
                    "delivered_through": report.delivered_through,
                },
                sort_keys=True,
            )
        )
        return status
    if not report.readable:
        for problem in report.problems:
            print(f"error: {problem}", file=sys.stderr)
        return status
    print(
        f"{report.path}: table {report.table_id}, epoch {report.epoch}, {report.events} event(s) stored, "
        f"last seq {report.last_seq}, {report.undelivered} undelivered, delivered through seq "
        f"{report.delivered_through}"
    )
    if report.ok:
        print("ok: the journal is whole")
        return 0
    for problem in report.problems:
        print(f"  DAMAGED: {problem}")
    print(f"{len(report.problems)} problem(s): {way_out(report.path, report.delivered_through)}")
    return status


def _export(args: argparse.Namespace) -> int:
    from daemon.journal.errors import JournalError
    from daemon.journal.export import ExportInterrupted, export_events

    if args.from_seq < 1 or (args.to_seq is not None and args.to_seq < args.from_seq):
        print("error: need 1 <= --from-seq <= --to-seq", file=sys.stderr)
        return 2
    try:
        if args.out is None:
            count = export_events(args.file, sys.stdout, args.from_seq, args.to_seq)
        else:
            with args.out.open("w", encoding="utf-8") as out:
                count = export_events(args.file, out, args.from_seq, args.to_seq)
    except ExportInterrupted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except JournalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    print(f"{count} event(s) exported", file=sys.stderr)
    return 0
