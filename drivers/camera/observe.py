"""One frame → what each layout slot shows (card, unknown, empty, busy) and whether it moves."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from drivers.camera.geometry import Image
from drivers.camera.recognize import Recognition, Recognizer
from drivers.camera.settings import SLOTS, LayoutSettings, Region
from drivers.camera.stability import SlotObservation, SlotState

EMPTY_MAX_FILL = 0.03
"""Largest share of not-felt pixels a box may hold and still count as empty (printed lines)."""
MOTION_SIZE = (160, 90)


@dataclass(frozen=True, slots=True)
class FrameObservation:
    """Everything one analysed frame says about the layout."""

    slots: dict[str, SlotObservation]
    recognitions: list[Recognition]
    slot_of: list[str | None]
    """Slot (or "shoe_mouth") of each recognition's centre, None when outside every box."""


def _pixels(region: Region, width: int, height: int) -> tuple[int, int, int, int]:
    return (
        int(region.x0 * width),
        int(region.y0 * height),
        max(int(region.x1 * width), int(region.x0 * width) + 1),
        max(int(region.y1 * height), int(region.y0 * height) + 1),
    )


class LayoutObserver:
    """Analyses frames for one layout; remembers the previous frame to see motion."""

    def __init__(self, recognizer: Recognizer, layout: LayoutSettings, motion_threshold: float) -> None:
        self.recognizer = recognizer
        self.layout = layout
        self.motion_threshold = motion_threshold
        self._previous: Image | None = None

    def observe(self, frame: Image) -> FrameObservation:
        """Recognise the frame and classify every slot."""
        height, width = frame.shape[:2]
        recognitions, mask = self.recognizer.analyse(frame)
        small = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), MOTION_SIZE, interpolation=cv2.INTER_AREA)
        small = cv2.GaussianBlur(small, (3, 3), 0).astype(np.int16)
        previous, self._previous = self._previous, small
        slot_of = [
            self.layout.slot_at(r.outline.center[0] / width, r.outline.center[1] / height)
            for r in recognitions
        ]
        observations: dict[str, SlotObservation] = {}
        for slot in SLOTS:
            region = self.layout.region(slot)
            mx0, my0, mx1, my1 = _pixels(region, *MOTION_SIZE)
            moving = (
                previous is None
                or float(np.abs(small[my0:my1, mx0:mx1] - previous[my0:my1, mx0:mx1]).mean())
                > self.motion_threshold
            )
            here = [r for r, s in zip(recognitions, slot_of, strict=True) if s == slot]
            if len(here) == 1:
                rec = here[0]
                state = SlotState.CARD if rec.card is not None else SlotState.UNKNOWN
                observations[slot] = SlotObservation(state, rec.card, rec.confidence, moving)
            elif len(here) > 1:
                observations[slot] = SlotObservation(SlotState.BUSY, moving=moving)
            else:
                kx0, ky0, kx1, ky1 = _pixels(region, mask.shape[1], mask.shape[0])
                fill = float(mask[ky0:ky1, kx0:kx1].mean()) / 255.0
                state = SlotState.EMPTY if fill <= EMPTY_MAX_FILL else SlotState.BUSY
                observations[slot] = SlotObservation(state, moving=moving)
        return FrameObservation(observations, recognitions, slot_of)
