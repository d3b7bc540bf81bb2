"""Record a live device into a fixture, through the same driver the daemon uses.

The driver's tap sees every raw chunk (serial bytes, or one HID report) before it
is decoded, so a recording keeps exactly what the device sent, with its time,
including what the decoder rejected; the device going away and coming back is
recorded as ``unplug``/``replug`` steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from daemon.engine.inputs import DeviceConnection, EngineInput
from drivers.base import ReaderDriver
from drivers.fixtures import Fixture, FixtureHeader, FixtureStep, UsbIdentity


@dataclass
class Recorder:
    """Collects a driver's raw chunks and connection changes as fixture steps."""

    transport: str
    origin: float | None = None
    steps: list[FixtureStep] = field(default_factory=list)
    inputs: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _connected_once: bool = False

    def _t(self, at: float) -> float:
        if self.origin is None:
            self.origin = at
        return max(0.0, at - self.origin)

    def tap(self, data: bytes, at: float) -> None:
        with self._lock:
            t = self._t(at)
            if self.transport == "usb":
                self.steps.append(FixtureStep(t=t, report=data))
            else:
                self.steps.append(FixtureStep(t=t, data=data))

    def sink(self, item: EngineInput, forward: Callable[[EngineInput], None] | None = None) -> None:
        with self._lock:
            if isinstance(item, DeviceConnection):
                if item.connected and self._connected_once:
                    self.steps.append(FixtureStep(t=self._t(item.at), event="replug"))
                elif not item.connected and self._connected_once:
                    self.steps.append(FixtureStep(t=self._t(item.at), event="unplug", note=item.detail))
                self._connected_once = self._connected_once or item.connected
            else:
                self.inputs += 1
        if forward is not None:
            forward(item)

    def fixture(
        self,
        *,
        name: str,
        protocol: str,
        provenance: str,
        description: str = "",
        protocol_settings: dict[str, Any] | None = None,
        usb: UsbIdentity | None = None,
    ) -> Fixture:
        """The recording as a fixture (``origin: recorded``)."""
        with self._lock:
            steps = tuple(self.steps)
        header = FixtureHeader(
            name=name,
            description=description,
            protocol=protocol,  # type: ignore[arg-type]
            transport="usb" if protocol == "usb_hid" else "serial",
            origin="recorded",
            provenance=provenance,
            protocol_settings=protocol_settings or {},
            usb=usb,
        )
        return Fixture(header=header, steps=steps)


def attach(driver: ReaderDriver, recorder: Recorder) -> None:
    """Make ``driver`` report its raw chunks to ``recorder`` (call before ``start``)."""
    driver.tap = recorder.tap
