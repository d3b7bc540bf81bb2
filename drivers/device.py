"""The device seam: what the service asks of every reader driver and of the camera.

A device runs its own thread(s) and hands every engine input to its sink. The service
starts it, stops it, publishes its health and watches its progress for the systemd
watchdog, all through :class:`Device`: nothing outside a driver reads its private state.

:class:`HostCommands` is the extra a reader that takes host commands offers (the Angel
Eye ``LK``/``EC``/``GP`` commands): the service's ``lock``/``unlock`` go to every
device that has it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NotRequired, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

from common.inputs import EngineInput
from drivers.protocols.frames import CommandReply

Sink = Callable[[EngineInput], None]
"""Where a device hands each engine input it produces (called from the device's own thread)."""
Clock = Callable[[], float]
"""The wall clock a device stamps its inputs with."""
DeviceState = Literal["opening", "connected", "disconnected"]
"""A device's connection in its health block: ``opening`` from start until its first open
attempt has a result (a table just started is not a table whose reader is away: no alert)."""


class ReaderHealth(TypedDict):
    """A reader driver's health block, JSON-ready (published under ``health.devices.<name>``)."""

    driver: str
    device: str
    connected: bool
    state: DeviceState
    last_read_at: float | None
    reconnects: int
    bytes: int
    last_error: str | None
    running: bool
    frames: int
    duplicates: int
    rejects: int
    rescans: int
    notices: int
    discarded_partials: int
    url: NotRequired[str]  # serial readers: the pyserial URL they open


class CameraHealth(TypedDict):
    """The camera's health block, JSON-ready (published under ``health.devices.<name>``)."""

    connected: bool
    state: DeviceState
    last_frame_at: float | None
    last_read_at: float | None
    frames: int
    reads: int
    unknown: int
    rejects: int
    reconnects: int
    watchdog_trips: int
    stale_trips: int
    abandoned_captures: int
    last_error: str | None
    ended: bool


DeviceHealth = ReaderHealth | CameraHealth


@runtime_checkable
class Device(Protocol):
    """A card source the service runs: a reader driver or the camera."""

    def start(self) -> None:
        """Start the device's thread(s); idempotent."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread(s) within ``timeout`` seconds and close the device."""

    def health(self) -> DeviceHealth:
        """Connection state and counters (a copy, safe to publish)."""

    def last_progress(self) -> float | None:
        """``time.monotonic()`` of the device's last sign of life; None when it is not running.

        The watchdog withholds its pings once this falls ``service.watchdog_stall_s`` behind.
        """


@runtime_checkable
class HostCommands(Protocol):
    """A reader that takes host commands and answers each with an ACK or a NAK."""

    def send_command(
        self, type_code: Literal["LK", "EC", "GP"], data: int, *, timeout: float = 1.0
    ) -> CommandReply | None:
        """Send one command; the reader's reply, or None when it is offline or gave none."""


DeviceFactory = Callable[[BaseModel, Sink, Clock], Device]
"""How the registry builds a device: ``factory(settings, sink, clock)`` (not started)."""
