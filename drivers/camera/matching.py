"""Glyph vectors against the deck's glyph templates: best label, its lead, the look-alike axis.

Templates are grouped per learned card height and rendering (sharp, blurred, slightly
turned) into :class:`TemplateBank` s; :func:`best_label` scores a glyph against one bank
and :func:`glyph_pair_separation` places it between two look-alike suits' mean glyphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

LABEL_SLOTS = 14
"""Label values are ranks 1..13 or suit indexes 0..3: one array slot per possible label."""


@dataclass(frozen=True, slots=True)
class LabelMatch:
    """Best label of one glyph, its score and its lead over the runner-up label."""

    label: int
    score: float
    margin: float


def best_label(
    vectors: NDArray[Any],
    labels: NDArray[Any],
    aspects: NDArray[Any],
    vector: NDArray[Any],
    *,
    aspect: float | None,
    max_aspect_error: float,
    allowed: frozenset[int] | None = None,
) -> LabelMatch | None:
    """Best label for ``vector`` (max correlation over its templates) and its lead over the
    runner-up label. Templates of a very different glyph aspect, or of labels not
    ``allowed``, are not compared."""
    if aspect is None:
        comparable = np.ones(len(aspects), dtype=bool)
    else:
        comparable = np.abs(aspects - aspect) <= max_aspect_error * aspects
    if allowed is not None:
        comparable &= np.isin(labels, list(allowed))
    if not comparable.any():
        return None
    # einsum, not ``@``: see drivers.camera.faces.match_face (BLAS thread wake-up latency).
    scores = np.einsum("ij,j->i", vectors[comparable], vector)
    per_label = np.full(LABEL_SLOTS, -2.0, dtype=np.float32)
    np.maximum.at(per_label, labels[comparable], scores)
    order = np.argsort(per_label)
    top, runner_up = int(order[-1]), float(per_label[order[-2]])
    best_score = float(per_label[top])
    return LabelMatch(label=top, score=best_score, margin=best_score - max(runner_up, -1.0))


@dataclass(frozen=True, slots=True)
class TemplateBank:
    """Templates of one glyph kind learned at one card height, in one rendering."""

    vectors: NDArray[Any]
    labels: NDArray[Any]
    aspects: NDArray[Any]
    means: dict[int, NDArray[Any]]


def template_banks(
    vectors: NDArray[Any],
    labels: NDArray[Any],
    aspects: NDArray[Any],
    heights: NDArray[Any],
    *,
    variants: NDArray[Any],
) -> dict[float, list[TemplateBank]]:
    """Templates grouped by learned height, then by rendering (one bank per variant)."""
    banks: dict[float, list[TemplateBank]] = {}
    for h in np.unique(heights).tolist():
        for v in np.unique(variants[heights == h]).tolist():
            sel = (heights == h) & (variants == v)
            means = {
                int(label): vectors[sel][labels[sel] == label].mean(axis=0)
                for label in np.unique(labels[sel])
            }
            banks.setdefault(float(h), []).append(
                TemplateBank(vectors[sel], labels[sel], aspects[sel], means)
            )
    return banks


def glyph_pair_separation(bank: TemplateBank, vector: NDArray[Any], label: int, rival: int) -> float:
    """Where ``vector`` lies between the mean glyphs of ``label`` (+1) and ``rival`` (-1).

    Correlation alone scores a club and a spade alike (same stem, same outline); the
    difference of their mean glyphs is the direction that tells them apart.
    """
    if label not in bank.means or rival not in bank.means:
        return -1.0
    own, other = bank.means[label], bank.means[rival]
    direction = own - other
    half = float(direction @ direction) / 2
    if half <= 1e-9:
        return 0.0
    midpoint = float(((own + other) / 2) @ direction)
    return (float(vector @ direction) - midpoint) / half
