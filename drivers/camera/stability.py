"""Per-slot stability: report a card only once it has been seen still and the same for N frames.

Pure and deterministic (no OpenCV, no clock). Each frame, every slot is observed as
one of: a named card, an unreadable card, empty felt, or busy (something other than
a lone card is there, e.g. a hand), plus whether the box is moving. A card is
reported when N consecutive still frames named it. A reported card stays "on the
slot" until the slot is seen empty and still for N frames, so a hand passing over
a card and leaving never makes it a second read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from common.cards import Card


class SlotState(Enum):
    CARD = "card"
    UNKNOWN = "unknown"
    EMPTY = "empty"
    BUSY = "busy"


@dataclass(frozen=True, slots=True)
class SlotObservation:
    """What one frame shows in one slot."""

    state: SlotState
    card: Card | None = None
    confidence: float = 0.0
    moving: bool = False


@dataclass(frozen=True, slots=True)
class StableRead:
    """A card that became stable on a slot: report it."""

    slot: str
    card: Card
    confidence: float


@dataclass(slots=True)
class _Track:
    reported: Card | None = None
    candidate: Card | None = None
    streak: int = 0
    streak_confidence: float = 1.0
    empty_streak: int = 0


class StabilityFilter:
    """Turns per-frame slot observations into one report per card placed."""

    def __init__(self, slots: tuple[str, ...], frames_needed: int, min_confidence: float) -> None:
        if frames_needed < 1:
            raise ValueError("frames_needed must be at least 1")
        self.frames_needed = frames_needed
        self.min_confidence = min_confidence
        self._tracks = {slot: _Track() for slot in slots}

    def reported(self, slot: str) -> Card | None:
        """The card currently believed to lie on ``slot`` (already reported)."""
        return self._tracks[slot].reported

    def update(self, observations: dict[str, SlotObservation]) -> list[StableRead]:
        """Feed one frame; slots not mentioned count as busy. Returns new stable reads."""
        reads: list[StableRead] = []
        for slot, track in self._tracks.items():
            seen = observations.get(slot, SlotObservation(SlotState.BUSY))
            read = self._step(track, seen)
            if read is not None:
                reads.append(StableRead(slot, read[0], read[1]))
        return reads

    def _step(self, track: _Track, seen: SlotObservation) -> tuple[Card, float] | None:
        confident = seen.card is not None and seen.confidence >= self.min_confidence
        if seen.moving or seen.state is not SlotState.CARD or not confident:
            track.candidate, track.streak = None, 0
            if seen.state is SlotState.EMPTY and not seen.moving:
                track.empty_streak += 1
                if track.empty_streak >= self.frames_needed:
                    track.reported = None
            else:
                track.empty_streak = 0
            return None
        track.empty_streak = 0
        if seen.card == track.candidate:
            track.streak += 1
            track.streak_confidence = min(track.streak_confidence, seen.confidence)
        else:
            track.candidate, track.streak, track.streak_confidence = seen.card, 1, seen.confidence
        if track.streak >= self.frames_needed and track.candidate != track.reported:
            track.reported = track.candidate
            assert track.reported is not None
            return track.reported, track.streak_confidence
        return None
