"""``baccarat-edge journal verify|export|drop-snapshots FILE``, ``journal shoe-report [SHOE_ID]``:
check a journal file, export its events, remove its engine snapshots, or report a shoe's
certificate.

``verify`` reads the whole file (read-only; the daemon may be running): SQLite's integrity
check, the meta, every ``seq`` (a missing one must have been removed by compaction), the
event bodies and the inputs events name; then it re-folds the engine events and compares every
stored engine snapshot with the fold (what a start would restore). Exit status: 0 whole, 1
damaged or a snapshot that disagrees (each problem is printed, then the way out), 2 unreadable
(missing, empty, not an SQLite file).

``drop-snapshots`` (daemon stopped) deletes the engine snapshots: the next start folds the
whole journal and stores a new one.

``export`` writes the events as JSON lines in ``seq`` order (the stored body with ``seq``,
``event_id``, ``table_id``, ``origin``, ``journaled_at``, ``delivered_at``, ``dead_letter``),
e.g. ``baccarat-edge journal export journal.sqlite3.damaged --from-seq 1201 | jq .kind``.
Exit status: 0 all written, 1 reading stopped part-way (what was written stands), 2 unreadable.

``shoe-report [SHOE_ID] [--journal FILE | --config FILE]`` prints a shoe's latest certificate
(every card of its decks accounted for, per face; after a remainder count, balanced or each
missing and extra card named) and the irregular-shoe detectors' findings; without SHOE_ID the
last shoe certified; ``--json`` for one JSON object. The journal is the file given, else the one
the config names (by default ``/etc/baccarat-edge/table.yaml``'s). Exit status: 0 shown, 1 no
certificate of that shoe, 2 bad usage, a config or journal that cannot be read.
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
    drop = actions.add_parser(
        "drop-snapshots",
        help="delete the engine snapshots (daemon stopped): the next start folds every event",
    )
    drop.add_argument("file", type=Path, help="the journal (SQLite) file")
    drop.set_defaults(handler=_drop_snapshots)
    export = actions.add_parser("export", help="print the events as JSON lines, in seq order")
    export.add_argument("file", type=Path, help="the journal (SQLite) file")
    export.add_argument("--from-seq", type=int, default=1, metavar="N", help="first seq (default 1)")
    export.add_argument("--to-seq", type=int, metavar="M", help="last seq (default: the newest)")
    export.add_argument("--out", type=Path, metavar="F", help="write to F instead of stdout")
    export.set_defaults(handler=_export)
    report = actions.add_parser(
        "shoe-report", help="a shoe's certificate (every card accounted for) and irregularity findings"
    )
    report.add_argument("shoe_id", nargs="?", help="the shoe (default: the last shoe certified)")
    report.add_argument("--journal", type=Path, metavar="FILE", help="the journal (SQLite) file")
    report.add_argument("--config", type=Path, metavar="FILE", help="find the journal from this config")
    report.add_argument("--json", action="store_true", help="one JSON object instead of text")
    report.set_defaults(handler=_shoe_report)


def _verify(args: argparse.Namespace) -> int:
    from daemon.journal.integrity import verify_journal, way_out
    from daemon.service.engine_restore import verify_snapshots

    report = verify_journal(args.file)
    snapshots = verify_snapshots(args.file) if report.readable else None
    snapshot_problems = [] if snapshots is None else snapshots.problems
    status = 0 if report.ok and not snapshot_problems else 1 if report.readable else 2
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
                    "snapshots_checked": [] if snapshots is None else snapshots.checked,
                    "snapshot_problems": snapshot_problems,
                    "snapshot_notes": [] if snapshots is None else snapshots.notes,
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
    if snapshots is not None:
        for note in snapshots.notes:
            print(f"  note: {note}")
        if snapshots.checked:
            print(f"{len(snapshots.checked)} engine snapshot(s) equal to the fold of the events")
        for problem in snapshot_problems:
            print(f"  SNAPSHOT WRONG: {problem}")
    if report.ok:
        print("ok: the journal is whole")
        return status
    for problem in report.problems:
        print(f"  DAMAGED: {problem}")
    print(f"{len(report.problems)} problem(s): {way_out(report.path, report.delivered_through)}")
    return status


def _drop_snapshots(args: argparse.Namespace) -> int:
    import sqlite3

    from daemon.service.engine_restore import drop_snapshots

    if not args.file.is_file():
        print(f"error: {args.file}: no such file", file=sys.stderr)
        return 2
    try:
        dropped = drop_snapshots(args.file)
    except sqlite3.Error as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return 2
    print(f"{dropped} engine snapshot(s) deleted: the next start folds the whole journal")
    return 0


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


def _shoe_report(args: argparse.Namespace) -> int:
    from daemon.commands._journal_file import journal_path
    from daemon.commands.rounds import DEFAULT_CONFIG
    from daemon.journal.errors import JournalError
    from daemon.journal.shoe_report import UnknownShoe, shoe_report

    path = journal_path(args, DEFAULT_CONFIG)
    if isinstance(path, str):
        print(f"error: {path}", file=sys.stderr)
        return 2
    try:
        report = shoe_report(path, args.shoe_id)
    except UnknownShoe as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (JournalError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), sort_keys=True))
    else:
        print(report.text(), end="")
    return 0
