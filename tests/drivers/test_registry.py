"""Driver registry: names resolve lazily; pyusb and OpenCV load only when configured."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from pydantic import ValidationError

from drivers import registry
from tests.conftest import REPO_ROOT


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
