"""A pretend serial device on a pseudo-terminal, for replay, simulation and tests.

The serial driver opens the pty's slave side exactly as it opens a real
``/dev/ttyUSB0``. A stable path (a symlink, like the udev name
``/dev/baccarat-shoe``) points at the current pty, so "unplug" (close the master:
the driver's next read fails with pyserial's "device reports readiness to read
but returned no data") and "replug" (a new pty behind the same path) look to the
driver like a real USB adapter going away and coming back.
"""

from __future__ import annotations

import os
import tty
from pathlib import Path


class PtyDevice:
    """Pseudo-terminal with a stable symlink path; write into it as the device would."""

    def __init__(self, link: Path | None = None) -> None:
        self.link = link
        self._master: int | None = None
        self._slave: int | None = None
        self.plug()

    @property
    def path(self) -> str:
        """The path a driver should open (the symlink when there is one)."""
        if self.link is not None:
            return str(self.link)
        return self.slave_name

    @property
    def slave_name(self) -> str:
        if self._slave is None:
            raise RuntimeError("device is unplugged")
        return os.ttyname(self._slave)

    @property
    def plugged(self) -> bool:
        return self._master is not None

    def plug(self) -> None:
        """Create a fresh pty (raw mode) and point the symlink at it."""
        if self._master is not None:
            return
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no CR/LF translation before the driver opens it
        self._master, self._slave = master, slave
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(os.ttyname(slave))
            tmp.replace(self.link)

    def unplug(self) -> None:
        """Close the pty: the driver's next read fails as with a pulled USB adapter."""
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        for fd in (self._master, self._slave):
            if fd is not None:
                os.close(fd)
        self._master = self._slave = None

    def write(self, data: bytes) -> None:
        """Bytes from the device to the host."""
        if self._master is None:
            raise RuntimeError("device is unplugged")
        view = memoryview(data)
        while view:
            written = os.write(self._master, view)
            view = view[written:]

    def read(self, limit: int = 4096) -> bytes:
        """Bytes the host sent to the device (blocks until some arrive)."""
        if self._master is None:
            raise RuntimeError("device is unplugged")
        return os.read(self._master, limit)

    def fileno(self) -> int:
        if self._master is None:
            raise RuntimeError("device is unplugged")
        return self._master

    def close(self) -> None:
        self.unplug()
