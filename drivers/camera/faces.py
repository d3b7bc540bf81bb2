"""Whole-face evidence: the warped card at low resolution against the deck's 52 learned faces.

A second channel, independent of the corner indices. Faces differ far more than
10-px index glyphs (pip layouts, court pictures), and at 48x68 a card looks the same
whether it is sharp or blurred, 200 or 70 px high, or its outline is a pixel or two
off; what it cannot tell reliably is a club from a spade or a heart from a diamond
(a pip is a few pixels), which is why the corner channel keeps the last word on
suits (see :mod:`drivers.camera.decide`).

A face vector is the grey card, area-shrunk to ``FACE_SIZE``, lightly blurred, minus
the deck's mean face (the white card and border every face shares), zero-mean and
unit-norm: a correlation is one dot product, all 52 cards one matrix product.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from drivers.camera.geometry import CARD_H, CARD_W, CardOutline, Image

FACE_SIZE = (48, 68)
"""(w, h) of a face vector's picture: pips and court pictures, not index glyphs."""
FACE_WARP = (CARD_W // 2, CARD_H // 2)
"""The card is warped at this size first, then area-shrunk (a direct warp would alias)."""
FACE_BLUR = 1.0
"""Gaussian sigma (face-vector pixels): a warp error of a pixel or two costs little."""

Vector = NDArray[Any]


def face_picture(frame: Image, outline: CardOutline) -> Vector:
    """The card in ``outline`` as a float32 grey ``FACE_SIZE`` picture (not yet normalised)."""
    w, h = FACE_WARP
    target = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], dtype=np.float32)
    matrix = cv2.getPerspectiveTransform(outline.corners, target)
    warped = cv2.warpPerspective(frame, matrix, (w, h), flags=cv2.INTER_LINEAR)
    grey = cv2.cvtColor(warped, cv2.COLOR_BGR2GRAY) if warped.ndim == 3 else warped
    small = cv2.resize(grey, FACE_SIZE, interpolation=cv2.INTER_AREA).astype(np.float32)
    picture: Vector = cv2.GaussianBlur(small, (0, 0), FACE_BLUR)
    return picture


def normalise(vector: Vector) -> Vector:
    """Zero mean, unit norm (a flat vector stays zero: it correlates with nothing)."""
    centred = vector - vector.mean()
    norm = float(np.linalg.norm(centred))
    result: Vector = (centred / norm if norm > 1e-6 else centred).astype(np.float32)
    return result


def picture_vector(picture: Vector) -> Vector:
    """A ``face_picture`` as a normalised vector, before the deck's mean face is removed."""
    return normalise(picture.ravel())


def both_orientations(picture: Vector) -> tuple[Vector, Vector]:
    """The picture and the picture turned 180 degrees: the warp cannot tell them apart."""
    return picture, picture[::-1, ::-1]


def residual(vector: Vector, mean_face: Vector) -> Vector:
    """A face vector minus the deck's mean face, renormalised (what the templates hold)."""
    return normalise(vector - mean_face)


@dataclass(frozen=True, slots=True)
class FaceMatch:
    """What the whole face says: the best card, its correlation and its lead over the runner-up."""

    label: int
    """Index of the best card in ``common.cards.ALL_CARDS``."""
    score: float
    margin: float
    scores: NDArray[Any]
    """Best correlation per card (``ALL_CARDS`` order), both orientations considered."""

    def score_of(self, label: int) -> float:
        """Correlation of the face with card ``label``."""
        return float(self.scores[label])


def match_face(
    vector: Vector, templates: NDArray[Any], labels: NDArray[Any], mean_face: Vector, *, cards: int
) -> FaceMatch | None:
    """Correlate a face vector (``picture_vector``) with every learned face of the deck."""
    if not float(np.abs(vector).sum()) > 0:
        return None
    # einsum, not ``@``: a matrix-vector product goes to a multi-threaded BLAS whose idle
    # threads take milliseconds to wake on a busy machine (measured 20 ms vs 0.09 ms).
    scores = np.einsum("ij,j->i", templates, residual(vector, mean_face))
    per_card = np.full(cards, -2.0, dtype=np.float32)
    np.maximum.at(per_card, labels, scores)
    order = np.argsort(per_card)
    best = int(order[-1])
    return FaceMatch(
        label=best,
        score=float(per_card[best]),
        margin=float(per_card[best] - per_card[order[-2]]),
        scores=per_card,
    )
