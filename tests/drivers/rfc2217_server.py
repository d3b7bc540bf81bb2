"""A small RFC 2217 serial server (pyserial's PortManager) in front of a pty, for driver tests."""

from __future__ import annotations

import contextlib
import socket
import threading

import serial
import serial.rfc2217


class PtySerial(serial.Serial):  # type: ignore[misc]
    """A pty opened as a serial port; a pty has no modem lines, so those are constant."""

    cts = dsr = ri = cd = property(lambda self: False)

    def _update_dtr_state(self) -> None:
        pass

    def _update_rts_state(self) -> None:
        pass

    def _update_break_state(self) -> None:
        pass


class Rfc2217Server:
    """Serves one pty over RFC 2217 to one client at a time on 127.0.0.1."""

    def __init__(self, pty_path: str) -> None:
        self.port = PtySerial(pty_path, timeout=0.05)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()[1]
        self.connection: socket.socket | None = None
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return f"rfc2217://127.0.0.1:{self.address}"

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        self.connection = conn
        manager = serial.rfc2217.PortManager(self.port, _Writer(conn))
        conn.settimeout(0.05)
        pump = threading.Thread(target=self._serial_to_net, args=(conn, manager), daemon=True)
        self._threads.append(pump)
        pump.start()
        while not self._stop.is_set():
            try:
                data = conn.recv(1024)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            self.port.write(b"".join(manager.filter(data)))

    def _serial_to_net(self, conn: socket.socket, manager: serial.rfc2217.PortManager) -> None:
        while not self._stop.is_set():
            try:
                data = self.port.read(256)
                if data:
                    conn.sendall(b"".join(manager.escape(data)))
            except (OSError, serial.SerialException):
                return

    def drop(self) -> None:
        """The serial server loses the client."""
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self.drop()
        self.server.close()
        for thread in self._threads:
            thread.join(5)
        self.port.close()


class _Writer:
    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._conn.sendall(data)
