"""systemd ``sd_notify`` over ``$NOTIFY_SOCKET`` with a plain datagram socket.

No dependency on libsystemd: the protocol is one datagram of newline-separated
``KEY=VALUE`` assignments sent to a unix socket whose path (or abstract name,
when it starts with ``@``) is in ``$NOTIFY_SOCKET``. Outside systemd the variable
is unset and every call is a cheap no-op.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping


class SystemdNotifier:
    """Sends READY/WATCHDOG/STOPPING/STATUS notifications to the service manager."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._address = _socket_address(env.get("NOTIFY_SOCKET", ""))
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        watchdog_usec = env.get("WATCHDOG_USEC", "")
        watchdog_pid = env.get("WATCHDOG_PID", "")
        self.watchdog_interval: float | None = None
        for_us = not watchdog_pid or watchdog_pid == str(os.getpid())
        if watchdog_usec.isdigit() and int(watchdog_usec) > 0 and for_us:
            self.watchdog_interval = int(watchdog_usec) / 1_000_000

    @property
    def enabled(self) -> bool:
        """True when running under a service manager that listens for notifications."""
        return self._address is not None

    def notify(self, **fields: str) -> bool:
        """Send ``KEY=VALUE`` lines (keys upper-cased); False when disabled or the send failed."""
        if self._address is None:
            return False
        message = "\n".join(f"{key.upper()}={value}" for key, value in fields.items()).encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                    self._sock.setblocking(False)
                self._sock.sendto(message, self._address)
            except OSError:
                # The manager went away or is busy; a missed ping is handled by systemd itself.
                return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Local setup is done (devices opened, state restored); the broker may still be away."""
        fields = {"READY": "1", "MAINPID": str(os.getpid())}
        if status:
            fields["STATUS"] = status
        return self.notify(**fields)

    def watchdog(self) -> bool:
        """Keep-alive ping: only call while every worker shows progress."""
        return self.notify(WATCHDOG="1")

    def stopping(self, status: str | None = None) -> bool:
        fields = {"STOPPING": "1"}
        if status:
            fields["STATUS"] = status
        return self.notify(**fields)

    def reloading(self) -> bool:
        return self.notify(RELOADING="1")

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def extend_timeout(self, seconds: float, status: str) -> bool:
        """Start-up is making progress but needs longer (``EXTEND_TIMEOUT_USEC``: systemd then
        waits ``seconds`` more from now instead of killing it at ``TimeoutStartSec``)."""
        return self.notify(EXTEND_TIMEOUT_USEC=str(int(seconds * 1_000_000)), STATUS=status)

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def _socket_address(value: str) -> str | None:
    if not value:
        return None
    if value.startswith("@"):
        # Abstract namespace: the leading '@' stands for a NUL byte.
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    # vsock addresses (vsock:CID:PORT) are for VMs; a table PC never uses them.
    return None
