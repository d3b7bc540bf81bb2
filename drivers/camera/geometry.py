"""Card outline detection and the perspective warp to a canonical upright card.

A card on the felt is a bright, unsaturated quadrilateral on a saturated
background. We threshold on that, keep outlines whose shape is a single card
(solid, four corners, card-like aspect), and warp each one to a fixed-size
portrait image whose top-left and bottom-right corners carry the indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

CARD_W = 200
CARD_H = 280
"""Size of the canonical warped card (poker-size aspect 5:7)."""

# OpenCV's stubs type every returned array loosely; pinning dtypes here would only add casts.
Image = NDArray[Any]
"""A BGR (or single-channel) uint8 picture."""
Points = NDArray[Any]
"""An N x 2 float32 array of pixel coordinates."""


@dataclass(frozen=True, slots=True)
class DetectorParams:
    """Thresholds of the outline detector; the defaults suit a green or blue felt."""

    felt_hue: int | None = None
    """OpenCV hue (0-179) of the felt; None estimates it from each frame."""
    hue_tolerance: int = 18
    """Pixels within this hue distance of the felt, and saturated, are felt."""
    min_felt_saturation: int = 60
    """HSV saturation (0-255) from which a pixel of felt hue counts as felt."""
    min_value: int = 45
    """HSV value (0-255) below which a pixel is background (shadow), never card."""
    min_card_height_px: float = 50.0
    """Outlines whose long side is shorter than this are ignored."""
    max_card_height_fraction: float = 0.9
    """Outlines taller than this fraction of the frame height are ignored."""
    min_solidity: float = 0.93
    """Outline area / convex hull area: lower means something covers or overlaps the card."""
    min_quad_fill: float = 0.93
    """Outline area / fitted quadrilateral area."""
    aspect_range: tuple[float, float] = (1.15, 1.85)
    """Accepted long side / short side of the fitted quadrilateral."""
    detect_scale: float = 0.5
    """Outlines are searched on the frame scaled by this (speed); the warp uses full resolution."""
    line_removal_px: int = 7
    """Opening size (full-resolution px) that erases printed layout lines and thin objects."""


@dataclass(frozen=True, slots=True)
class CardOutline:
    """One card-shaped quadrilateral in a frame.

    ``corners`` are in frame pixels ordered top-left, top-right, bottom-right,
    bottom-left *of the upright card* (the short edge first), so the warp puts an
    index corner at the top-left whatever the card's rotation (0 or 180 degrees
    apart, which the two index corners make symmetric).
    """

    corners: Points
    center: tuple[float, float]
    height_px: float


def estimate_felt_hue(hsv: Image, params: DetectorParams) -> int:
    """The dominant hue of saturated pixels: the felt covers most of an overhead frame."""
    sample = hsv[::8, ::8].reshape(-1, 3)
    saturated = sample[(sample[:, 1] >= params.min_felt_saturation) & (sample[:, 2] >= params.min_value)]
    if len(saturated) == 0:
        return -100  # nothing saturated: no pixel will be taken for felt
    histogram = np.bincount(saturated[:, 0], minlength=180)
    return int(np.argmax(histogram))


def card_mask(
    frame: Image, params: DetectorParams, hue: int | None = None, scale: float | None = None
) -> Image:
    """Binary mask of everything that is not felt or deep shadow (cards, hands, chips).

    ``frame`` is at ``scale`` (default: the detection scale); ``hue`` is the felt hue
    (default: the configured one, else estimated from ``frame``).
    """
    scale = params.detect_scale if scale is None else scale
    smooth = cv2.GaussianBlur(frame, (3, 3), 0)
    hsv = cv2.cvtColor(smooth, cv2.COLOR_BGR2HSV)
    if hue is None:
        hue = params.felt_hue if params.felt_hue is not None else estimate_felt_hue(hsv, params)
    distance = cv2.absdiff(hsv[:, :, 0], np.full(hsv.shape[:2], max(hue, 0), np.uint8))
    distance = np.minimum(distance, 180 - distance)  # hue is circular
    felt = (distance <= params.hue_tolerance) & (hsv[:, :, 1] >= params.min_felt_saturation)
    if hue < 0:
        felt[:] = False
    background = felt | (hsv[:, :, 2] < params.min_value)
    raw: Image = np.where(background, 0, 255).astype(np.uint8)
    size = max(3, round(params.line_removal_px * scale) | 1)
    opened = cv2.morphologyEx(raw, cv2.MORPH_OPEN, np.ones((size, size), np.uint8))
    closed: Image = cv2.morphologyEx(opened, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8), iterations=2)
    return closed


def _order_clockwise(points: Points) -> Points:
    center = points.mean(axis=0)
    angles = np.arctan2(points[:, 1] - center[1], points[:, 0] - center[0])
    ordered = points[np.argsort(angles)]
    # Start from the point nearest the image top-left, keep clockwise (y down).
    start = int(np.argmin(ordered[:, 0] + ordered[:, 1]))
    return np.roll(ordered, -start, axis=0).astype(np.float32)


def _portrait(corners: Points) -> Points:
    top = float(np.linalg.norm(corners[1] - corners[0]))
    side = float(np.linalg.norm(corners[2] - corners[1]))
    if top > side:
        return np.roll(corners, -1, axis=0)
    return corners


def _rough_quad(hull: Points) -> Points:
    perimeter = cv2.arcLength(hull, True)
    for fraction in (0.02, 0.03, 0.045, 0.06):
        approx = cv2.approxPolyDP(hull, fraction * perimeter, True)
        if len(approx) == 4:
            return approx.reshape(4, 2).astype(np.float32)
        if len(approx) < 4:
            break
    return np.asarray(cv2.boxPoints(cv2.minAreaRect(hull)), dtype=np.float32)


def _refine_quad(contour: Points, quad: Points, band: float = 0.04) -> Points:
    """Fit a line to the outline points along each side and intersect them.

    Rounded card corners pull a polygon approximation inwards; the sides are
    straight, so their intersections are the card's true (virtual) corners. Outline
    points within ``band`` x the side's length of a side are fitted.
    """
    points = contour.reshape(-1, 2).astype(np.float32)
    lines = []
    for i in range(4):
        a, b = quad[i], quad[(i + 1) % 4]
        side = b - a
        length = float(np.linalg.norm(side))
        if length < 4:
            return quad
        direction = side / length
        normal = np.array([-direction[1], direction[0]], dtype=np.float32)
        along = (points - a) @ direction
        across = np.abs((points - a) @ normal)
        near = (along > 0.15 * length) & (along < 0.85 * length) & (across < max(3.0, band * length))
        if near.sum() < 5:
            return quad
        vx, vy, x0, y0 = cv2.fitLine(points[near], cv2.DIST_HUBER, 0, 0.01, 0.01).ravel()
        lines.append((np.array([x0, y0]), np.array([vx, vy])))
    corners = []
    for i in range(4):
        (p1, d1), (p2, d2) = lines[i - 1], lines[i]
        matrix = np.array([d1, -d2]).T
        if abs(float(np.linalg.det(matrix))) < 1e-6:
            return quad
        t = np.linalg.solve(matrix, p2 - p1)
        corners.append(p1 + t[0] * d1)
    refined = np.array(corners, dtype=np.float32)
    if float(np.abs(refined - quad).max()) > 0.15 * float(np.linalg.norm(quad[2] - quad[0])):
        return quad
    return refined


def _fit_quad(contour: Points, refine: bool = True) -> Points:
    hull = cv2.convexHull(contour)
    rough = _rough_quad(hull)
    return _refine_quad(contour, rough) if refine else rough


def _fit_quad_wide(contour: Points) -> Points:
    """A second try for an outline the first fit missed: sides fitted in a wider band, thrice.

    A small card turned near 45 degrees in perspective can get a polygon approximation
    whose vertices sit on its rounded corners, 6-8 px inside: its sides are chords, too
    few outline points lie near them to refit, and the quad covers 83-87 % of the outline
    (found as 8 of 3,120 clean and moderate cards never outlined, seeds 7-41).
    """
    quad = _rough_quad(cv2.convexHull(contour))
    for _ in range(3):
        quad = _refine_quad(contour, quad, band=0.10)
    return quad


def _sharpen(
    frame: Image, quad: Points, area: float, hue: int, *, params: DetectorParams
) -> tuple[Points, float]:
    """Re-fit a coarse (detection-scale) quad on the full-resolution pixels around it.

    Returns the quad and the outline area it was fitted to; the coarse pair when the
    full-resolution outline is not a cleaner fit.
    """
    margin = 8
    x0, y0 = (np.floor(quad.min(axis=0)).astype(int) - margin).tolist()
    x1, y1 = (np.ceil(quad.max(axis=0)).astype(int) + margin).tolist()
    x0, y0 = max(x0, 0), max(y0, 0)
    x1, y1 = min(x1, frame.shape[1]), min(y1, frame.shape[0])
    if x1 - x0 < 8 or y1 - y0 < 8:
        return quad, area
    mask = card_mask(frame[y0:y1, x0:x1], params, hue, scale=1.0)
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if not contours:
        return quad, area
    largest = max(contours, key=cv2.contourArea).astype(np.float32) + np.array([x0, y0], np.float32)
    # The side lines are fitted to the full-resolution outline starting from the coarse quad,
    # twice: a fresh polygon approximation of the full-resolution hull can put a vertex on a
    # rounded corner and tilt a side (found as 5-10 px corner errors on tilted cards).
    fine = _refine_quad(largest, _refine_quad(largest, quad))
    fine_area = float(cv2.contourArea(largest))
    fine_quad_area = float(cv2.contourArea(fine))
    coarse_quad_area = float(cv2.contourArea(quad))
    if coarse_quad_area <= 0 or fine_quad_area <= 0 or not 0.85 <= fine_quad_area / coarse_quad_area <= 1.15:
        return quad, area
    fine_fit = min(fine_area / fine_quad_area, fine_quad_area / fine_area)
    coarse_fit = min(area / coarse_quad_area, coarse_quad_area / area)
    return (fine, fine_area) if fine_fit >= coarse_fit else (quad, area)


def find_card_outlines(frame: Image, params: DetectorParams | None = None) -> list[CardOutline]:
    """Every single, unobstructed card outline in a BGR frame."""
    return detect_cards(frame, params)[0]


def _fills(quad: Points, area: float, min_fill: float) -> bool:
    """True when ``quad`` and an outline of ``area`` cover each other to ``min_fill``."""
    quad_area = float(cv2.contourArea(quad))
    return quad_area > 0 and area / quad_area >= min_fill and quad_area / area >= min_fill


def detect_cards(frame: Image, params: DetectorParams | None = None) -> tuple[list[CardOutline], Image]:
    """Card outlines in a BGR frame, and the not-felt mask at ``params.detect_scale``."""
    params = params or DetectorParams()
    scale = params.detect_scale
    small = (
        frame if scale == 1.0 else cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    )
    smooth_small = cv2.cvtColor(cv2.GaussianBlur(small, (3, 3), 0), cv2.COLOR_BGR2HSV)
    hue = params.felt_hue if params.felt_hue is not None else estimate_felt_hue(smooth_small, params)
    mask = card_mask(small, params, hue)
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    # Work in full-resolution coordinates from here on (pixel centres map as (p + 0.5) / scale - 0.5).
    contours = [((c.astype(np.float32) + 0.5) / scale - 0.5) for c in contours]
    frame_h = frame.shape[0]
    min_side = params.min_card_height_px
    min_area = (min_side * min_side) / params.aspect_range[1]
    outlines: list[CardOutline] = []
    for contour in contours:
        area = float(cv2.contourArea(contour))
        if area < min_area:
            continue
        hull_area = float(cv2.contourArea(cv2.convexHull(contour)))
        if hull_area <= 0 or area / hull_area < params.min_solidity:
            continue
        fitted: Points | None = None
        for fit in (_fit_quad, _fit_quad_wide):
            quad, outline_area = fit(contour), area
            if scale != 1.0:
                quad, outline_area = _sharpen(frame, quad, area, hue, params=params)
            if _fills(quad, outline_area, params.min_quad_fill):
                fitted = quad
                break
        if fitted is None:
            continue
        corners = _portrait(_order_clockwise(fitted))
        short = (np.linalg.norm(corners[1] - corners[0]) + np.linalg.norm(corners[3] - corners[2])) / 2
        long = (np.linalg.norm(corners[2] - corners[1]) + np.linalg.norm(corners[0] - corners[3])) / 2
        if short <= 0:
            continue
        aspect = float(long / short)
        if not params.aspect_range[0] <= aspect <= params.aspect_range[1]:
            continue
        if long < min_side or long > params.max_card_height_fraction * frame_h:
            continue
        cx, cy = corners.mean(axis=0)
        outlines.append(CardOutline(corners=corners, center=(float(cx), float(cy)), height_px=float(long)))
    return outlines, mask


_CANONICAL = np.array([[0, 0], [CARD_W - 1, 0], [CARD_W - 1, CARD_H - 1], [0, CARD_H - 1]], dtype=np.float32)


def warp_corners(frame: Image, outline: CardOutline, size: tuple[int, int]) -> tuple[Image, Image]:
    """The two index corners of the card, each warped upright into a ``size`` (w, h) image.

        The first is the canonical card's top-left; the second its bottom-right seen with the
        card turned 180 degrees. Same pixels as cropping the corners of the whole card warped
    upright, a fraction of the work.
    """
    matrix = cv2.getPerspectiveTransform(outline.corners, _CANONICAL)
    turn = np.array([[-1, 0, CARD_W - 1], [0, -1, CARD_H - 1], [0, 0, 1]], dtype=np.float64)
    top_left: Image = cv2.warpPerspective(frame, matrix, size, flags=cv2.INTER_LINEAR)
    bottom_right: Image = cv2.warpPerspective(frame, turn @ matrix, size, flags=cv2.INTER_LINEAR)
    return top_left, bottom_right
