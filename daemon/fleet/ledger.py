"""What ``baccarat-edge consume`` handed on, kept so a crash neither repeats nor loses a line.

A shard member hands each event at least once to ``on_processed`` (after a crash, the events
since its last checkpoint commit come again, same ``seq`` and ``event_id``) and calls
``before_commit`` before its checkpoints commit. The :class:`Ledger` is the application side
of that contract, the de-duplication an application with its own store does:

* every ``(table_id, event_id)`` handed on (the newest :data:`KEEP_SEQS` seqs of each
  table): an event already there is a repeat and is skipped. Repeats only ever come from the
  last commit interval (the checkpoint is at most one commit behind the ledger), so the
  window is ample; keying by ``event_id`` rather than ``seq`` lets the new events of a table
  whose journal was rolled back through (same ``seq``, new ``event_id``) go on;
* for a file, the length of the file as last committed: lines past it were written by a run
  that died before its commit, and are cut off when the next run opens the file.

:meth:`Ledger.commit` (``before_commit``) writes the pending lines, ``fsync``\\s the file, then
commits the ledger in one SQLite transaction; only after that do the checkpoints commit and
the tables get their acknowledgements. So the ledger is never behind the checkpoints (nothing
acknowledged is missing from the file) and the file never holds a line the ledger does not
know (nothing is written twice): **exactly once in the file**, in ``seq`` order per table.

A command confirms each line by printing its ``event_id`` once it has applied it, and the
commit waits for those confirmations (:class:`CommandSink`). A line the command applied just
before a crash, and whose confirmation the ledger had not committed, comes again to the next
run's command: a command gets every event **at least once**, in order, and tells a repeat by
its ``table_id`` and ``event_id`` — always the same event, one of the last it saw for that
table.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any, Protocol

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sink(
    id INTEGER PRIMARY KEY CHECK (id = 1),
    target TEXT NOT NULL,
    length INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS handed(
    table_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (table_id, event_id)
);
CREATE INDEX IF NOT EXISTS handed_seq ON handed(table_id, seq);
"""


KEEP_SEQS = 10_000
"""Per table, the event ids of the newest this many seqs handed on are kept (a repeat
after a crash is at most one commit interval old)."""


class LedgerError(Exception):
    """The ledger and its sink disagree (another file, a file cut shorter); the text says how."""


class Sink(Protocol):
    """Where the lines go."""

    target: str
    """What the ledger was made for (a file path, a command line)."""

    def open(self, committed_length: int | None) -> None:
        """Get ready; ``committed_length``: the file length as last committed (None: new)."""

    def write(self, line: bytes, event_id: str) -> None:
        """Take one line (with its newline): the event ``event_id``."""

    def flush(self) -> int:
        """Make every line taken durable; returns the new committed length (0 for a pipe)."""

    def close(self) -> None:
        """Release the file or end the command."""


