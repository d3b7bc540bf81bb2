"""Rank and suit templates learned from the table's own deck, and their file format.

``learn_templates(faces_dir)`` reads 52 face images named ``<rank><suit>.png``
(``As.png``, ``Th.png``, ``Kd.png``...), puts each on a synthetic felt, finds and
warps it with the very code used on camera frames, locates its index and stores
the rank and suit glyphs of both index corners at several scales (a card 70 px
high on camera loses detail; templates learned from a shrunken face match that),
and the whole face at low resolution (:mod:`drivers.camera.faces`).

The templates file is a NumPy ``.npz`` without pickles; ``load_templates`` checks
every array and names the file and key on any mismatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from common.cards import ALL_CARDS, Card, CardParseError, Rank, Suit
from drivers.camera.faces import FACE_SIZE, both_orientations, face_picture, picture_vector, residual
from drivers.camera.geometry import Image, find_card_outlines, warp_corners
from drivers.camera.glyphs import (
    CORNER_SIZE,
    RANK_SIZE,
    SUIT_SIZE,
    IndexBoxes,
    box_aspect,
    find_glyph,
    glyph_vector,
    ink_mask,
    locate_index,
    read_corner_ink,
)

FORMAT_VERSION = 2
"""2: whole-face templates (``face_vectors``, ``face_labels``, ``face_mean``) added."""
SUIT_ORDER = "cdhs"
FELT_BGR = (40, 105, 25)
LEARN_HEIGHTS = (None, 300, 230, 185, 150, 125, 105, 90, 78, 68, 60)
"""Face heights (px) templates are learned at; None is the face's own size."""
LEARN_RENDERINGS: tuple[tuple[str, float], ...] = (("area", 0.0), ("area", 1.6), ("turned", 0.0))
"""How each face is shrunk to a learned height, and the Gaussian blur (sigma, px) added after:
area-averaged (a sharp camera), blurred (out of focus), linear (aliased, a cheap sensor or a
card seen at an angle). Index i here is the template's ``variant`` code."""
FACE_HEIGHTS = (200, 130)
"""Card heights (px) whole-face templates are learned at (a face vector hardly depends on it)."""


class TemplateError(ValueError):
    """The faces or the templates file are not usable; the message names file and field."""


@dataclass(frozen=True, slots=True)
class DeckTemplates:
    """Everything recognition needs to know about one deck's print."""

    deck: str
    index: IndexBoxes
    rank_vectors: NDArray[Any]
    rank_labels: NDArray[Any]
    rank_aspects: NDArray[Any]
    suit_vectors: NDArray[Any]
    suit_labels: NDArray[Any]
    suit_aspects: NDArray[Any]
    rank_heights: NDArray[Any]
    """Card height (px) at which each template was learned: recognition compares a card
    only with templates learned at the scale nearest to its own."""
    suit_heights: NDArray[Any]
    rank_variants: NDArray[Any]
    suit_variants: NDArray[Any]
    """Index into LEARN_RENDERINGS: each rendering is its own template bank."""
    face_vectors: NDArray[Any]
    """Whole-face templates (both 180-degree orientations, each learned height), the deck's
    mean face removed, unit norm; see :mod:`drivers.camera.faces`."""
    face_labels: NDArray[Any]
    """Index into ``ALL_CARDS`` of each face template."""
    face_mean: NDArray[Any]
    """The deck's mean face vector, removed from every face before correlation."""


def read_face(path: Path) -> Image:
    """A face image as BGR; transparency is flattened onto the felt colour."""
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise TemplateError(f"{path}: not a readable image")
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.shape[2] == 4:
        alpha = image[:, :, 3:4].astype(np.float32) / 255.0
        felt = np.empty_like(image[:, :, :3])
        felt[:] = FELT_BGR
        image = (image[:, :, :3] * alpha + felt * (1 - alpha)).astype(np.uint8)
    bgr: Image = np.ascontiguousarray(image[:, :, :3])
    return bgr


