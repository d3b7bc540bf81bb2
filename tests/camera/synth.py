"""Camera frames made from real card faces: a 1280x720 overhead view of a felt layout.

Each named condition turns the same faces into harder pictures (perspective, blur,
sensor noise, uneven light, glare, small cards, partial occlusion, overlapping
cards). Every frame comes with its ground truth: which card lies where, in the
order drawn (later cards lie on top). Deterministic for a given seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from common.cards import ALL_CARDS, Card

FRAME_W = 1280
FRAME_H = 720
FELT_BGR = (38, 100, 22)
LINE_BGR = (70, 175, 215)

# Layout boxes in normalised frame coordinates (x0, y0, x1, y1): Player left, Banker right.
SLOT_BOXES: dict[str, tuple[float, float, float, float]] = {
    "P3": (0.05, 0.28, 0.19, 0.78),
    "P1": (0.20, 0.28, 0.34, 0.78),
    "P2": (0.35, 0.28, 0.49, 0.78),
    "B1": (0.51, 0.28, 0.65, 0.78),
    "B2": (0.66, 0.28, 0.80, 0.78),
    "B3": (0.81, 0.28, 0.95, 0.78),
}
SHOE_MOUTH = (0.82, 0.0, 1.0, 0.2)

CONDITIONS = (
    "clean",
    "perspective",
    "blur",
    "noise",
    "uneven_light",
    "glare",
    "small",
    "occlusion",
    "overlap",
)
MODERATE = ("perspective", "blur", "noise", "uneven_light")
HARD = ("glare", "small", "occlusion", "overlap")

Image = NDArray[Any]


@dataclass(frozen=True, slots=True)
class PlacedCard:
    """Ground truth for one card in a frame: its identity, outline (frame px) and slot."""

    card: Card
    corners: NDArray[Any]
    slot: str


@dataclass(frozen=True, slots=True)
class SynthFrame:
    """A frame and the cards in it, in drawing order (last on top)."""

    image: Image
    cards: tuple[PlacedCard, ...]
    condition: str


def load_faces(folder: Path) -> dict[Card, NDArray[Any]]:
    """The 52 faces of a deck as BGRA (opaque where the file has no alpha)."""
    faces: dict[Card, NDArray[Any]] = {}
    for card in ALL_CARDS:
        image = cv2.imread(str(folder / f"{card.code}.png"), cv2.IMREAD_UNCHANGED)
        if image is None:
            raise FileNotFoundError(folder / f"{card.code}.png")
        if image.shape[2] == 3:
            image = np.dstack([image, np.full(image.shape[:2], 255, np.uint8)])
        faces[card] = image
    return faces


def felt_table(rng: np.random.Generator) -> Image:
    """An empty layout: textured felt with the six boxes printed on it."""
    frame = np.empty((FRAME_H, FRAME_W, 3), np.uint8)
    frame[:] = FELT_BGR
    coarse = rng.normal(0, 4, (FRAME_H // 4, FRAME_W // 4)).astype(np.float32)
    texture = cv2.resize(coarse, (FRAME_W, FRAME_H))[:, :, None]
    frame = np.clip(frame.astype(np.float32) + texture, 0, 255).astype(np.uint8)
    for x0, y0, x1, y1 in SLOT_BOXES.values():
        cv2.rectangle(
            frame,
            (int(x0 * FRAME_W), int(y0 * FRAME_H)),
            (int(x1 * FRAME_W), int(y1 * FRAME_H)),
            LINE_BGR,
            2,
            cv2.LINE_AA,
        )
    table: Image = frame
    return table


def card_corners(
    center: tuple[float, float],
    height: float,
    aspect: float,
    angle_deg: float,
    jitter: float,
    rng: np.random.Generator,
) -> NDArray[Any]:
    """Outline of a card placed at ``center``: rotated, each corner moved by up to ``jitter`` x height."""
    w, h = height * aspect, height
    base = np.array([[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]], np.float32)
    a = math.radians(angle_deg)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], np.float32)
    moved = base @ rot.T + np.array(center, np.float32)
    moved += rng.uniform(-jitter * h, jitter * h, (4, 2)).astype(np.float32)
    return moved.astype(np.float32)


def paste(frame: Image, face: NDArray[Any], corners: NDArray[Any], shadow: bool = False) -> None:
    """Warp a BGRA face onto ``frame`` so that its corners land on ``corners`` (in place)."""
    fh, fw = face.shape[:2]
    src = np.array([[0, 0], [fw - 1, 0], [fw - 1, fh - 1], [0, fh - 1]], np.float32)
    x0, y0 = np.floor(corners.min(axis=0)).astype(int) - 6
    x1, y1 = np.ceil(corners.max(axis=0)).astype(int) + 6
    x0, y0 = max(x0, 0), max(y0, 0)
    x1, y1 = min(x1, frame.shape[1]), min(y1, frame.shape[0])
    if x1 <= x0 or y1 <= y0:
        return
    local = corners - np.array([x0, y0], np.float32)
    matrix = cv2.getPerspectiveTransform(src, local)
    warped = cv2.warpPerspective(face, matrix, (x1 - x0, y1 - y0), flags=cv2.INTER_AREA)
    region = frame[y0:y1, x0:x1].astype(np.float32)
    alpha = warped[:, :, 3:4].astype(np.float32) / 255.0
    if shadow:
        blurred = cv2.GaussianBlur(alpha, (0, 0), 2.5)
        blurred = blurred[:, :, None] if blurred.ndim == 2 else blurred
        region *= 1 - 0.45 * np.roll(blurred, (3, 3), axis=(0, 1))
    region = region * (1 - alpha) + warped[:, :, :3].astype(np.float32) * alpha
    frame[y0:y1, x0:x1] = np.clip(region, 0, 255).astype(np.uint8)


def _slot_center(slot: str, rng: np.random.Generator) -> tuple[float, float]:
    x0, y0, x1, y1 = SLOT_BOXES[slot]
    cx = (x0 + x1) / 2 * FRAME_W + rng.uniform(-10, 10)
    cy = (y0 + y1) / 2 * FRAME_H + rng.uniform(-15, 15)
    return float(cx), float(cy)


def _uneven(frame: Image, rng: np.random.Generator) -> Image:
    yy, xx = np.mgrid[0:FRAME_H, 0:FRAME_W].astype(np.float32)
    angle = rng.uniform(0, 2 * math.pi)
    ramp = (xx / FRAME_W - 0.5) * math.cos(angle) + (yy / FRAME_H - 0.5) * math.sin(angle)
    gain = 0.75 + 0.6 * ramp  # about 0.45 .. 1.05 across the frame
    vignette = 1 - 0.25 * (((xx - FRAME_W / 2) / FRAME_W) ** 2 + ((yy - FRAME_H / 2) / FRAME_H) ** 2) * 2
    lit = frame.astype(np.float32) * (gain * vignette)[:, :, None]
    out: Image = np.clip(lit, 0, 255).astype(np.uint8)
    return out


def _glare(frame: Image, cards: Sequence[PlacedCard], rng: np.random.Generator) -> Image:
    out = frame.astype(np.float32)
    yy, xx = np.mgrid[0:FRAME_H, 0:FRAME_W].astype(np.float32)
    for placed in cards[:2]:
        cx, cy = placed.corners.mean(axis=0) + rng.uniform(-60, 60, 2)
        sx, sy = rng.uniform(25, 60), rng.uniform(15, 40)
        spot = np.exp(-(((xx - cx) / sx) ** 2 + ((yy - cy) / sy) ** 2))
        out += 230 * spot[:, :, None]
    return np.clip(out, 0, 255).astype(np.uint8)


def _occlude(frame: Image, placed: PlacedCard, rng: np.random.Generator) -> None:
    """Cover part of a card with a skin-toned blob coming in from one side (a finger, a hand)."""
    c = placed.corners
    side = int(rng.integers(4))
    a, b = c[side], c[(side + 1) % 4]
    inward = c.mean(axis=0) - (a + b) / 2
    depth = rng.uniform(0.25, 0.45)
    t0, t1 = sorted(rng.uniform(0.1, 0.9, 2))
    p0, p1 = a + (b - a) * t0, a + (b - a) * max(t1, t0 + 0.25)
    poly = np.array(
        [p0 - inward * 0.3, p1 - inward * 0.3, p1 + inward * depth, p0 + inward * depth], np.int32
    )
    skin = (int(rng.uniform(90, 130)), int(rng.uniform(130, 170)), int(rng.uniform(190, 230)))
    cv2.fillPoly(frame, [poly], skin, cv2.LINE_AA)


def make_frame(
    faces: dict[Card, NDArray[Any]],
    cards: Sequence[Card],
    condition: str,
    rng: np.random.Generator,
) -> SynthFrame:
    """One frame of ``condition`` showing ``cards`` in the P1, B1, P2, B2... boxes."""
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}")
    frame = felt_table(rng)
    slots = ("P1", "B1", "P2", "B2", "P3", "B3")
    placed: list[PlacedCard] = []
    height_range, angle_span, jitter = (160.0, 200.0), 8.0, 0.015
    if condition == "perspective":
        # Any turn, tilted view; a bit smaller so turned cards stay inside their boxes.
        height_range, angle_span, jitter = (110.0, 140.0), 180.0, 0.06
    elif condition == "small":
        height_range = (66.0, 76.0)
    elif condition == "overlap":
        height_range = (140.0, 160.0)
    for i, card in enumerate(cards):
        face = faces[card]
        aspect = face.shape[1] / face.shape[0]
        height = rng.uniform(*height_range)
        angle = rng.uniform(-angle_span, angle_span)
        if condition == "overlap" and i % 2 == 1:
            # The second card of a pair lies over the first, shifted and turned.
            below = placed[-1]
            center = below.corners.mean(axis=0) + np.array(
                [rng.uniform(0.45, 0.6) * height * aspect, rng.uniform(-0.3, 0.3) * height]
            )
            corners = card_corners(
                (float(center[0]), float(center[1])),
                height,
                aspect,
                angle + rng.uniform(-20, 20),
                jitter,
                rng,
            )
            slot = below.slot
        else:
            slot = slots[(i // 2 if condition == "overlap" else i) % len(slots)]
            cx, cy = _slot_center(slot, rng)
            if condition == "overlap":
                cx -= 0.25 * height * aspect
            corners = card_corners((cx, cy), height, aspect, angle, jitter, rng)
        paste(frame, face, corners, shadow=condition == "overlap")
        placed.append(PlacedCard(card=card, corners=corners, slot=slot))
    if condition == "occlusion":
        for p in placed:
            _occlude(frame, p, rng)
    if condition == "blur":
        frame = cv2.GaussianBlur(frame, (0, 0), rng.uniform(1.2, 1.8))
    elif condition == "noise":
        noise = rng.normal(0, rng.uniform(8, 12), frame.shape)
        frame = np.clip(frame.astype(np.float32) + noise, 0, 255).astype(np.uint8)
    elif condition == "uneven_light":
        frame = _uneven(frame, rng)
    elif condition == "glare":
        frame = _glare(frame, placed, rng)
    return SynthFrame(image=frame, cards=tuple(placed), condition=condition)


def frame_set(
    faces: dict[Card, NDArray[Any]], condition: str, frames: int, seed: int, per_frame: int = 4
) -> list[SynthFrame]:
    """``frames`` frames of one condition; cards cycle through a shuffled deck."""
    rng = np.random.default_rng(seed)
    order = list(ALL_CARDS)
    rng.shuffle(order)
    out = []
    for f in range(frames):
        cards = [order[(f * per_frame + k) % len(order)] for k in range(per_frame)]
        out.append(make_frame(faces, cards, condition, rng))
    return out


def table_scene(
    faces: dict[Card, NDArray[Any]],
    cards: dict[str, Card],
    rng: np.random.Generator,
    occluded: Sequence[str] = (),
) -> SynthFrame:
    """A clean overhead frame with ``cards`` on their slots (``{"P1": card, ...}``), the cards of
    the ``occluded`` slots partly covered by a hand (as in the ``occlusion`` condition)."""
    frame = felt_table(rng)
    placed: list[PlacedCard] = []
    for slot, card in cards.items():
        face = faces[card]
        corners = card_corners(
            _slot_center(slot, rng), rng.uniform(160.0, 200.0), face.shape[1] / face.shape[0],
            rng.uniform(-8.0, 8.0), 0.015, rng,
        )  # fmt: skip
        paste(frame, face, corners)
        placed.append(PlacedCard(card=card, corners=corners, slot=slot))
    for p in placed:
        if p.slot in occluded:
            _occlude(frame, p, rng)
    return SynthFrame(image=frame, cards=tuple(placed), condition="occlusion" if occluded else "clean")
