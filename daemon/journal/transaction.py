"""One write transaction on the journal's shared connection."""

from __future__ import annotations

import sqlite3
import threading
from types import TracebackType


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK``) under the journal lock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error:
                    # A failed COMMIT may leave the transaction open; the next BEGIN must not
                    # find it (nor silently commit this one's rows later).
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
            elif self._db.in_transaction:
                # SQLite already rolled back on SQLITE_FULL/IOERR: a second ROLLBACK would
                # replace the real error ("database or disk is full") with its own.
                self._db.execute("ROLLBACK")
        finally:
            self._lock.release()
