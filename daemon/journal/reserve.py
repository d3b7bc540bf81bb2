"""Room kept on the journal's file system for the day the disk fills.

A file of :attr:`SpaceReserve.size` bytes beside the journal (``journal.sqlite3.reserve``),
written while there is room. When the disk fills (the journal's own growth, or logs, or
anything else on the same file system) the journal housekeeping deletes it: appends go on
in the room it held, and compaction has room for its small WAL while it frees more. It is
written again once the free space is back above twice its size.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

CHUNK = 1024 * 1024


def free_bytes(path: Path) -> int:
    """Bytes free for this process on the file system holding ``path`` (a file or folder)."""
    folder = path if path.is_dir() else path.parent
    return int(shutil.disk_usage(folder).free)


class SpaceReserve:
    """The reserve file at ``path`` (``size`` bytes)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size

    def held(self) -> int:
        """Bytes the reserve holds now (0 when released)."""
        try:
            return int(self.path.stat().st_size)
        except FileNotFoundError:
            return 0

    def ensure(self) -> bool:
        """Write the reserve when it is missing and the free space is at least twice its size;
        True when it is in place afterwards. A failed write leaves no partial file."""
        if self.size <= 0 or self.held() >= self.size:
            return self.size <= 0 or self.held() >= self.size
        if free_bytes(self.path) < 2 * self.size:
            return False
        try:
            with self.path.open("wb") as out:
                left = self.size
                zeros = bytes(CHUNK)
                while left > 0:
                    out.write(zeros[: min(CHUNK, left)])
                    left -= min(CHUNK, left)
                out.flush()
                os.fsync(out.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False
        return True

    def release(self) -> int:
        """Delete the reserve; the bytes it gave back (0 when there was none)."""
        held = self.held()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return 0
        return held
