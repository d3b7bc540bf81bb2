"""``CameraSource``: the camera driver thread, a :class:`~drivers.device.Device` like the card readers.

A capture thread reads frames from the source as they come and keeps only the
latest. The analysis thread takes at most ``fps`` frames a second, recognises them,
runs the per-slot stability filter and hands each newly stable card to the sink as
a ``CardRead(source=CAMERA, target=<slot>, position=<order in this batch>)``.

Watchdog: no frame for ``watchdog_s`` (a hung capture call) or byte-identical
frames for ``stale_frame_s`` (a frozen stream) count as the camera going away: a
``DeviceConnection(connected=False)`` is sent, the capture is abandoned and
reopened with exponential backoff plus jitter (``common.backoff``), and ``DeviceConnection(True)``
follows when frames flow again. A replay that ends sends ``connected=False`` with
detail "end of replay" and the driver stops.

Progress for the service's watchdog (:meth:`CameraSource.last_progress`): the camera has
no loop heartbeat; it counts as progressing while its thread lives and its state lock is
free, so its death or a deadlock on that lock stops the pings, a loop blocked elsewhere
does not (a hung capture is the camera's own watchdog's job, above).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import zlib
from collections.abc import Callable
from typing import Literal

import structlog

from common.backoff import Backoff
from common.inputs import CardRead, DeviceConnection, DeviceTarget, EngineInput, Source
from drivers.camera.capture import CaptureError, EndOfReplay, FrameSource, make_source
from drivers.camera.geometry import Image
from drivers.camera.observe import LayoutObserver
from drivers.camera.recognize import Recognizer
from drivers.camera.settings import SLOTS, CameraSettings
from drivers.camera.stability import StabilityFilter
from drivers.camera.templates import load_templates
from drivers.device import CameraHealth, Clock, Sink

log = structlog.get_logger("drivers.camera")

Counter = Literal[
    "frames",
    "reads",
    "unknown",
    "rejects",
    "reconnects",
    "watchdog_trips",
    "stale_trips",
    "abandoned_captures",
]


CAPTURE_JOIN_S = 2.0
"""How long a stopping driver waits for its capture thread's read in progress to end."""


class _Capture:
    """One connection's reader thread; abandoned (never joined) if it hangs."""

    def __init__(self, source: FrameSource) -> None:
        self.source = source
        self.frames: queue.Queue[Image | BaseException] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="camera-capture", daemon=True)

    def _put(self, item: Image | BaseException) -> None:
        with contextlib.suppress(queue.Empty):
            self.frames.get_nowait()  # keep only the latest frame
        with contextlib.suppress(queue.Full):
            self.frames.put_nowait(item)

    def _run(self) -> None:
        try:
            self.source.open()
            while not self.stop.is_set():
                frame = self.source.read()
                if self.stop.is_set():
                    break
                self._put(frame)
        except (CaptureError, EndOfReplay, OSError) as exc:
            self._put(exc)
        except Exception as exc:  # a broken backend must not kill the driver silently
            log.exception("camera capture failed")
            self._put(CaptureError(f"capture failed: {exc!r}"))
        finally:
            try:
                self.source.close()
            except Exception:
                log.exception("camera close failed")


def _frame_digest(frame: Image) -> int:
    return zlib.crc32(frame[::7, ::7].tobytes())


