"""Serial-line readers (Angel Eye II-EX, ASCII line readers) through pyserial.

Any URL pyserial's ``serial_for_url`` supports works: a device path, a udev
symlink such as ``/dev/baccarat-shoe``, ``socket://host:port`` for a serial
server, ``rfc2217://host:port``. The port is opened exclusively. When the device
disappears (pyserial's "device reports readiness to read but returned no data",
any ``SerialException`` or ``OSError``) the partial frame is discarded, the sink
gets ``DeviceConnection(connected=False)``, and the port is reopened with
exponential backoff and jitter.
"""

from __future__ import annotations

import random
import threading
from typing import Any, ClassVar, Literal

import serial

from drivers.base import ReaderDriver
from drivers.device import Clock, ReaderHealth, Sink
from drivers.protocols.angel_eye import AngelEyeDecoder, encode_command
from drivers.protocols.ascii_lines import AsciiLineDecoder
from drivers.protocols.frames import CommandReply, Decoder
from drivers.settings import AngelEyeReaderSettings, AsciiLineReaderSettings, SerialReaderSettings

READ_CHUNK = 4096


class SerialReader(ReaderDriver):
    """A reader on a serial line; subclasses pick the protocol."""

    default_baudrate: ClassVar[int] = 9600
    settings_model: ClassVar[type[SerialReaderSettings]] = SerialReaderSettings

    def __init__(
        self,
        settings: SerialReaderSettings,
        sink: Sink,
        clock: Clock,
        *,
        decoder: Decoder,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(device=settings.device_name, decoder=decoder, sink=sink, clock=clock)
        self.settings = settings
        self._backoff = settings.reconnect.backoff(rng)
        self._port: Any = None
        self._write_lock = threading.Lock()

    def _open(self) -> Any:
        s = self.settings
        port = serial.serial_for_url(s.url, do_not_open=True)
        port.baudrate = s.baudrate or self.default_baudrate
        port.bytesize = s.bytesize
        port.parity = s.parity
        port.stopbits = s.stopbits
        port.timeout = s.read_timeout
        if hasattr(port, "exclusive"):
            port.exclusive = s.exclusive
        port.open()
        return port

    def _run(self) -> None:
        url = self.settings.url
        while not self._stop.is_set():
            self._turned()
            try:
                port = self._open()
            except (serial.SerialException, OSError, ValueError) as exc:
                self._open_failed(f"cannot open {url}", exc)
                self._wait(self._backoff.next_delay())
                continue
            self._backoff.reset()
            with self._write_lock:
                self._port = port
            self._mark_connected(f"opened {url}")
            try:
                self._read_until_error(port)
            except (serial.SerialException, OSError) as exc:
                self._discard_partial()
                self._mark_disconnected(f"{url}: {exc}")
                self._wait(self._backoff.next_delay())
            finally:
                with self._write_lock:
                    self._port = None
                port.close()

    def _read_until_error(self, port: Any) -> None:
        while not self._stop.is_set():
            self._turned()
            data: bytes = port.read(1)  # returns empty after read_timeout on an idle shoe
            if not data:
                continue
            waiting = port.in_waiting
            if waiting:
                data += port.read(min(waiting, READ_CHUNK))
            at = self._clock()
            self._raw(data, at)
            self._deliver(self.decoder.feed(data, at), len(data))

    def write(self, data: bytes) -> bool:
        """Send bytes to the device; False when it is not connected."""
        with self._write_lock:
            if self._port is None:
                return False
            try:
                self._port.write(data)
                self._port.flush()
            except (serial.SerialException, OSError):
                return False
            return True

    def health(self) -> ReaderHealth:
        """The reader's health with the URL it opens."""
        health = super().health()
        health["url"] = self.settings.url
        return health


class AngelEyeReader(SerialReader):
    """Angel Eye II-EX shoe on a serial line; can lock, unlock, clear errors and confirm games."""

    kind = "angel_eye"
    default_baudrate = 4800
    settings_model = AngelEyeReaderSettings

    def __init__(
        self, settings: AngelEyeReaderSettings, sink: Sink, clock: Clock, *, rng: random.Random | None = None
    ) -> None:
        super().__init__(
            settings,
            sink,
            clock,
            decoder=AngelEyeDecoder(settings.protocol, device=settings.device_name),
            rng=rng,
        )
        self.protocol_settings = settings.protocol

    def send_command(
        self, type_code: Literal["LK", "EC", "GP"], data: int, *, timeout: float = 1.0
    ) -> CommandReply | None:
        """Send a host command and wait for the shoe's ACK/NAK; None when no reply came (or offline).

        ``("LK", 2)`` locks, ``("LK", 1)`` unlocks, ``("EC", n)`` clears error n,
        ``("GP", 0)`` confirms the game result.
        """
        frame = encode_command(
            type_code, data, bcc_includes_stx=self.protocol_settings.command_bcc_includes_stx
        )
        self._clear_replies()
        if not self.write(frame):
            return None
        return self._take_reply(timeout)


class AsciiLineReader(SerialReader):
    """Plain ASCII line reader on a serial line."""

    kind = "ascii_lines"
    default_baudrate = 9600
    settings_model = AsciiLineReaderSettings

    def __init__(
        self, settings: AsciiLineReaderSettings, sink: Sink, clock: Clock, *, rng: random.Random | None = None
    ) -> None:
        super().__init__(
            settings,
            sink,
            clock,
            decoder=AsciiLineDecoder(settings.protocol, device=settings.device_name),
            rng=rng,
        )