def _on_felt(face: Image, height: int | None, shrink: str = "area") -> Image:
    if height is not None:
        scale = height / face.shape[0]
        method = cv2.INTER_AREA if shrink == "area" else cv2.INTER_LINEAR
        face = cv2.resize(face, None, fx=scale, fy=scale, interpolation=method)
    pad = max(60, face.shape[0] // 4)
    canvas: Image = cv2.copyMakeBorder(face, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=FELT_BGR)
    return canvas


def _warped_face(face: Image, height: int | None, path: Path) -> tuple[Image, Image]:
    """The face as the camera code sees it; the face must show exactly one card."""
    warped = _rendered_face(face, height, 0.0, "area")
    if warped is None:
        raise TemplateError(
            f"{path}: expected one card outline in the face image "
            "(the image must show exactly one card, edge to edge)"
        )
    return warped


def _rendered_face(face: Image, height: int | None, blur: float, shrink: str) -> tuple[Image, Image] | None:
    """The face shrunk/blurred as a camera might show it, found and warped; None if lost."""
    canvas = _on_felt(face, height, "area")
    if shrink == "turned":
        h, w = canvas.shape[:2]
        matrix = cv2.getRotationMatrix2D((w / 2, h / 2), 7.0, 1.0)
        canvas = cv2.warpAffine(canvas, matrix, (w, h), flags=cv2.INTER_LINEAR, borderValue=FELT_BGR)
    if blur > 0:
        canvas = cv2.GaussianBlur(canvas, (0, 0), blur)
    outlines = find_card_outlines(canvas)
    if len(outlines) != 1:
        return None
    return warp_corners(canvas, outlines[0], CORNER_SIZE)


def _learn_faces(faces: dict[Card, Image]) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Whole-face templates: vectors (mean face removed), card labels, the mean face."""
    vectors, labels = [], []
    for card, face in faces.items():
        for height in FACE_HEIGHTS:
            canvas = _on_felt(face, height)
            outlines = find_card_outlines(canvas)
            if len(outlines) != 1:
                continue
            for picture in both_orientations(face_picture(canvas, outlines[0])):
                vectors.append(picture_vector(picture))
                labels.append(ALL_CARDS.index(card))
    raw = np.array(vectors, dtype=np.float32)
    mean_face = raw.mean(axis=0).astype(np.float32)
    templates = np.array([residual(v, mean_face) for v in raw], dtype=np.float32)
    return templates, np.array(labels, dtype=np.int16), mean_face


def _deck_index(boxes: list[IndexBoxes]) -> IndexBoxes:
    def spread(items: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
        arr = np.array(items)
        return (
            int(np.percentile(arr[:, 0], 5)),
            int(np.percentile(arr[:, 1], 5)),
            int(np.percentile(arr[:, 2], 95)),
            int(np.percentile(arr[:, 3], 95)),
        )

    return IndexBoxes(rank=spread([b.rank for b in boxes]), suit=spread([b.suit for b in boxes]))


def _face_paths(faces_dir: Path) -> dict[Card, Path]:
    if not faces_dir.is_dir():
        raise TemplateError(f"{faces_dir}: not a directory of face images")
    found: dict[Card, Path] = {}
    for path in sorted(faces_dir.iterdir()):
        if path.suffix.lower() not in {".png", ".jpg", ".jpeg", ".bmp"}:
            continue
        try:
            card = Card.parse(path.stem)
        except CardParseError as exc:
            raise TemplateError(f"{path}: file name is not a card code <rank><suit>: {exc}") from exc
        if card in found:
            raise TemplateError(f"{path}: card {card} already given by {found[card]}")
        found[card] = path
    missing = [c.code for c in ALL_CARDS if c not in found]
    if missing:
        raise TemplateError(f"{faces_dir}: missing face images for {', '.join(missing)}")
    return found


def learn_templates(faces_dir: Path, deck: str | None = None) -> DeckTemplates:
    """Learn a deck's templates from its 52 face images."""
    paths = _face_paths(faces_dir)
    faces = {card: read_face(path) for card, path in paths.items()}
    located: list[IndexBoxes] = []
    unlocated: list[str] = []
    for card, face in faces.items():
        for view in _warped_face(face, None, paths[card]):
            mask = ink_mask(view)
            boxes = locate_index(mask) if mask is not None else None
            if boxes is None:
                unlocated.append(card.code)
            else:
                located.append(boxes)
    # Court-card pictures can touch the index; the deck's index position is shared by
    # all cards, so most corners locating it cleanly is enough.
    if len(located) < 0.75 * 2 * len(faces):
        raise TemplateError(
            f"{faces_dir}: the rank/suit index could not be located on {len(unlocated)} of "
            f"{2 * len(faces)} corners ({', '.join(sorted(set(unlocated)))}); are these card faces?"
        )
    index = _deck_index(located)
    rank_vectors, rank_labels, rank_aspects, rank_heights, rank_variants = [], [], [], [], []
    suit_vectors, suit_labels, suit_aspects, suit_heights, suit_variants = [], [], [], [], []
    for card, face in faces.items():
        for height in LEARN_HEIGHTS:
            learned_at = float(height or face.shape[0])
            views: list[tuple[int, Image]] = []
            for variant, (shrink, blur) in enumerate(LEARN_RENDERINGS):
                # Renderings too degraded to find the card in teach nothing; skip them.
                rendered = _rendered_face(face, height, blur, shrink)
                if rendered is not None:
                    views.extend((variant, view) for view in rendered)
            for variant, view in views:
                corner = read_corner_ink(view)
                if corner is None:
                    continue
                rank_glyph = find_glyph(corner, index.rank)
                suit_glyph = find_glyph(corner, index.suit)
                if rank_glyph is not None:
                    rank_vectors.append(glyph_vector(rank_glyph, RANK_SIZE))
                    rank_labels.append(int(card.rank))
                    rank_aspects.append(box_aspect(rank_glyph.box))
                    rank_heights.append(learned_at)
                    rank_variants.append(variant)
                if suit_glyph is not None:
                    suit_vectors.append(glyph_vector(suit_glyph, SUIT_SIZE))
                    suit_labels.append(SUIT_ORDER.index(card.suit.value))
                    suit_aspects.append(box_aspect(suit_glyph.box))
                    suit_heights.append(learned_at)
                    suit_variants.append(variant)
    face_vectors, face_labels, face_mean = _learn_faces(faces)
    return DeckTemplates(
        deck=deck or faces_dir.name,
        index=index,
        rank_vectors=np.array(rank_vectors, dtype=np.float32),
        rank_labels=np.array(rank_labels, dtype=np.int16),
        rank_aspects=np.array(rank_aspects, dtype=np.float32),
        suit_vectors=np.array(suit_vectors, dtype=np.float32),
        suit_labels=np.array(suit_labels, dtype=np.int16),
        suit_aspects=np.array(suit_aspects, dtype=np.float32),
        rank_heights=np.array(rank_heights, dtype=np.float32),
        suit_heights=np.array(suit_heights, dtype=np.float32),
        rank_variants=np.array(rank_variants, dtype=np.int16),
        suit_variants=np.array(suit_variants, dtype=np.int16),
        face_vectors=face_vectors,
        face_labels=face_labels,
        face_mean=face_mean,
    )


def save_templates(templates: DeckTemplates, path: Path) -> None:
    """Write ``templates`` to ``path`` (.npz)."""
    meta = {
        "format": "baccarat-edge-card-templates",
        "version": FORMAT_VERSION,
        "deck": templates.deck,
        "rank_box": list(templates.index.rank),
        "suit_box": list(templates.index.suit),
    }
    with path.open("wb") as handle:
        np.savez_compressed(
            handle,
            meta=np.array(json.dumps(meta)),
            rank_vectors=templates.rank_vectors,
            rank_labels=templates.rank_labels,
            rank_aspects=templates.rank_aspects,
            suit_vectors=templates.suit_vectors,
            suit_labels=templates.suit_labels,
            suit_aspects=templates.suit_aspects,
            rank_heights=templates.rank_heights,
            suit_heights=templates.suit_heights,
            rank_variants=templates.rank_variants,
            suit_variants=templates.suit_variants,
            face_vectors=templates.face_vectors,
            face_labels=templates.face_labels,
            face_mean=templates.face_mean,
        )


def _array(data: np.lib.npyio.NpzFile, key: str, path: Path, ndim: int, *, kind: str) -> NDArray[np.generic]:
    if key not in data.files:
        raise TemplateError(f"{path}: missing array {key!r}")
    array = data[key]
    if array.ndim != ndim or array.dtype.kind != kind:
        raise TemplateError(f"{path}: {key!r} must be a {ndim}-d array of kind {kind!r}, got {array.dtype}")
    return array


def _box(value: object, path: Path, key: str) -> tuple[int, int, int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 4
        or not all(isinstance(v, int) and 0 <= v <= 400 for v in value)
        or value[0] >= value[2]
        or value[1] >= value[3]
    ):
        raise TemplateError(f"{path}: meta.{key} must be [x0, y0, x1, y1] pixel ints, got {value!r}")
    return (value[0], value[1], value[2], value[3])


def load_templates(path: Path) -> DeckTemplates:
    """Read and validate a templates file written by :func:`save_templates`."""
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError as exc:
        raise TemplateError(f"{path}: templates file not found") from exc
    except (OSError, ValueError) as exc:
        raise TemplateError(f"{path}: not a templates file ({exc})") from exc
    with data:
        try:
            meta = json.loads(str(_array(data, "meta", path, 0, kind="U")))
        except json.JSONDecodeError as exc:
            raise TemplateError(f"{path}: meta is not JSON ({exc})") from exc
        if not isinstance(meta, dict) or meta.get("format") != "baccarat-edge-card-templates":
            raise TemplateError(f"{path}: meta.format is not 'baccarat-edge-card-templates'")
        if meta.get("version") != FORMAT_VERSION:
            raise TemplateError(
                f"{path}: meta.version {meta.get('version')!r} unsupported (want {FORMAT_VERSION}); "
                "recalibrate the deck with `baccarat-edge camera calibrate`"
            )
        deck = meta.get("deck")
        if not isinstance(deck, str):
            raise TemplateError(f"{path}: meta.deck must be a string")
        index = IndexBoxes(
            rank=_box(meta.get("rank_box"), path, "rank_box"),
            suit=_box(meta.get("suit_box"), path, "suit_box"),
        )
        rank_vectors = _array(data, "rank_vectors", path, 2, kind="f").astype(np.float32)
        rank_labels = _array(data, "rank_labels", path, 1, kind="i").astype(np.int16)
        rank_aspects = _array(data, "rank_aspects", path, 1, kind="f").astype(np.float32)
        suit_vectors = _array(data, "suit_vectors", path, 2, kind="f").astype(np.float32)
        suit_labels = _array(data, "suit_labels", path, 1, kind="i").astype(np.int16)
        suit_aspects = _array(data, "suit_aspects", path, 1, kind="f").astype(np.float32)
        rank_heights = _array(data, "rank_heights", path, 1, kind="f").astype(np.float32)
        suit_heights = _array(data, "suit_heights", path, 1, kind="f").astype(np.float32)
        rank_variants = _array(data, "rank_variants", path, 1, kind="i").astype(np.int16)
        suit_variants = _array(data, "suit_variants", path, 1, kind="i").astype(np.int16)
        face_vectors = _array(data, "face_vectors", path, 2, kind="f").astype(np.float32)
        face_labels = _array(data, "face_labels", path, 1, kind="i").astype(np.int16)
        face_mean = _array(data, "face_mean", path, 1, kind="f").astype(np.float32)
    checks = [
        ("rank_vectors", rank_vectors.shape[1] == RANK_SIZE[0] * RANK_SIZE[1]),
        ("suit_vectors", suit_vectors.shape[1] == SUIT_SIZE[0] * SUIT_SIZE[1]),
        ("rank_labels", len(rank_labels) == len(rank_vectors) == len(rank_aspects) == len(rank_heights)),
        ("suit_labels", len(suit_labels) == len(suit_vectors) == len(suit_aspects) == len(suit_heights)),
        ("rank_variants", len(rank_variants) == len(rank_labels) and bool((rank_variants >= 0).all())),
        ("suit_variants", len(suit_variants) == len(suit_labels) and bool((suit_variants >= 0).all())),
        ("rank_heights", bool((rank_heights > 0).all())),
        ("suit_heights", bool((suit_heights > 0).all())),
        ("rank_labels", set(rank_labels.tolist()) == {int(r) for r in Rank}),
        ("suit_labels", set(suit_labels.tolist()) == set(range(len(Suit)))),
        ("rank_vectors", bool(np.isfinite(rank_vectors).all())),
        ("suit_vectors", bool(np.isfinite(suit_vectors).all())),
        ("face_vectors", face_vectors.shape[1] == FACE_SIZE[0] * FACE_SIZE[1]),
        ("face_vectors", bool(np.isfinite(face_vectors).all())),
        ("face_labels", len(face_labels) == len(face_vectors)),
        ("face_labels", set(face_labels.tolist()) == set(range(len(ALL_CARDS)))),
        ("face_mean", face_mean.shape == (FACE_SIZE[0] * FACE_SIZE[1],)),
        ("face_mean", bool(np.isfinite(face_mean).all())),
    ]
    for key, ok in checks:
        if not ok:
            raise TemplateError(f"{path}: {key!r} has the wrong shape or values for this reader")
    return DeckTemplates(
        deck=deck,
        index=index,
        rank_vectors=rank_vectors,
        rank_labels=rank_labels,
        rank_aspects=rank_aspects,
        suit_vectors=suit_vectors,
        suit_labels=suit_labels,
        suit_aspects=suit_aspects,
        rank_heights=rank_heights,
        suit_heights=suit_heights,
        rank_variants=rank_variants,
        suit_variants=suit_variants,
        face_vectors=face_vectors,
        face_labels=face_labels,
        face_mean=face_mean,
    )