class FileSink:
    """JSON lines appended to a file, cut back to the committed length on open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.target = f"file:{path.resolve()}"
        self._file: IO[bytes] | None = None
        self._pending: list[bytes] = []

    def open(self, committed_length: int | None) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        if committed_length is None and size > 0:
            raise LedgerError(f"{self.path} already holds {size} bytes this checkpoint never wrote")
        committed = committed_length or 0
        if size < committed:
            raise LedgerError(
                f"{self.path} is {size} bytes, shorter than the {committed} this checkpoint committed: "
                "it was cut or replaced"
            )
        self._file = self.path.open("r+b" if self.path.exists() else "w+b")
        self._file.truncate(committed)  # lines of a run that died before its commit
        self._file.seek(committed)
        os.fsync(self._file.fileno())

    def write(self, line: bytes, event_id: str) -> None:
        self._pending.append(line)

    def flush(self) -> int:
        assert self._file is not None, "open() first"
        if self._pending:
            self._file.write(b"".join(self._pending))
            self._pending.clear()
            self._file.flush()
            os.fsync(self._file.fileno())
        return self._file.tell()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class CommandSink:
    """JSON lines to a command's standard input (``argv``, no shell). The command confirms each
    line once it has applied it by writing that event's ``event_id`` as a line on its standard
    output; :meth:`flush` (so the ledger's and the checkpoints' commits) waits for every
    confirmation. A line not confirmed is never acknowledged to its table: after a crash of
    either side it comes again."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.target = "exec:" + json.dumps(argv)
        self.proc: subprocess.Popen[bytes] | None = None
        self._awaiting: deque[str] = deque()
        self._confirmed: deque[str] = deque()
        self._ended = False
        self._changed = threading.Condition()

    def open(self, committed_length: int | None) -> None:
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # Read confirmations as they come: a command blocked on a full stdout pipe would stop
        # reading its stdin, and this side would block writing it.
        threading.Thread(target=self._read_confirmations, name="consume-confirmations", daemon=True).start()

    def write(self, line: bytes, event_id: str) -> None:
        assert self.proc is not None, "open() first"
        assert self.proc.stdin is not None
        with self._changed:
            self._awaiting.append(event_id)
        self.proc.stdin.write(line)  # BrokenPipeError when the command is gone: the member stops

    def flush(self) -> int:
        """Wait until the command confirmed every line written; LedgerError if it ended first
        or confirmed another event than the next one."""
        assert self.proc is not None, "open() first"
        assert self.proc.stdin is not None
        self.proc.stdin.flush()
        with self._changed:
            while self._awaiting:
                if self._confirmed:
                    got, expected = self._confirmed.popleft(), self._awaiting.popleft()
                    if got != expected:
                        raise LedgerError(f"the command confirmed {got!r} where {expected!r} was next")
                elif self._ended:
                    raise LedgerError(f"the command {self.argv[0]} ended with lines unconfirmed")
                else:
                    self._changed.wait()
        return 0

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin is not None:
                with contextlib.suppress(BrokenPipeError):  # gone: it confirmed nothing more
                    self.proc.stdin.close()
            self.proc.wait()

    def _read_confirmations(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._changed:
                self._confirmed.append(raw.decode("utf-8", errors="replace").strip())
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()


class Ledger:
    """The sink's committed state in one SQLite file (WAL, ``synchronous=FULL``)."""

    def __init__(self, path: Path, sink: Sink) -> None:
        self.sink = sink
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        row = self._db.execute("SELECT target, length FROM sink WHERE id = 1").fetchone()
        if row is not None and row[0] != sink.target:
            raise LedgerError(f"{path} belongs to {row[0]}, not {sink.target}")
        self._pending: list[tuple[str, str, int]] = []  # (table, event_id, seq) not committed yet
        self._pending_ids: set[tuple[str, str]] = set()
        self.handed = 0
        """Lines handed on by this run."""
        self.repeats = 0
        """Events skipped as already handed on (the crash of an earlier run)."""
        sink.open(None if row is None else int(row[1]))
        if row is None:  # the sink is new and empty: from now on its length is the ledger's word
            self._db.execute("INSERT INTO sink(id, target, length) VALUES (1, ?, 0)", (sink.target,))

    def take(self, table: str, envelope: dict[str, Any]) -> bool:
        """Hand one event on unless it was (``on_processed``); False for a repeat."""
        event_id, seq = str(envelope["event_id"]), int(envelope["seq"])
        if (table, event_id) in self._pending_ids or self._db.execute(
            "SELECT 1 FROM handed WHERE table_id = ? AND event_id = ?", (table, event_id)
        ).fetchone():
            self.repeats += 1
            return False
        self.sink.write(
            json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode() + b"\n", event_id
        )
        self._pending.append((table, event_id, seq))
        self._pending_ids.add((table, event_id))
        self.handed += 1
        return True

    def commit(self) -> None:
        """Make the lines durable, then the ledger (``before_commit``)."""
        if not self._pending:
            return
        length = self.sink.flush()
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute(
            "INSERT OR REPLACE INTO sink(id, target, length) VALUES (1, ?, ?)", (self.sink.target, length)
        )
        self._db.executemany(
            "INSERT OR REPLACE INTO handed(table_id, event_id, seq) VALUES (?, ?, ?)", self._pending
        )
        newest: dict[str, int] = {}
        for table, _, seq in self._pending:
            newest[table] = seq  # the last line of a table is its newest (a rollback goes back)
        self._db.executemany(
            "DELETE FROM handed WHERE table_id = ? AND seq <= ?",
            [(table, seq - KEEP_SEQS) for table, seq in newest.items()],
        )
        self._db.execute("COMMIT")
        self._pending.clear()
        self._pending_ids.clear()

    def close(self) -> None:
        """Close the database and the sink (nothing is committed: call :meth:`commit` first)."""
        self._db.close()
        self.sink.close()
