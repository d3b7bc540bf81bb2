"""Drivers by name, imported only when configured (python-can style).

Each entry is a pair of ``"module:attribute"`` strings: the driver class and its
settings model. Nothing is imported until :func:`load` is asked for that name, so
a table with an Angel Eye shoe never imports pyusb or OpenCV.

Every driver class is a :class:`~drivers.device.Device` factory: ``cls(settings, sink,
clock)`` builds a device (not started) that runs its own thread and hands every engine
input to ``sink``; :func:`load` refuses a class that does not implement the protocol.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from drivers.device import Clock, Device, DeviceFactory, Sink

DRIVERS: dict[str, tuple[str, str]] = {
    "angel_eye": ("drivers.serial_reader:AngelEyeReader", "drivers.settings:AngelEyeReaderSettings"),
    "ascii_lines": ("drivers.serial_reader:AsciiLineReader", "drivers.settings:AsciiLineReaderSettings"),
    "usb_hid": ("drivers.usb_hid:UsbHidReader", "drivers.settings:UsbHidReaderSettings"),
    "camera": ("drivers.camera.source:CameraSource", "drivers.camera.source:CameraSettings"),
}


class UnknownDriverError(KeyError):
    """A configured driver name that is not in :data:`DRIVERS`."""

    def __str__(self) -> str:
        return f"unknown driver {self.args[0]!r}; known: {', '.join(sorted(DRIVERS))}"


@dataclass(frozen=True, slots=True)
class DriverClass:
    """A loaded driver: its class and its settings model."""

    name: str
    driver: DeviceFactory
    settings: type[BaseModel]

    def validate(self, settings: Mapping[str, Any] | BaseModel) -> BaseModel:
        """Validate a config section into this driver's settings model (pydantic errors name the key)."""
        if isinstance(settings, self.settings):
            return settings
        if isinstance(settings, BaseModel):
            settings = settings.model_dump()
        return self.settings.model_validate(dict(settings))

    def build(self, settings: Mapping[str, Any] | BaseModel, sink: Sink, clock: Clock) -> Device:
        """Validate ``settings`` and construct the device (not started)."""
        return self.driver(self.validate(settings), sink, clock)


def _import(target: str) -> object:
    module_name, _, attribute = target.partition(":")
    found: object = getattr(importlib.import_module(module_name), attribute)
    return found


def load(name: str) -> DriverClass:
    """Import and return the driver called ``name``."""
    entry = DRIVERS.get(name)
    if entry is None:
        raise UnknownDriverError(name)
    driver_path, settings_path = entry
    driver, settings = _import(driver_path), _import(settings_path)
    if not (isinstance(driver, type) and issubclass(driver, Device)):
        raise TypeError(f"{driver_path} does not implement drivers.device.Device")
    if not (isinstance(settings, type) and issubclass(settings, BaseModel)):
        raise TypeError(f"{settings_path} is not a settings model")
    return DriverClass(name=name, driver=driver, settings=settings)
