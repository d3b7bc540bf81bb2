"""Frame → cards: outline, warp, both corner indices, the whole face, and the abstain rules.

Two independent channels of evidence. The corner channel names a card when its rank
and suit both match the deck's templates well and clearly better than any other
rank/suit, the print colour agrees with the suit (red for diamonds/hearts, black for
clubs/spades), and the two index corners do not contradict each other. The face
channel correlates the whole card at low resolution with the deck's 52 faces
(:mod:`drivers.camera.faces`). A corner read the face clearly disagrees with is
dropped; when the corners cannot name the card, the face names it only with a clear
lead, and only if no corner points at anything else (the corners keep the last word on
suits: club/spade and heart/diamond are a few pixels apart on a face). Anything else is
``card=None`` with the reason: a wrong card costs far more than a rescan.

This module runs the steps for each outline; a corner is read by
:mod:`drivers.camera.corners`, the rules are :mod:`drivers.camera.decide`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.cards import ALL_CARDS, Card
from drivers.camera.corners import CornerReader, CornerReading
from drivers.camera.decide import Decider
from drivers.camera.faces import FaceMatch, face_picture, match_face, picture_vector
from drivers.camera.geometry import CardOutline, DetectorParams, Image, detect_cards, warp_corners
from drivers.camera.glyphs import CORNER_SIZE
from drivers.camera.templates import DeckTemplates
from drivers.camera.thresholds import RecognitionParams


@dataclass(frozen=True, slots=True)
class Recognition:
    """One card outline in a frame and what it is (``card`` None = unknown, abstained)."""

    outline: CardOutline
    card: Card | None
    confidence: float
    reason: str
    corners: tuple[CornerReading, ...] = field(default=())
    face: FaceMatch | None = None


class Recognizer:
    """Recognises the cards of one deck in BGR frames.

    ``corners`` reads each index corner (:mod:`drivers.camera.corners`), ``decider`` weighs
    both corners and the face (:mod:`drivers.camera.decide`).
    """

    def __init__(
        self,
        templates: DeckTemplates,
        params: RecognitionParams | None = None,
        detector: DetectorParams | None = None,
    ) -> None:
        self.templates = templates
        self.params = params or RecognitionParams()
        self.detector = detector or DetectorParams()
        self.corners = CornerReader(templates, self.params)
        self.decider = Decider(templates, self.params)

    def recognize_frame(self, frame: Image) -> list[Recognition]:
        """Every card outline in ``frame`` with its card or an explicit unknown."""
        return self.analyse(frame)[0]

    def analyse(self, frame: Image) -> tuple[list[Recognition], Image]:
        """Recognitions, plus the not-felt mask (at detection scale) for occupancy checks."""
        outlines, mask = detect_cards(frame, self.detector)
        return [self.recognize_outline(frame, outline) for outline in outlines], mask

    def recognize_outline(self, frame: Image, outline: CardOutline) -> Recognition:
        """Read one outline found in ``frame``."""
        scale = self.corners.nearest_height(outline.height_px)
        views = warp_corners(frame, outline, CORNER_SIZE)
        readings = tuple(self.corners.read(view, scale) for view in views)
        face = self.read_face(frame, outline)
        card, confidence, reason = self.decider.decide(readings, face)
        return Recognition(
            outline=outline, card=card, confidence=confidence, reason=reason, corners=readings, face=face
        )

    def read_face(self, frame: Image, outline: CardOutline) -> FaceMatch | None:
        """Correlate the whole card in ``outline`` with the deck's 52 learned faces."""
        t = self.templates
        vector = picture_vector(face_picture(frame, outline))
        return match_face(vector, t.face_vectors, t.face_labels, t.face_mean, cards=len(ALL_CARDS))
