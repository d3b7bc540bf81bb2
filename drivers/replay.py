"""Play a fixture back through the real driver code.

Serial fixtures are written into a pseudo-terminal that the real serial driver
opens like a device (through a symlink, so unplug/replug is a pty closed and a
new one behind the same path). USB fixtures are served by
:class:`~drivers.usb_replay.ReplayUsbBackend` to the real USB driver through
pyusb. The driver's clock is the fixture's time, so the inputs it produces (and
the engine events they cause) are the same on every run, as fast as possible or
in real time.

Before a supervisor command, an unplug or a tick, the replay waits until the
driver has consumed every byte written so far: the order of inputs is the
order of the fixture, never a race.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common.inputs import DeviceConnection, EngineInput, SupervisorCommand, Tick
from drivers.base import ReaderDriver
from drivers.device import ReaderHealth
from drivers.fixtures import Fixture, FixtureStep
from drivers.pty_device import PtyDevice
from drivers.registry import load

FAST_RECONNECT = {"initial_delay": 0.01, "max_delay": 0.05, "jitter": 0.2}
WAIT = 30.0


class ReplayError(RuntimeError):
    """The driver did not keep up or did not come back (names the step)."""


@dataclass
class ReplayResult:
    steps: int
    health: ReaderHealth


class FixtureClock:
    """The replay's notion of now: the time of the fixture step being played."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def set(self, t: float) -> None:
        with self._lock:
            self._now = t

    def __call__(self) -> float:
        with self._lock:
            return self._now


def _command(step: FixtureStep, index: int) -> SupervisorCommand:
    assert step.supervisor is not None
    sup = step.supervisor
    return SupervisorCommand(
        action=sup.action,
        at=step.t,
        actor=sup.actor,
        command_id=sup.command_id or f"fixture-step-{index}",
        args=dict(sup.args),
        issued_at=sup.issued_at,
    )


class _Pacer:
    def __init__(self, realtime: bool, speed: float, origin: float) -> None:
        self.realtime = realtime
        self.speed = speed
        self.origin = origin
        self.start = time.monotonic()

    def wait(self, t: float) -> None:
        if self.realtime:
            delay = self.start + (t - self.origin) / self.speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def replay_fixture(
    fixture: Fixture,
    sink: Callable[[EngineInput], None],
    *,
    realtime: bool = False,
    speed: float = 1.0,
    on_progress: Callable[[int, int], None] | None = None,
    final_tick: bool = True,
    on_restart: Callable[[float], None] | None = None,
) -> ReplayResult:
    """Replay ``fixture`` through its real driver into ``sink``; return the driver's health.

    At a ``restart`` step (the edge was down, serial fixtures only) the driver is stopped,
    ``on_restart(t)`` is called (the caller restores its engine from its journal) and a new
    driver opens the device, as a restarted daemon would.
    """
    if fixture.header.transport == "usb":
        return _replay_usb(fixture, sink, realtime, speed, on_progress=on_progress, final_tick=final_tick)
    return _replay_serial(
        fixture, sink, realtime, speed, on_progress=on_progress, final_tick=final_tick, on_restart=on_restart
    )


def _replay_serial(
    fixture: Fixture,
    sink: Callable[[EngineInput], None],
    realtime: bool,
    speed: float,
    *,
    on_progress: Callable[[int, int], None] | None,
    final_tick: bool,
    on_restart: Callable[[float], None] | None = None,
) -> ReplayResult:
    steps = fixture.steps
    clock = FixtureClock(steps[0].t if steps else 0.0)
    with tempfile.TemporaryDirectory(prefix="baccarat-replay-") as tmp:
        replay = _SerialReplay(fixture, PtyDevice(Path(tmp) / "shoe"), sink, clock)
        try:
            replay.open()
            pacer = _Pacer(realtime, speed, steps[0].t if steps else 0.0)
            for n, step in enumerate(steps, start=1):
                pacer.wait(step.t)
                replay.play(n, step, on_restart)
                if on_progress is not None:
                    on_progress(n, len(steps))
            replay.drained("")
            if final_tick and steps:
                sink(Tick(at=steps[-1].t + 60.0))
        finally:
            replay.close()
        health = replay.driver.health()
    return ReplayResult(steps=len(steps), health=health)


