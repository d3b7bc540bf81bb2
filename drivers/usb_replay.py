"""A pyusb backend that serves recorded HID reports: replay and tests through the real pyusb path.

``usb.core.find(backend=ReplayUsbBackend(...))`` enumerates one virtual
keyboard-wedge reader (descriptors, string descriptors with its serial number,
one HID interface with an interrupt IN endpoint); ``intr_read`` returns the
scripted reports in order. Script steps can unplug the device (reads then fail
with ENODEV and it disappears from enumeration) and plug it back in (it
re-enumerates at a new address). Time is either real (reports are served at
their recorded offsets) or as fast as the reader asks.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import usb.backend
import usb.core

GET_DESCRIPTOR = 0x06
DESC_TYPE_STRING = 0x03
ENDPOINT_IN = 0x81
HID_CLASS = 0x03
LANG_EN_US = 0x0409


@dataclass(frozen=True, slots=True)
class UsbStep:
    """One scripted moment: a report arrives, or the device is unplugged/replugged."""

    t: float
    report: bytes | None = None
    event: str | None = None  # "unplug" or "replug"


@dataclass(frozen=True, slots=True)
class _DeviceId:
    address: int


class ReplayUsbBackend(usb.backend.IBackend):  # type: ignore[misc]
    """Serves ``steps`` to whoever reads the interrupt endpoint of the one virtual device."""

    def __init__(
        self,
        steps: Sequence[UsbStep],
        *,
        vendor_id: int,
        product_id: int,
        serial_number: str = "SIM0001",
        realtime: bool = False,
        packet_size: int = 8,
        kernel_driver_bound: bool = True,
        speed: float = 1.0,
        on_step: Callable[[float], None] | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__()
        self.steps = list(steps)
        self.vendor_id = vendor_id
        self.product_id = product_id
        self.serial_number = serial_number
        self.realtime = realtime
        self.speed = speed
        self.on_step = on_step
        self._limit = limit
        self.packet_size = packet_size
        self._strings = {1: "baccarat-edge", 2: "Virtual card reader", 3: serial_number}
        self._lock = threading.Condition()
        self._next = 0
        self._address = 1
        self._plugged = True
        self._kernel_driver = kernel_driver_bound
        self._claimed: set[int] = set()
        self._started_at: float | None = None
        self._origin = 0.0
        self.current_t = 0.0
        self.served = 0
        self.detach_calls = 0
        self.claim_calls = 0

    # -- script progress -------------------------------------------------------------

    @property
    def finished(self) -> bool:
        with self._lock:
            return self._next >= len(self.steps)

    def allow(self, count: int) -> None:
        """Serve steps up to ``count`` (gated replay: the caller injects commands in between)."""
        with self._lock:
            self._limit = count
            self._lock.notify_all()

    def wait_served(self, count: int, timeout: float) -> bool:
        """Block until ``count`` steps have been served."""
        with self._lock:
            return self._lock.wait_for(lambda: self._next >= count, timeout)

    def wait_finished(self, timeout: float) -> bool:
        """Block until every step has been served."""
        with self._lock:
            return self._lock.wait_for(lambda: self._next >= len(self.steps), timeout)

    def _wait_due(self, step: UsbStep) -> None:
        if not self.realtime:
            return
        if self._started_at is None:
            self._started_at = time.monotonic()
            self._origin = step.t
        delay = self._started_at + (step.t - self._origin) / self.speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def _advance(self, step: UsbStep) -> None:
        if self.on_step is not None:
            self.on_step(step.t)
        with self._lock:
            self._next += 1
            self.current_t = step.t
            self._lock.notify_all()

    def _peek(self, wait: float = 0.0) -> UsbStep | None:
        """The next step to serve, waiting up to ``wait`` seconds for the gate to open."""
        with self._lock:
            self._lock.wait_for(lambda: self._limit is None or self._next < self._limit, wait)
            if self._limit is not None and self._next >= self._limit:
                return None
            return self.steps[self._next] if self._next < len(self.steps) else None

    # -- enumeration and descriptors --------------------------------------------------

    def enumerate_devices(self) -> Iterator[_DeviceId]:
        step = self._peek()
        if not self._plugged and step is not None and step.event == "replug":
            self._wait_due(step)
            with self._lock:
                self._plugged = True
                self._address += 1
                self._kernel_driver = True  # the kernel grabs a freshly plugged keyboard
            self._advance(step)
        if self._plugged:
            yield _DeviceId(self._address)

    def get_device_descriptor(self, dev: _DeviceId) -> SimpleNamespace:
        return SimpleNamespace(
            bLength=18, bDescriptorType=1, bcdUSB=0x0200, bDeviceClass=0, bDeviceSubClass=0,
            bDeviceProtocol=0, bMaxPacketSize0=8, idVendor=self.vendor_id, idProduct=self.product_id,
            bcdDevice=0x0100, iManufacturer=1, iProduct=2, iSerialNumber=3, bNumConfigurations=1,
            address=dev.address, bus=1, port_number=1, port_numbers=(1,), speed=2,
        )  # fmt: skip

    def get_configuration_descriptor(self, dev: _DeviceId, config: int) -> SimpleNamespace:
        return SimpleNamespace(
            bLength=9, bDescriptorType=2, wTotalLength=34, bNumInterfaces=1, bConfigurationValue=1,
            iConfiguration=0, bmAttributes=0xA0, bMaxPower=50, extra_descriptors=[],
        )  # fmt: skip

    def get_interface_descriptor(self, dev: _DeviceId, intf: int, alt: int, config: int) -> SimpleNamespace:
        return SimpleNamespace(
            bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=1,
            bInterfaceClass=HID_CLASS, bInterfaceSubClass=1, bInterfaceProtocol=1, iInterface=0,
            extra_descriptors=[],
        )  # fmt: skip

    def get_endpoint_descriptor(
        self, dev: _DeviceId, ep: int, intf: int, alt: int, config: int
    ) -> SimpleNamespace:
        return SimpleNamespace(
            bLength=7, bDescriptorType=5, bEndpointAddress=ENDPOINT_IN, bmAttributes=0x03,
            wMaxPacketSize=self.packet_size, bInterval=10, bRefresh=0, bSynchAddress=0, extra_descriptors=[],
        )  # fmt: skip

    # -- handles, configuration, interfaces ----------------------------------------

    def _check(self, handle: _DeviceId) -> None:
        with self._lock:
            if not self._plugged or handle.address != self._address:
                raise usb.core.USBError("No such device (it may have been disconnected)", None, errno.ENODEV)

    def open_device(self, dev: _DeviceId) -> _DeviceId:
        self._check(dev)
        return dev

    def close_device(self, dev_handle: _DeviceId) -> None:
        with self._lock:
            self._claimed.clear()

    def set_configuration(self, dev_handle: _DeviceId, config_value: int) -> None:
        self._check(dev_handle)

    def get_configuration(self, dev_handle: _DeviceId) -> int:
        self._check(dev_handle)
        return 1

    def set_interface_altsetting(self, dev_handle: _DeviceId, intf: int, altsetting: int) -> None:
        self._check(dev_handle)

    def claim_interface(self, dev_handle: _DeviceId, intf: int) -> None:
        self._check(dev_handle)
        with self._lock:
            if self._kernel_driver:
                raise usb.core.USBError("Resource busy", None, errno.EBUSY)
            self._claimed.add(intf)
            self.claim_calls += 1

    def release_interface(self, dev_handle: _DeviceId, intf: int) -> None:
        with self._lock:
            self._claimed.discard(intf)

    def is_kernel_driver_active(self, dev_handle: _DeviceId, intf: int) -> bool:
        self._check(dev_handle)
        with self._lock:
            return self._kernel_driver

    def detach_kernel_driver(self, dev_handle: _DeviceId, intf: int) -> None:
        self._check(dev_handle)
        with self._lock:
            self._kernel_driver = False
            self.detach_calls += 1

    def attach_kernel_driver(self, dev_handle: _DeviceId, intf: int) -> None:
        with self._lock:
            self._kernel_driver = True

    def ctrl_transfer(
        self, dev_handle: _DeviceId, bmRequestType: int, bRequest: int, wValue: int, wIndex: int, data: Any,
        timeout: int,
    ) -> int:  # fmt: skip
        self._check(dev_handle)
        if bRequest != GET_DESCRIPTOR or wValue >> 8 != DESC_TYPE_STRING:
            return 0  # class requests (HID SET_IDLE ...) are accepted and ignored
        index = wValue & 0xFF
        if index == 0:
            payload = LANG_EN_US.to_bytes(2, "little")
        else:
            payload = self._strings.get(index, "").encode("utf-16-le")
        descriptor = bytes([2 + len(payload), DESC_TYPE_STRING]) + payload
        n = min(len(descriptor), len(data))
        data[:n] = type(data)(data.typecode, descriptor[:n])
        return n

    # -- the interrupt endpoint ----------------------------------------------------

    def intr_read(self, dev_handle: _DeviceId, ep: int, intf: int, buff: Any, timeout: int) -> int:
        self._check(dev_handle)
        with self._lock:
            if intf not in self._claimed:
                raise usb.core.USBError("Interface not claimed", None, errno.EBUSY)
        pause = min(timeout, 50) / 1000
        step = self._peek(wait=pause)
        if step is None or step.event == "replug":
            with self._lock:
                waited_at_gate = self._limit is not None and self._next < len(self.steps)
            if not waited_at_gate:
                time.sleep(pause)  # nothing left to serve: behave like an idle endpoint
            raise usb.core.USBTimeoutError("Operation timed out", None, errno.ETIMEDOUT)
        self._wait_due(step)
        if step.event == "unplug":
            with self._lock:
                self._plugged = False
            self._advance(step)
            raise usb.core.USBError("No such device (it may have been disconnected)", None, errno.ENODEV)
        report = step.report or b""
        n = min(len(report), len(buff))
        buff[:n] = type(buff)(buff.typecode, report[:n])
        with self._lock:
            self.served += 1
        self._advance(step)
        return n
