"""USB HID keyboard-wedge reader through pyusb (imported only when this driver is configured).

The reader is found by VID:PID (and serial number when several are plugged in),
taken from the kernel's keyboard driver, its interface claimed, and its
interrupt IN endpoint read report by report. When it is unplugged (ENODEV,
"No such device") the half-typed code is discarded, the sink gets
``DeviceConnection(connected=False)``, and the driver looks for it again with
backoff and jitter until it is plugged back in.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, ClassVar

import usb.core
import usb.util

from drivers.base import ReaderDriver
from drivers.device import Clock, Sink
from drivers.protocols.hid_wedge import HidWedgeDecoder
from drivers.settings import UsbHidReaderSettings


def _serial_of(dev: Any) -> str | None:
    try:
        serial: str | None = dev.serial_number
    except (usb.core.USBError, ValueError, NotImplementedError):
        return None
    return serial


class UsbHidReader(ReaderDriver):
    """Keyboard-wedge card reader on USB."""

    kind = "usb_hid"
    settings_model: ClassVar[type[UsbHidReaderSettings]] = UsbHidReaderSettings

    def __init__(
        self,
        settings: UsbHidReaderSettings,
        sink: Sink,
        clock: Clock,
        *,
        backend: Any = None,
        rng: random.Random | None = None,
    ) -> None:
        decoder = HidWedgeDecoder(settings.protocol, device=settings.device_name)
        super().__init__(device=settings.device_name, decoder=decoder, sink=sink, clock=clock)
        self.settings = settings
        self.hid_decoder = decoder
        self._backend = backend
        self._backoff = settings.reconnect.backoff(rng)

    @property
    def ids(self) -> str:
        s = self.settings
        return f"{s.vendor_id:04x}:{s.product_id:04x}" + (
            f" serial {s.serial_number}" if s.serial_number else ""
        )

    def _find(self) -> Any:
        s = self.settings
        if s.serial_number is None:
            return usb.core.find(idVendor=s.vendor_id, idProduct=s.product_id, backend=self._backend)
        wanted = s.serial_number
        return usb.core.find(
            idVendor=s.vendor_id,
            idProduct=s.product_id,
            backend=self._backend,
            custom_match=lambda d: _serial_of(d) == wanted,
        )

    def _claim(self, dev: Any) -> Any:
        number = self.settings.interface
        if self.settings.detach_kernel_driver:
            try:
                if dev.is_kernel_driver_active(number):
                    dev.detach_kernel_driver(number)
            except NotImplementedError:
                pass  # platforms without kernel drivers to detach
        try:
            cfg = dev.get_active_configuration()
        except usb.core.USBError:
            dev.set_configuration()
            cfg = dev.get_active_configuration()
        usb.util.claim_interface(dev, number)
        intf = cfg[(number, 0)]
        ep = usb.util.find_descriptor(
            intf,
            custom_match=lambda e: (
                usb.util.endpoint_direction(e.bEndpointAddress) == usb.util.ENDPOINT_IN
                and usb.util.endpoint_type(e.bmAttributes) == usb.util.ENDPOINT_TYPE_INTR
            ),
        )
        if ep is None:
            raise ValueError(f"interface {number} of {self.ids} has no interrupt IN endpoint")
        return ep

    def _run(self) -> None:
        while not self._stop.is_set():
            self._turned()
            dev: Any = None
            try:
                dev = self._find()
                if dev is None:
                    self._mark_disconnected(f"no USB device {self.ids}")
                    self._wait(self._backoff.next_delay())
                    continue
                ep = self._claim(dev)
            except (usb.core.USBError, ValueError, KeyError) as exc:
                self._release(dev)
                self._open_failed(f"cannot open USB device {self.ids}", exc)
                self._wait(self._backoff.next_delay())
                continue
            self._backoff.reset()
            self._mark_connected(f"claimed {self.ids} interface {self.settings.interface}")
            try:
                self._read_until_error(ep)
            except usb.core.USBError as exc:
                self._discard_partial()
                self._mark_disconnected(f"USB device {self.ids}: {exc}")
                self._wait(self._backoff.next_delay())
            finally:
                self._release(dev)

    def _read_until_error(self, ep: Any) -> None:
        size = max(int(ep.wMaxPacketSize), self.settings.protocol.report_length)
        timeout = self.settings.read_timeout_ms
        while not self._stop.is_set():
            self._turned()
            try:
                data = ep.read(size, timeout)
            except usb.core.USBTimeoutError:
                continue
            report = bytes(data)
            at = self._clock()
            self._raw(report, at)
            self._deliver(self.hid_decoder.feed_report(report, at), len(report))

    def _release(self, dev: Any) -> None:
        if dev is None:
            return
        with contextlib.suppress(usb.core.USBError, ValueError):  # already gone
            usb.util.release_interface(dev, self.settings.interface)
        usb.util.dispose_resources(dev)