class _SerialReplay:
    """A serial fixture's device (a pty) and the real driver reading it, step by step."""

    def __init__(
        self, fixture: Fixture, device: PtyDevice, sink: Callable[[EngineInput], None], clock: FixtureClock
    ) -> None:
        self.fixture = fixture
        self.device = device
        self.sink = sink
        self.clock = clock
        self.written = 0
        self._stable_name = f"replay:{fixture.header.name}"
        self._driver_class = load(fixture.header.protocol)
        self._settings = {
            "url": device.path,
            "protocol": fixture.header.protocol_settings,
            "reconnect": FAST_RECONNECT,
        }
        self.driver = self._new_driver()

    def _stable_sink(self, item: EngineInput) -> None:
        # the temporary pty path differs on every run; the event stream must not
        if isinstance(item, DeviceConnection) and item.detail:
            item = item._replace(detail=item.detail.replace(self.device.path, self._stable_name))
        self.sink(item)

    def _new_driver(self) -> ReaderDriver:
        built = self._driver_class.build(self._settings, self._stable_sink, self.clock)
        if not isinstance(built, ReaderDriver):
            raise ReplayError(f"{self.fixture.header.protocol} is not a reader driver")
        built.start()
        return built

    def open(self) -> None:
        if not self.driver.wait_until_connected(True, WAIT):
            raise ReplayError(f"the serial driver did not open {self.device.path}")

    def drained(self, where: str) -> None:
        """Wait until the driver read every byte written so far."""
        if not self.driver.wait_until_received(self.written, WAIT):
            read = self.driver.health()["bytes"]
            raise ReplayError(f"{where}the driver read {read} of {self.written} bytes")

    def play(self, n: int, step: FixtureStep, on_restart: Callable[[float], None] | None) -> None:
        """Step ``n``: the previous bytes are decoded before the clock moves on (inputs carry
        their step's time), then the step's bytes, device event, command or tick."""
        self.drained(f"step {n}: ")
        self.clock.set(step.t)
        if step.data is not None:
            self.device.write(step.data)
            self.written += len(step.data)
        elif step.event is not None:
            self._device_event(n, step, on_restart)
        elif step.supervisor is not None:
            self.sink(_command(step, n))
        elif step.tick:
            self.sink(Tick(at=step.t))

    def _device_event(self, n: int, step: FixtureStep, on_restart: Callable[[float], None] | None) -> None:
        match step.event:
            case "unplug":
                self.device.unplug()
                if not self.driver.wait_until_connected(False, WAIT):
                    raise ReplayError(f"step {n}: the driver did not notice the unplug")
            case "replug":
                self.device.plug()
                if not self.driver.wait_until_connected(True, WAIT):
                    raise ReplayError(f"step {n}: the driver did not reopen {self.device.path}")
            case "restart":
                self.driver.stop()
                if on_restart is not None:
                    on_restart(step.t)
                self.driver, self.written = self._new_driver(), 0
                if not self.driver.wait_until_connected(True, WAIT):
                    raise ReplayError(f"step {n}: the restarted driver did not open {self.device.path}")

    def close(self) -> None:
        self.driver.stop()
        self.device.close()


def _replay_usb(
    fixture: Fixture,
    sink: Callable[[EngineInput], None],
    realtime: bool,
    speed: float,
    *,
    on_progress: Callable[[int, int], None] | None,
    final_tick: bool,
) -> ReplayResult:
    from drivers.usb_hid import UsbHidReader
    from drivers.usb_replay import ReplayUsbBackend, UsbStep

    header = fixture.header
    assert header.usb is not None
    steps = fixture.steps
    clock = FixtureClock(steps[0].t if steps else 0.0)
    device_steps = [
        UsbStep(t=s.t, report=s.report, event=s.event)
        for s in steps
        if s.report is not None or s.event is not None
    ]
    backend = ReplayUsbBackend(
        device_steps,
        vendor_id=header.usb.vendor_id,
        product_id=header.usb.product_id,
        serial_number=header.usb.serial_number,
        realtime=realtime,
        speed=speed,
        on_step=clock.set,
        limit=0,
    )
    settings = {
        "vendor_id": header.usb.vendor_id,
        "product_id": header.usb.product_id,
        "serial_number": header.usb.serial_number,
        "read_timeout_ms": 20,
        "reconnect": FAST_RECONNECT,
        "protocol": header.protocol_settings,
    }
    driver_class = load("usb_hid")
    driver = UsbHidReader(driver_class.validate(settings), sink, clock, backend=backend)  # type: ignore[arg-type]
    served = 0
    received = 0
    driver.start()
    try:
        for n, step in enumerate(steps, start=1):
            if step.report is not None or step.event is not None:
                served += 1
                received += len(step.report or b"")
            else:
                # let the device play up to here, and the driver decode it, before the command
                backend.allow(served)
                if not driver.wait_until_received(received, WAIT) or not backend.wait_served(served, WAIT):
                    raise ReplayError(
                        f"step {n}: the driver read {driver.health()['bytes']} of {received} bytes"
                    )
                clock.set(step.t)
                if step.supervisor is not None:
                    sink(_command(step, n))
                elif step.tick:
                    sink(Tick(at=step.t))
            if on_progress is not None:
                on_progress(n, len(steps))
        backend.allow(served)
        if not driver.wait_until_received(received, WAIT) or not backend.wait_served(served, WAIT):
            raise ReplayError(f"the driver read {driver.health()['bytes']} of {received} bytes")
        if final_tick and steps:
            sink(Tick(at=steps[-1].t + 60.0))
    finally:
        driver.stop()
    return ReplayResult(steps=len(steps), health=driver.health())