class CameraSource:
    """Camera driver (a :class:`~drivers.device.Device`); feeds ``sink`` from its own thread."""

    def __init__(
        self,
        settings: CameraSettings,
        sink: Sink,
        clock: Clock,
        source_factory: Callable[[CameraSettings], FrameSource] = make_source,
    ) -> None:
        self.settings = settings
        self.sink = sink
        self.clock = clock
        self.source_factory = source_factory
        self.recognizer = Recognizer(load_templates(settings.templates))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._health = CameraHealth(
            connected=False,
            state="opening",
            last_frame_at=None,
            last_read_at=None,
            frames=0,
            reads=0,
            unknown=0,
            rejects=0,
            reconnects=0,
            watchdog_trips=0,
            stale_trips=0,
            abandoned_captures=0,
            last_error=None,
            ended=False,
        )

    # -- runtime contract ------------------------------------------------------------------
    def start(self) -> None:
        """Start the driver thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="camera", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the driver thread (a hung capture thread is left behind, as a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def health(self) -> CameraHealth:
        """Counters and state for the health topic."""
        with self._lock:
            return self._health.copy()

    def last_progress(self) -> float | None:
        """Now while the camera thread lives and its state lock is free; None when it is not running.

        No loop heartbeat (see the module docstring): a dead thread or a deadlock on the
        state lock stops the watchdog's pings, a loop blocked elsewhere does not.
        """
        with self._lock:
            pass
        thread = self._thread
        if thread is None or not thread.is_alive():
            return None
        return time.monotonic()

    # -- internals ----------------------------------------------------------------------------
    def _count(self, key: Counter) -> None:
        with self._lock:
            self._health[key] += 1

    def _failed(self, detail: str) -> None:
        with self._lock:
            self._health["last_error"] = detail

    def _emit(self, item: EngineInput) -> None:
        try:
            self.sink(item)
        except Exception:
            log.exception("camera sink rejected %r", item)

    def _connection(self, connected: bool, detail: str | None) -> None:
        with self._lock:
            self._health["connected"] = connected
            self._health["state"] = "connected" if connected else "disconnected"
            if detail is not None and not connected:
                self._health["last_error"] = detail
        self._emit(
            DeviceConnection(connected=connected, at=self.clock(), device=self.settings.device, detail=detail)
        )

    def _run(self) -> None:
        # delays in [0.5, 1.5] x a ceiling doubling from reconnect_initial_s up to reconnect_max_s
        backoff = Backoff.symmetric(
            self.settings.reconnect_initial_s, self.settings.reconnect_max_s, jitter=0.5
        )
        while not self._stop.is_set():
            capture = _Capture(self.source_factory(self.settings))
            capture.thread.start()
            outcome = self._serve(capture)
            capture.stop.set()
            with self._lock:
                if self._health["state"] == "opening" and outcome != "stopped":
                    self._health["state"] = "disconnected"  # the first capture never gave a frame
            # A working capture ends within one read: wait for it, so that no thread is inside
            # OpenCV when the process exits (found as an abort, "terminate called without an
            # active exception", after a clean stop under load). A hung one is left behind.
            capture.thread.join(CAPTURE_JOIN_S)
            if capture.thread.is_alive():
                self._count("abandoned_captures")
            if outcome == "ended":
                with self._lock:
                    self._health["ended"] = True
                return
            if outcome == "stopped":
                return
            if outcome == "lost":
                self._connection(False, self.health()["last_error"])
                backoff.reset()
            self._count("reconnects")
            if self._stop.wait(backoff.next_delay()):
                return

    def _next_frame(self, capture: _Capture, limit: float) -> Image | BaseException | None:
        """The next frame or capture error; None after ``limit`` seconds or on stop."""
        deadline = time.monotonic() + limit
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                return capture.frames.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                continue
        return None

    def _serve(self, capture: _Capture) -> str:
        """Analyse frames until the capture fails: "lost", "failed" (never connected), "ended"."""
        s = self.settings
        observer = LayoutObserver(self.recognizer, s.layout, s.motion_threshold)
        stability = StabilityFilter(SLOTS, s.stability_frames, s.min_confidence)
        connected = False
        last_digest: int | None = None
        same_since = 0.0
        interval = 1.0 / s.fps
        while not self._stop.is_set():
            # Opening a stream may take longer than the gap allowed between two frames.
            limit = s.watchdog_s if connected else max(s.watchdog_s, s.open_timeout_s)
            item = self._next_frame(capture, limit)
            if item is None:
                if self._stop.is_set():
                    break
                self._count("watchdog_trips")
                self._failed(f"watchdog: no frame for {limit:g} s")
                return "lost" if connected else "failed"
            if isinstance(item, EndOfReplay):
                if connected:
                    self._connection(False, "end of replay")
                return "ended"
            if isinstance(item, BaseException):
                self._failed(str(item))
                return "lost" if connected else "failed"
            now = time.monotonic()
            digest = _frame_digest(item)
            if digest != last_digest:
                last_digest, same_since = digest, now
            elif s.stale_frame_s is not None and now - same_since >= s.stale_frame_s:
                self._count("stale_trips")
                self._failed(f"stale: identical frames for {s.stale_frame_s:g} s")
                return "lost" if connected else "failed"
            if not connected:
                connected = True
                self._connection(True, None)
            self._count("frames")
            frame_at = self.clock()
            with self._lock:
                self._health["last_frame_at"] = frame_at
            self._analyse(item, observer, stability)
            if self._stop.wait(max(0.0, interval - (time.monotonic() - now))):
                break
        return "stopped"

    def _analyse(self, frame: Image, observer: LayoutObserver, stability: StabilityFilter) -> None:
        observation = observer.observe(frame)
        if any(r.card is None for r in observation.recognitions):
            self._count("unknown")  # frames with an unreadable card outline
            self._count("rejects")
        reads = stability.update(observation.slots)
        at = self.clock()
        # A batch of cards turning stable together is numbered in draw order (SLOTS order).
        for position, read in enumerate(sorted(reads, key=lambda r: SLOTS.index(r.slot)), start=1):
            self._count("reads")
            with self._lock:
                self._health["last_read_at"] = at
            self._emit(
                CardRead(
                    card=read.card,
                    at=at,
                    source=Source.CAMERA,
                    position=position,
                    target=DeviceTarget(read.slot),
                    confidence=round(read.confidence, 4),
                    raw=None,
                    device=self.settings.device,
                )
            )
