"""Frame sources: V4L2 device, RTSP/HTTP stream, video file (OpenCV), folder of images (replay).

A source is opened, read frame by frame, and closed. ``read`` returns a BGR frame,
raises :class:`EndOfReplay` at the end of a finite replay, and raises
:class:`CaptureError` when the device or stream fails. ``read`` may block; the
driver's watchdog, not the source, deals with a read that never returns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

import cv2

from drivers.camera.geometry import Image
from drivers.camera.settings import CameraSettings

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp"})


class CaptureError(RuntimeError):
    """The camera or stream failed; reopen it."""


class EndOfReplay(Exception):
    """A folder or video replay has no more frames."""


class FrameSource(Protocol):
    """What the driver needs from any source."""

    def open(self) -> None: ...

    def read(self) -> Image: ...

    def close(self) -> None: ...


class FolderSource:
    """Images of a folder in name order, paced at ``fps`` (replay of recorded frames)."""

    def __init__(self, folder: Path, fps: float, loop: bool = False) -> None:
        self.folder = folder
        self.interval = 1.0 / fps
        self.loop = loop
        self._files: list[Path] = []
        self._next = 0
        self._last_at = 0.0

    def open(self) -> None:
        if not self.folder.is_dir():
            raise CaptureError(f"{self.folder}: replay folder not found")
        self._files = sorted(p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self._files:
            raise CaptureError(f"{self.folder}: no images to replay")
        self._next = 0

    def read(self) -> Image:
        if self._next >= len(self._files):
            if not self.loop:
                raise EndOfReplay(str(self.folder))
            self._next = 0
        wait = self._last_at + self.interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        path = self._files[self._next]
        self._next += 1
        self._last_at = time.monotonic()
        if not path.exists():
            raise CaptureError(f"{path}: frame file disappeared")
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if frame is None:
            raise CaptureError(f"{path}: not a readable image")
        image: Image = frame
        return image

    def close(self) -> None:
        self._files = []


class OpenCVSource:
    """cv2.VideoCapture on a device index/path, an RTSP/HTTP URL or a video file."""

    def __init__(self, target: int | str, finite: bool, fps: float, loop: bool = False) -> None:
        self.target = target
        self.finite = finite
        self.interval = 1.0 / fps if finite else 0.0
        self.loop = loop
        self._capture: cv2.VideoCapture | None = None
        self._last_at = 0.0

    def open(self) -> None:
        capture = cv2.VideoCapture(self.target)
        if not capture.isOpened():
            capture.release()
            raise CaptureError(f"{self.target}: cannot open camera/stream/video")
        self._capture = capture

    def read(self) -> Image:
        if self._capture is None:
            raise CaptureError(f"{self.target}: not open")
        if self.interval:
            wait = self._last_at + self.interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last_at = time.monotonic()
        ok, frame = self._capture.read()
        if not ok or frame is None:
            if self.finite and self.loop:
                self._capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
                ok, frame = self._capture.read()
            if not ok or frame is None:
                if self.finite:
                    raise EndOfReplay(str(self.target))
                raise CaptureError(f"{self.target}: no frame (camera gone or stream ended)")
        image: Image = frame
        return image

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None


def make_source(settings: CameraSettings) -> FrameSource:
    """The frame source ``settings.source`` names (kind guessed unless ``source_kind`` says)."""
    target = settings.source
    kind = settings.source_kind
    if kind == "auto":
        text = str(target)
        if isinstance(target, int) or text.startswith("/dev/"):
            kind = "device"
        elif "://" in text:
            kind = "stream"
        elif Path(text).is_dir():
            kind = "folder"
        else:
            kind = "video"
    if kind == "folder":
        return FolderSource(Path(str(target)), settings.fps, settings.loop_replay)
    if kind == "video":
        return OpenCVSource(str(target), finite=True, fps=settings.fps, loop=settings.loop_replay)
    return OpenCVSource(target, finite=False, fps=settings.fps)
