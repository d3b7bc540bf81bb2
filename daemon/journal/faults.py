"""What an error from the journal means, for the service's retry loop (pure).

A failing append is retried with backoff; whether retrying can help, and what to tell the
technician, depends on the cause: a full disk clears when space is freed, an I/O error may be
a dying disk, a damaged file never heals by itself.
"""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass
from enum import Enum

# SQLite primary result codes (the low byte of an extended code).
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_NOMEM = 7
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_NOTADB = 26


class FaultKind(Enum):
    """The cause of a journal error, as far as it can be told."""

    CORRUPT = "corrupt"
    DISK_FULL = "disk_full"
    IO_ERROR = "io_error"
    READ_ONLY = "read_only"
    BUSY = "busy"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class StorageFault:
    """One classified error: its kind, whether a retry may succeed, and the technician's hint."""

    kind: FaultKind
    retry_may_help: bool
    hint: str
    error: str


_HINTS: dict[FaultKind, tuple[bool, str]] = {
    FaultKind.CORRUPT: (
        False,
        "the journal file is damaged and retrying will not repair it: stop the daemon, run "
        "`baccarat-edge journal verify` on it, move it aside and start a new journal; export the "
        "unsent events from the moved file with `baccarat-edge journal export`",
    ),
    FaultKind.DISK_FULL: (
        True,
        "the disk holding the journal is full: free disk space; inputs wait in memory",
    ),
    FaultKind.IO_ERROR: (
        True,
        "the disk reported an I/O error: check the kernel log (dmesg) and the disk's health; the "
        "append is retried, but a failing disk needs replacing",
    ),
    FaultKind.READ_ONLY: (
        True,
        "the journal or its directory is read-only (file system remounted read-only after errors, "
        "or wrong permissions): check `mount` and the kernel log",
    ),
    FaultKind.BUSY: (True, "another process holds the journal locked: only the daemon may write it"),
    FaultKind.OTHER: (True, "unexpected journal error: inputs wait in memory and the append is retried"),
}


def classify_storage_error(exc: BaseException) -> StorageFault:
    """Classify an exception raised by a journal write (it or its cause may be an
    ``sqlite3.Error`` or an ``OSError``)."""
    kind = _kind_of(exc)
    cause = exc.__cause__
    if kind is FaultKind.OTHER and cause is not None:
        kind = _kind_of(cause)
    retry, hint = _HINTS[kind]
    return StorageFault(kind=kind, retry_may_help=retry, hint=hint, error=str(exc))


def _kind_of(exc: BaseException) -> FaultKind:
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            by_code = _BY_CODE.get(code & 0xFF)
            if by_code is not None:
                return by_code
        return _kind_by_message(str(exc))
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return FaultKind.DISK_FULL
        if exc.errno == errno.EIO:
            return FaultKind.IO_ERROR
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return FaultKind.READ_ONLY
    return _kind_by_message(str(exc))


_BY_CODE: dict[int, FaultKind] = {
    _SQLITE_CORRUPT: FaultKind.CORRUPT,
    _SQLITE_NOTADB: FaultKind.CORRUPT,
    _SQLITE_FULL: FaultKind.DISK_FULL,
    _SQLITE_IOERR: FaultKind.IO_ERROR,
    _SQLITE_CANTOPEN: FaultKind.IO_ERROR,
    _SQLITE_NOMEM: FaultKind.OTHER,
    _SQLITE_READONLY: FaultKind.READ_ONLY,
    _SQLITE_PERM: FaultKind.READ_ONLY,
    _SQLITE_BUSY: FaultKind.BUSY,
    _SQLITE_LOCKED: FaultKind.BUSY,
}


def _kind_by_message(text: str) -> FaultKind:
    """SQLite's fixed messages, for errors that carry no code."""
    lowered = text.lower()
    if "malformed" in lowered or "not a database" in lowered or "corrupt" in lowered:
        return FaultKind.CORRUPT
    if "database or disk is full" in lowered or "no space left" in lowered:
        return FaultKind.DISK_FULL
    if "disk i/o error" in lowered:
        return FaultKind.IO_ERROR
    if "readonly" in lowered or "read-only" in lowered:
        return FaultKind.READ_ONLY
    if "database is locked" in lowered:
        return FaultKind.BUSY
    return FaultKind.OTHER
