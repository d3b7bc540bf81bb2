"""The corner index of a warped card: ink mask, rank and suit glyph vectors, ink colour.

Both index corners of a card are read. The bottom-right one is the top-left one of
the card turned 180 degrees, so :func:`~drivers.camera.geometry.warp_corners` hands back two upright views
and everything else works on "the top-left corner" only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from drivers.camera.geometry import CARD_H, CARD_W, Image

Box = tuple[int, int, int, int]
"""x0, y0, x1, y1 (exclusive) in canonical card pixels."""

Vector = NDArray[Any]

CORNER_REGION: Box = (0, 0, int(CARD_W * 0.30), int(CARD_H * 0.40))
"""Where an index may lie, generous: calibration looks for it here."""
CORNER_SIZE = (CORNER_REGION[2], CORNER_REGION[3])
"""(w, h) of a corner view warped on its own (the region starts at the card's corner)."""
RANK_SIZE = (24, 32)
SUIT_SIZE = (24, 24)
MIN_CONTRAST = 60
"""Ink-ness spread (p99 - p1) below which a corner holds no readable print (glare, blank)."""
GLYPH_SMOOTHING = 0.0
"""Gaussian sigma (in template pixels) applied to every glyph before comparison."""
EDGE_BAND = 3
"""Pixels along the card edge ignored in the ink mask (printed borders, outline error)."""
SEARCH_MARGIN = 7
"""Pixels around a learned glyph box that the reader still searches (warp error)."""


@dataclass(frozen=True, slots=True)
class IndexBoxes:
    """Where the rank and the suit glyph sit in the top-left corner of this deck."""

    rank: Box
    suit: Box


BLUE_LEAD = 40
"""Blue exceeding red and green by this much is picture print (frames, robes), not index ink."""


def index_channel(view: Image) -> Image:
    """The corner region as one channel in which index print is dark and all else light.

    Red and black print are both dark in the green channel; card stock, and the gold of
    court-card pictures that often touches the index, are not. Blue picture print is dark
    there too, so it is lifted to white: indices are never blue.
    """
    x0, y0, x1, y1 = CORNER_REGION
    corner = view[y0:y1, x0:x1].astype(np.int16)
    blue, green, red = corner[:, :, 0], corner[:, :, 1], corner[:, :, 2]
    bluish = (blue - red > BLUE_LEAD) & (blue - green > BLUE_LEAD)
    channel: Image = np.where(bluish, 255, green).astype(np.uint8)
    return channel


def ink_mask(view: Image) -> Image | None:
    """Binary mask (255 = ink) of the corner region, or None when it has no contrast."""
    darkest = index_channel(view)
    low, high = np.percentile(darkest, (1, 99))
    if high - low < MIN_CONTRAST:
        return None
    _, mask = cv2.threshold(darkest, 0, 255, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    mask[:EDGE_BAND, :] = 0
    mask[:, :EDGE_BAND] = 0
    return mask


def _components(mask: Image) -> list[tuple[Box, int, tuple[float, float]]]:
    count, _, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
    found = []
    for i in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[i])
        found.append(((x, y, x + w, y + h), area, (float(centroids[i][0]), float(centroids[i][1]))))
    return found


def _touches_border(box: Box, region: Box) -> bool:
    return box[0] <= region[0] or box[1] <= region[1] or box[2] >= region[2] or box[3] >= region[3]


def locate_index(mask: Image) -> IndexBoxes | None:
    """Find the rank and suit glyphs in a clean corner mask (calibration faces).

    The rank is the top-most print not touching the corner region's edge (with any
    print beside it, for "10"); the suit is the next print below it that shares its
    columns. Pips and picture frames run off the region and are ignored.
    """
    region: Box = (0, 0, mask.shape[1], mask.shape[0])
    pieces = [
        (box, area) for box, area, _ in _components(mask) if area >= 6 and not _touches_border(box, region)
    ]
    if not pieces:
        return None
    pieces.sort(key=lambda p: p[0][1])
    top = pieces[0][0]
    rank = top
    for box, _ in pieces[1:]:
        overlap = min(box[3], top[3]) - max(box[1], top[1])
        if overlap > 0.6 * (top[3] - top[1]) and box[0] < top[2] + (top[3] - top[1]):
            rank = (min(rank[0], box[0]), min(rank[1], box[1]), max(rank[2], box[2]), max(rank[3], box[3]))
    below = [
        box for box, _ in pieces if box[1] >= rank[3] - 1 and min(box[2], rank[2]) - max(box[0], rank[0]) > 0
    ]
    if not below:
        return None
    suit = min(below, key=lambda b: b[1])
    return IndexBoxes(rank=rank, suit=suit)


@dataclass(frozen=True, slots=True)
class CornerInk:
    """The print of one corner: binary mask, its connected components, and ink levels."""

    view: Image
    mask: Image
    labels: NDArray[Any]
    stats: NDArray[Any]
    centroids: NDArray[Any]
    levels: NDArray[Any]


@dataclass(frozen=True, slots=True)
class Glyph:
    """One index glyph: its box and the ink of only its own components inside that box."""

    box: Box
    ink: NDArray[Any]
    mask: NDArray[Any]
    windowed: bool = False
    """True when the glyph touched other print and was cut out by its expected box."""


def read_corner_ink(view: Image) -> CornerInk | None:
    """Analyse the top-left corner of an upright card view; None when it holds no print."""
    mask = ink_mask(view)
    if mask is None:
        return None
    _, labels, stats, centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
    return CornerInk(view, mask, labels, stats, centroids, ink_levels(view))


def find_glyph(corner: CornerInk, expected: Box, margin: int = SEARCH_MARGIN) -> Glyph | None:
    """The print centred near ``expected`` and lying wholly within it plus ``margin``.

    Print running further (picture frames, pips, a hand's edge) is not part of an index.
    """
    x0, y0, x1, y1 = expected
    height, width = corner.mask.shape
    search: Box = (
        max(0, x0 - margin),
        max(0, y0 - margin),
        min(width, x1 + margin),
        min(height, y1 + margin),
    )
    tolerance = margin / 2
    min_area = max(4, (x1 - x0) * (y1 - y0) // 40)
    chosen: list[int] = []
    for i in range(1, len(corner.stats)):
        bx, by, bw, bh, area = (int(v) for v in corner.stats[i])
        if area < min_area:
            continue
        cx, cy = corner.centroids[i]
        if not (x0 - tolerance <= cx <= x1 + tolerance and y0 - tolerance <= cy <= y1 + tolerance):
            continue
        if bx < search[0] or by < search[1] or bx + bw > search[2] or by + bh > search[3]:
            continue
        chosen.append(i)
    if not chosen:
        return _window(corner, expected, min_area)
    rows = corner.stats[chosen]
    box: Box = (
        int(rows[:, 0].min()),
        int(rows[:, 1].min()),
        int((rows[:, 0] + rows[:, 2]).max()),
        int((rows[:, 1] + rows[:, 3]).max()),
    )
    if box[2] - box[0] < 2 or box[3] - box[1] < 3:
        return None
    labels = corner.labels[box[1] : box[3], box[0] : box[2]]
    own = np.isin(labels, chosen).astype(np.uint8)
    # Keep the anti-aliased rim of the glyph's own strokes, nothing of its neighbours.
    rim = cv2.dilate(own, np.ones((3, 3), np.uint8)) > 0
    ink = np.where(rim, corner.levels[box[1] : box[3], box[0] : box[2]], 0.0).astype(np.float32)
    return Glyph(box=box, ink=ink, mask=own > 0)


def _window(corner: CornerInk, expected: Box, min_area: int) -> Glyph | None:
    """The expected box itself, when the glyph touches other print (a court card's picture).

    Templates are learned through the same fallback, so such a card still matches its own.
    """
    x0, y0, x1, y1 = expected
    own = corner.mask[y0:y1, x0:x1] > 0
    if int(own.sum()) < min_area:
        return None
    ink: NDArray[Any] = corner.levels[y0:y1, x0:x1].astype(np.float32)
    return Glyph(box=expected, ink=ink, mask=own, windowed=True)


def boxes_joined(corner: CornerInk, first: Box, second: Box) -> bool:
    """True when one piece of print reaches into both boxes (rank and suit run together)."""

    def labels_in(box: Box) -> set[int]:
        x0, y0, x1, y1 = box
        return set(np.unique(corner.labels[y0:y1, x0:x1]).tolist()) - {0}

    return bool(labels_in(first) & labels_in(second))


def ink_levels(view: Image) -> NDArray[Any]:
    """Ink-ness of the corner region in 0..1 (1 = full print), stretched to its own contrast."""
    green = index_channel(view).astype(np.float32)
    low, high = np.percentile(green, (1, 99))
    span = max(float(high - low), 1.0)
    levels: NDArray[Any] = np.clip((high - green) / span, 0.0, 1.0)
    return levels


def glyph_vector(glyph: Glyph, size: tuple[int, int]) -> Vector:
    """Zero-mean, unit-norm vector of a glyph's ink resized to ``size``."""
    resized = cv2.resize(glyph.ink, size, interpolation=cv2.INTER_AREA)
    # A little smoothing makes the match tolerant of the resampling a camera and a warp add.
    if GLYPH_SMOOTHING > 0:
        resized = cv2.GaussianBlur(resized, (0, 0), GLYPH_SMOOTHING)
    resized = resized.ravel()
    centered = resized - resized.mean()
    norm = float(np.linalg.norm(centered))
    vector: Vector = np.zeros_like(centered) if norm < 1e-6 else (centered / norm).astype(np.float32)
    return vector


def box_aspect(box: Box) -> float:
    """Height over width of a glyph box."""
    return (box[3] - box[1]) / max(1, box[2] - box[0])


def redness(view: Image, glyph: Glyph) -> float:
    """How red a glyph's print is: mean of R - max(G, B) over its pixels, 0..255."""
    x0, y0, x1, y1 = glyph.box
    if not glyph.mask.any():
        return 0.0
    pixels = view[y0:y1, x0:x1][glyph.mask].astype(np.int16)
    red = pixels[:, 2] - np.maximum(pixels[:, 0], pixels[:, 1])
    return float(red.mean())
