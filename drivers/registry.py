"""Drivers by name, imported only when configured (python-can style).

Each entry is a pair of ``"module:attribute"`` strings: the driver class and its
settings model. Nothing is imported until :func:`load` is asked for that name, so
a table with an Angel Eye shoe never imports pyusb or OpenCV.

Runtime contract of a driver class: ``cls(settings, sink, clock)`` with
``start()``, ``stop()``, ``health() -> dict``; it runs its own thread and hands
every engine input to ``sink``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

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
    driver: Callable[..., Any]
    settings: type[BaseModel]

    def validate(self, settings: Mapping[str, Any] | BaseModel) -> BaseModel:
        """Validate a config section into this driver's settings model (pydantic errors name the key)."""
        if isinstance(settings, self.settings):
            return settings
        if isinstance(settings, BaseModel):
            settings = settings.model_dump()
        return self.settings.model_validate(dict(settings))

    def build(
        self, settings: Mapping[str, Any] | BaseModel, sink: Callable[[Any], None], clock: Callable[[], float]
    ) -> Any:
        """Validate ``settings`` and construct the driver (not started)."""
        return self.driver(self.validate(settings), sink, clock)


def _import(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def load(name: str) -> DriverClass:
    """Import and return the driver called ``name``."""
    entry = DRIVERS.get(name)
    if entry is None:
        raise UnknownDriverError(name)
    driver, settings = entry
    return DriverClass(name=name, driver=_import(driver), settings=_import(settings))
