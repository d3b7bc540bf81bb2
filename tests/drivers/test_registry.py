"""Driver registry: names resolve lazily; pyusb and OpenCV load only when configured; every
registered driver is a ``drivers.device.Device`` and runs through that protocol alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from common.inputs import CardRead, DeviceConnection
from drivers import registry
from drivers.device import Device, HostCommands
from drivers.protocols.angel_eye_codec import encode_frame
from drivers.pty_device import PtyDevice
from tests.conftest import REPO_ROOT
from tests.drivers.collect import Collector, clock

FAST = {"initial_delay": 0.02, "max_delay": 0.1, "jitter": 0.5}


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_serial_drivers_do_not_import_pyusb_or_opencv() -> None:
    out = run_python(
        """
        import sys
        from drivers import registry
        for name in ("angel_eye", "ascii_lines"):
            registry.load(name).build({"url": "/dev/null-shoe"}, lambda item: None, lambda: 0.0)
        import drivers.protocols, drivers.simulate, drivers.fixtures, daemon.cli
        daemon.cli.build_parser()
        print(sorted(m for m in ("usb", "usb.core", "cv2", "numpy") if m in sys.modules))
        """
    )
    assert out == "[]"


def test_usb_driver_imports_pyusb_only_when_loaded() -> None:
    out = run_python(
        """
        import sys
        from drivers import registry
        before = "usb.core" in sys.modules
        registry.load("usb_hid")
        print(before, "usb.core" in sys.modules, "cv2" in sys.modules)
        """
    )
    assert out == "False True False"


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(registry.UnknownDriverError) as info:
        registry.load("angel_ey")
    assert str(info.value) == "unknown driver 'angel_ey'; known: angel_eye, ascii_lines, camera, usb_hid"


def test_settings_validated_with_the_key_named() -> None:
    angel_eye = registry.load("angel_eye")
    with pytest.raises(ValidationError, match=r"protocol\.dedup_window"):
        angel_eye.validate({"url": "/dev/ttyUSB0", "protocol": {"dedup_window": 0}})
    usb_hid = registry.load("usb_hid")
    settings = usb_hid.validate({"vendor_id": "0x0c2e", "product_id": "0b61"})
    assert settings.model_dump()["vendor_id"] == 0x0C2E
    with pytest.raises(ValidationError, match="vendor_id"):
        usb_hid.validate({"vendor_id": "zz", "product_id": 1})


def test_camera_name_resolves_to_the_camera_helpers_driver_and_loads_opencv_then() -> None:
    out = run_python(
        """
        import sys
        from drivers import registry
        camera = registry.load("camera")
        print(camera.driver.__name__, camera.settings.__name__, "cv2" in sys.modules)
        """
    )
    assert out == "CameraSource CameraSettings True"


@pytest.mark.parametrize("name", sorted(registry.DRIVERS))
def test_every_registered_driver_class_implements_the_device_protocol(name: str) -> None:
    driver = registry.load(name).driver
    assert isinstance(driver, type)
    assert issubclass(driver, Device)
    assert issubclass(driver, HostCommands) is (name == "angel_eye")  # the only one taking LK


def test_a_class_that_is_not_a_device_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        registry.DRIVERS,
        "not_a_device",
        ("drivers.pty_device:PtyDevice", "drivers.settings:SerialReaderSettings"),
    )
    with pytest.raises(TypeError, match=r"does not implement drivers\.device\.Device"):
        registry.load("not_a_device")


@pytest.mark.parametrize(
    ("name", "frame"),
    [("angel_eye", encode_frame(ord("1"), "D", bytes([0x81, 0xB8]))), ("ascii_lines", b"S08\r\n")],
)
def test_a_serial_reader_runs_through_the_device_protocol(tmp_path: Path, name: str, frame: bytes) -> None:
    shoe = PtyDevice(tmp_path / "baccarat-shoe")
    sink = Collector()
    device: Device = registry.load(name).build({"url": shoe.path, "reconnect": FAST}, sink, clock)
    try:
        assert device.last_progress() is None  # not started
        device.start()
        assert sink.wait_for(
            lambda items: any(isinstance(i, DeviceConnection) and i.connected for i in items)
        )
        shoe.write(frame)
        assert sink.wait_for(lambda items: any(isinstance(i, CardRead) for i in items))
        assert sink.cards() == ["8s"]
        assert device.last_progress() is not None
        health = dict(device.health())  # the JSON block the service publishes
        assert (health["connected"], health["running"], health["frames"]) == (True, True, 1)
        assert health["url"] == shoe.path
    finally:
        device.stop()
        shoe.close()
    assert device.last_progress() is None
    assert dict(device.health())["running"] is False


def test_the_usb_reader_runs_through_the_device_protocol_with_no_unit_plugged_in() -> None:
    sink = Collector()
    device = registry.load("usb_hid").build(
        {"vendor_id": "0xfff0", "product_id": "0xfff1", "reconnect": FAST}, sink, clock
    )
    try:
        assert device.last_progress() is None
        device.start()
        assert sink.wait_for(lambda items: any(isinstance(i, DeviceConnection) for i in items))
        assert sink.connections() == [False]
        assert device.last_progress() is not None  # waiting to reconnect is progress
        health = device.health()
        assert health["connected"] is False
        assert health["last_error"] is not None
    finally:
        device.stop()
    assert device.last_progress() is None
