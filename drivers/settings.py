"""Settings of the reader drivers (pydantic, unknown keys refused).

The service embeds one of these per configured reader; the registry names which
model goes with which driver.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from common.backoff import Backoff
from drivers.protocols.angel_eye import AngelEyeSettings
from drivers.protocols.ascii_lines import AsciiLineSettings
from drivers.protocols.hid_wedge import HidWedgeSettings


class ReconnectSettings(BaseModel):
    """Exponential backoff with jitter between attempts to reopen a device that went away."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_delay: float = Field(default=0.5, gt=0, le=60, description="Seconds before the first retry.")
    max_delay: float = Field(default=30.0, gt=0, le=600, description="Cap of the delay between retries.")
    factor: float = Field(default=2.0, ge=1, le=10, description="Delay multiplier after each failed attempt.")
    jitter: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Each delay is scaled by a random factor in [1 - jitter, 1 + jitter].",
    )

    def backoff(self, rng: random.Random | None = None) -> Backoff:
        """The retry delays these settings describe (:class:`common.backoff.Backoff`)."""
        return Backoff.symmetric(
            self.initial_delay, self.max_delay, factor=self.factor, jitter=self.jitter, rng=rng
        )


class SerialReaderSettings(BaseModel):
    """A reader on a serial line: a device path, ``socket://host:port`` or ``rfc2217://host:port``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, description="Device path or pyserial URL.")
    device_name: str = Field(default="reader", min_length=1, description="Name carried by every input.")
    baudrate: int | None = Field(default=None, gt=0, description="Line speed; default per protocol.")
    bytesize: Literal[5, 6, 7, 8] = 8
    parity: Literal["N", "E", "O", "M", "S"] = "N"
    stopbits: float = Field(default=1, description="1, 1.5 or 2.")
    exclusive: bool = Field(default=True, description="Lock the port so a second process cannot read it.")
    read_timeout: float = Field(default=0.1, gt=0, le=5, description="Seconds one read waits for bytes.")
    reconnect: ReconnectSettings = Field(default_factory=ReconnectSettings)

    @field_validator("stopbits")
    @classmethod
    def _stopbits_known(cls, value: float) -> float:
        if value not in (1, 1.5, 2):
            raise ValueError("stop bits must be 1, 1.5 or 2")
        return value

    @field_validator("url")
    @classmethod
    def _no_secrets_in_url(cls, value: str) -> str:
        if "@" in value.split("://", 1)[-1].split("/", 1)[0]:
            raise ValueError("credentials in the device URL are not supported")
        return value


class AngelEyeReaderSettings(SerialReaderSettings):
    """An Angel Eye II-EX shoe (4800 8N1 unless set)."""

    protocol: AngelEyeSettings = Field(default_factory=AngelEyeSettings)


class AsciiLineReaderSettings(SerialReaderSettings):
    """A plain ASCII line reader (9600 8N1 unless set)."""

    protocol: AsciiLineSettings = Field(default_factory=AsciiLineSettings)


class UsbHidReaderSettings(BaseModel):
    """A USB HID keyboard-wedge reader found by VID:PID (and serial number)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor_id: int = Field(ge=0, le=0xFFFF, description="USB vendor id (YAML accepts 0x0c2e).")
    product_id: int = Field(ge=0, le=0xFFFF, description="USB product id.")
    serial_number: str | None = Field(default=None, description="Pick this unit when several are plugged in.")
    interface: int = Field(default=0, ge=0, le=255, description="HID interface number.")
    device_name: str = Field(default="reader", min_length=1, description="Name carried by every input.")
    read_timeout_ms: int = Field(
        default=100, ge=1, le=5000, description="One interrupt read waits this long."
    )
    detach_kernel_driver: bool = Field(
        default=True, description="Take the device from the kernel's keyboard driver."
    )
    reconnect: ReconnectSettings = Field(default_factory=ReconnectSettings)
    protocol: HidWedgeSettings = Field(default_factory=HidWedgeSettings)

    @field_validator("vendor_id", "product_id", mode="before")
    @classmethod
    def _hex_text(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return int(value, 16)  # USB ids are written in hex, with or without 0x
            except ValueError:
                raise ValueError(f"{value!r} is not a hexadecimal USB id") from None
        return value
