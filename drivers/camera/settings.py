"""Validated camera settings (YAML) and the layout's slot geometry. No OpenCV here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from common.slots import ROUND_SLOTS
from common.yamlfile import DuplicateKeyError, load_yaml

SLOTS: tuple[str, ...] = ROUND_SLOTS
"""Layout boxes in draw order: a batch of cards seen together is numbered in this order."""

Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class CameraSettingsError(ValueError):
    """Settings file unreadable or invalid; the message names the file and field."""


class Region(BaseModel):
    """An axis-aligned box in normalised frame coordinates (0..1, origin top-left)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    x0: Unit
    y0: Unit
    x1: Unit
    y1: Unit

    @field_validator("x1")
    @classmethod
    def _x_order(cls, value: float, info: object) -> float:
        data = getattr(info, "data", {})
        if "x0" in data and value <= data["x0"]:
            raise ValueError("x1 must be greater than x0")
        return value

    @field_validator("y1")
    @classmethod
    def _y_order(cls, value: float, info: object) -> float:
        data = getattr(info, "data", {})
        if "y0" in data and value <= data["y0"]:
            raise ValueError("y1 must be greater than y0")
        return value

    def contains(self, x: float, y: float) -> bool:
        """True when the normalised point lies inside the box."""
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1


class LayoutSettings(BaseModel):
    """Where the Player and Banker boxes (and the shoe mouth) are in the camera image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    P1: Region
    P2: Region
    P3: Region
    B1: Region
    B2: Region
    B3: Region
    shoe_mouth: Region | None = None
    """Cards seen here are in transit out of the shoe and never reported."""

    def region(self, slot: str) -> Region:
        """The box of slot ``P1`` .. ``B3``."""
        region: Region = getattr(self, slot)
        return region

    def slot_at(self, x: float, y: float) -> str | None:
        """The slot whose box holds the normalised point, ``"shoe_mouth"``, or None."""
        if self.shoe_mouth is not None and self.shoe_mouth.contains(x, y):
            return "shoe_mouth"
        for slot in SLOTS:
            if self.region(slot).contains(x, y):
                return slot
        return None


class CameraSettings(BaseModel):
    """One table's camera: where frames come from, the deck's templates, the layout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: int | str
    """V4L2 index (0) or device path (/dev/video0), rtsp:// or http:// URL, a folder of
    images or a video file (replay)."""
    source_kind: Literal["auto", "device", "stream", "folder", "video"] = "auto"
    templates: Path
    """Templates file written by ``baccarat-edge camera calibrate``."""
    layout: LayoutSettings
    min_confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.6
    """Recognitions below this confidence count as unknown."""
    stability_frames: Annotated[int, Field(ge=2, le=100)] = 3
    """Consecutive still frames that must show the same card before it is reported."""
    fps: Annotated[float, Field(gt=0.0, le=60.0)] = 10.0
    """Frames analysed per second (replay sources are also paced at this rate)."""
    watchdog_s: Annotated[float, Field(gt=0.0, le=600.0)] = 3.0
    """No frame for this long: the capture is declared hung and reopened."""
    open_timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 10.0
    """How long a (re)opened capture may take to deliver its first frame."""
    stale_frame_s: Annotated[float, Field(gt=0.0, le=3600.0)] | None = 5.0
    """Byte-identical frames for this long: the stream is frozen and reopened (None: off)."""
    reconnect_initial_s: Annotated[float, Field(gt=0.0, le=60.0)] = 0.5
    reconnect_max_s: Annotated[float, Field(gt=0.0, le=600.0)] = 10.0
    motion_threshold: Annotated[float, Field(gt=0.0, le=255.0)] = 6.0
    """Mean grey-level change in a box between frames above which the box is moving."""
    loop_replay: bool = False
    """Replay sources start over at their end instead of reporting the end."""
    device: str = "camera"
    """Name carried by every input this camera produces."""


def load_camera_settings(path: Path) -> CameraSettings:
    """Read and validate a camera settings YAML file."""
    try:
        data = load_yaml(path)
    except OSError as exc:
        raise CameraSettingsError(f"{path}: cannot read ({exc.strerror})") from exc
    except DuplicateKeyError as exc:
        raise CameraSettingsError(str(exc)) from exc
    except yaml.YAMLError as exc:
        raise CameraSettingsError(f"{path}: not valid YAML ({exc})") from exc
    return parse_camera_settings(data, str(path))


def parse_camera_settings(data: object, origin: str = "camera settings") -> CameraSettings:
    """Validate already-parsed settings; errors name ``origin`` and the field path."""
    try:
        return CameraSettings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise CameraSettingsError(f"{origin}: {problems}") from exc
