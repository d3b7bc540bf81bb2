"""Record a live device into a fixture, through the same driver the daemon uses.

The driver's tap sees every raw chunk (serial bytes, or one HID report) before it
is decoded, so a recording keeps exactly what the device sent, with its time,
including what the decoder rejected; the device going away and coming back is
recorded as ``unplug``/``replug`` steps.

With a :class:`FixtureWriter` the fixture is written as it is captured: the header
first, then every step as one whole line the moment it arrives. A recorder that is
killed, or crashes, leaves a fixture that loads with everything captured until then.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.inputs import DeviceConnection, EngineInput
from drivers.base import ReaderDriver
from drivers.fixtures import Fixture, FixtureHeader, FixtureStep, UsbIdentity


class FixtureWriter:
    """Writes a fixture file line by line: the header at once, then each step as it comes.

    Each line goes out in ``os.write`` calls of its own, unbuffered, so the file never
    holds a step the process still had in memory: whatever kills the recorder, the file
    ends with whole lines (a header and the steps captured so far) and loads as a fixture.
    """

    def __init__(self, path: Path, header: FixtureHeader) -> None:
        """Create (or replace) ``path`` and write the header; OSError if it cannot be written."""
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.steps = 0
        self._line(json.dumps(header.model_dump(exclude_none=True), sort_keys=True))

    def _line(self, text: str) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        data = (text + "\n").encode("utf-8")
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    def write_step(self, step: FixtureStep) -> None:
        self._line(step.to_json())
        self.steps += 1

    def close(self) -> None:
        """Flush to disk and close (idempotent)."""
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = None


@dataclass
class Recorder:
    """Collects a driver's raw chunks and connection changes as fixture steps.

    With ``writer`` each step is also written to the fixture file as it is recorded.
    """

    transport: str
    origin: float | None = None
    steps: list[FixtureStep] = field(default_factory=list)
    inputs: int = 0
    writer: FixtureWriter | None = None
    write_error: OSError | None = None
    """Set when the writer failed; later steps are kept in memory only."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _connected_once: bool = False

    def _add(self, step: FixtureStep) -> None:
        """Keep one step (caller holds the lock, so the file's order is the recording's)."""
        self.steps.append(step)
        if self.writer is not None:
            try:
                self.writer.write_step(step)
            except OSError as exc:  # disk full, I/O error: the file keeps its whole lines so far
                self.write_error = exc
                self.writer = None

    def _t(self, at: float) -> float:
        if self.origin is None:
            self.origin = at
        return max(0.0, at - self.origin)

    def tap(self, data: bytes, at: float) -> None:
        with self._lock:
            t = self._t(at)
            if self.transport == "usb":
                self._add(FixtureStep(t=t, report=data))
            else:
                self._add(FixtureStep(t=t, data=data))

    def sink(self, item: EngineInput, forward: Callable[[EngineInput], None] | None = None) -> None:
        with self._lock:
            if isinstance(item, DeviceConnection):
                if item.connected and self._connected_once:
                    self._add(FixtureStep(t=self._t(item.at), event="replug"))
                elif not item.connected and self._connected_once:
                    self._add(FixtureStep(t=self._t(item.at), event="unplug", note=item.detail))
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
        header = recorded_header(
            name=name,
            protocol=protocol,
            provenance=provenance,
            description=description,
            protocol_settings=protocol_settings,
            usb=usb,
        )
        return Fixture(header=header, steps=steps)


def recorded_header(
    *,
    name: str,
    protocol: str,
    provenance: str,
    description: str = "",
    protocol_settings: dict[str, Any] | None = None,
    usb: UsbIdentity | None = None,
) -> FixtureHeader:
    """The header of a live recording (``origin: recorded``); ValidationError on a bad name."""
    return FixtureHeader(
        name=name,
        description=description,
        protocol=protocol,  # type: ignore[arg-type]
        transport="usb" if protocol == "usb_hid" else "serial",
        origin="recorded",
        provenance=provenance,
        protocol_settings=protocol_settings or {},
        usb=usb,
    )


def attach(driver: ReaderDriver, recorder: Recorder) -> None:
    """Make ``driver`` report its raw chunks to ``recorder`` (call before ``start``)."""
    driver.tap = recorder.tap
