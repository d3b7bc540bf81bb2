"""One index corner → what it says: rank and suit glyphs matched, print colour, card or why not.

A corner names a card only when its rank and suit both match the deck's templates well
and clearly better than any other rank or suit, and the print colour (measured apart
from the shape) agrees with the suit; otherwise the reading keeps its best guesses and
the reason, for the decision rules (:mod:`drivers.camera.decide`) to weigh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.cards import Card, Rank, Suit
from drivers.camera.geometry import Image
from drivers.camera.glyphs import (
    RANK_SIZE,
    SUIT_SIZE,
    Glyph,
    box_aspect,
    boxes_joined,
    find_glyph,
    glyph_vector,
    read_corner_ink,
    redness,
)
from drivers.camera.matching import (
    LabelMatch,
    TemplateBank,
    best_label,
    glyph_pair_separation,
    template_banks,
)
from drivers.camera.suits import BLACK_LABELS, RED_LABELS, RED_SUITS, SAME_COLOUR
from drivers.camera.templates import SUIT_ORDER, DeckTemplates
from drivers.camera.thresholds import RecognitionParams

NO_PRINT = "no print in corner"
"""The reason of a corner with no print at all (washed out by glare, or covered)."""


@dataclass(frozen=True, slots=True)
class CornerReading:
    """What one index corner says."""

    rank: LabelMatch | None
    suit: LabelMatch | None
    red: bool | None
    card: Card | None
    confidence: float
    reason: str
    tangled: bool = False
    """A glyph touched other print (cut out by its box): weak evidence, never a veto."""


class CornerReader:
    """Reads upright warped index corners against one deck's rank and suit glyph templates."""

    def __init__(self, templates: DeckTemplates, params: RecognitionParams) -> None:
        self.templates = templates
        self.params = params
        t = templates
        self._rank_banks = template_banks(
            t.rank_vectors, t.rank_labels, t.rank_aspects, t.rank_heights, variants=t.rank_variants
        )
        self._suit_banks = template_banks(
            t.suit_vectors, t.suit_labels, t.suit_aspects, t.suit_heights, variants=t.suit_variants
        )
        self.heights = np.array(sorted(self._rank_banks), dtype=np.float32)
        """The card heights (px) the glyph templates were learned at, ascending."""

    def nearest_height(self, height_px: float) -> float:
        """The learned card height nearest (in ratio) to a card seen ``height_px`` high."""
        distance = np.abs(np.log(self.heights / max(height_px, 1.0)))
        return float(self.heights[int(np.argmin(distance))])

    def _match(
        self,
        glyph: Glyph,
        banks: list[TemplateBank],
        size: tuple[int, int],
        partner: dict[int, int] | None = None,
        *,
        allowed: frozenset[int] | None = None,
    ) -> LabelMatch | None:
        """Match against the rendering (sharp, blurred, aliased) the glyph resembles most."""
        vector = glyph_vector(glyph, size)
        # A glyph cut out by its expected box has that box's shape, not its own.
        aspect = None if glyph.windowed else box_aspect(glyph.box)
        match: LabelMatch | None = None
        bank = banks[0]
        for candidate in banks:
            found = best_label(
                candidate.vectors,
                candidate.labels,
                candidate.aspects,
                vector,
                aspect=aspect,
                max_aspect_error=self.params.max_aspect_error,
                allowed=allowed,
            )
            if found is not None and (match is None or found.score > match.score):
                match, bank = found, candidate
        if match is None or partner is None:
            return match
        # Margin against the look-alike of the same colour, along the axis that separates them,
        # rescaled so that ``min_suit_separation`` lands on ``min_margin``.
        separation = glyph_pair_separation(bank, vector, match.label, partner[match.label])
        return LabelMatch(
            match.label, match.score, separation * self.params.min_margin / self.params.min_suit_separation
        )

    def read(self, view: Image, scale: float) -> CornerReading:
        """Read the top-left index of an upright warped card view.

        ``scale`` is the learned card height whose templates are compared (see :meth:`nearest_height`).
        """
        p = self.params
        corner = read_corner_ink(view)
        if corner is None:
            return CornerReading(None, None, None, None, 0.0, NO_PRINT)
        rank_glyph = find_glyph(corner, self.templates.index.rank)
        suit_glyph = find_glyph(corner, self.templates.index.suit)
        tangled = bool((rank_glyph and rank_glyph.windowed) or (suit_glyph and suit_glyph.windowed))
        if (
            rank_glyph
            and suit_glyph
            and rank_glyph.windowed
            and suit_glyph.windowed
            and boxes_joined(corner, self.templates.index.rank, self.templates.index.suit)
        ):
            # Blur has run the rank into the suit: cut apart by their boxes, a blurred club
            # keeps a spade's outline (its lobes merged), so neither glyph is evidence.
            return CornerReading(None, None, None, None, 0.0, "rank and suit print run together", True)
        rank = self._match(rank_glyph, self._rank_banks[scale], RANK_SIZE) if rank_glyph else None
        red: bool | None = None
        if rank_glyph and suit_glyph:
            level = min(redness(view, rank_glyph), redness(view, suit_glyph))
            top = max(redness(view, rank_glyph), redness(view, suit_glyph))
            if level >= p.red_min:
                red = True
            elif top <= p.black_max:
                red = False
        if rank is None or suit_glyph is None:
            return CornerReading(rank, None, red, None, 0.0, "index glyphs not found", tangled)
        banks = self._suit_banks[scale]
        shape = self._match(suit_glyph, banks, SUIT_SIZE, SAME_COLOUR)
        suit = shape
        if red is not None:
            # Blurred, a diamond's outline is a spade's: the colour, measured apart, picks the
            # pair of suits and the shape only chooses within it...
            suit = self._match(
                suit_glyph, banks, SUIT_SIZE, SAME_COLOUR, allowed=RED_LABELS if red else BLACK_LABELS
            )
            # ...unless the shape plainly belongs to the other colour: then nothing is sure.
            if (
                suit is not None
                and shape is not None
                and shape.label != suit.label
                and shape.score - suit.score > p.colour_shape_gap
            ):
                reason = "suit shape contradicts print colour"
                return CornerReading(rank, suit, red, None, 0.0, reason, tangled)
        if suit is None:
            return CornerReading(rank, suit, red, None, 0.0, "index glyphs not found", tangled)
        if rank.score < p.min_score or suit.score < p.min_score:
            return CornerReading(rank, suit, red, None, 0.0, "weak template match", tangled)
        if rank.margin < p.min_margin or suit.margin < p.min_margin:
            return CornerReading(rank, suit, red, None, 0.0, "ambiguous template match", tangled)
        card = Card(Rank(rank.label), Suit(SUIT_ORDER[suit.label]))
        if red is None:
            return CornerReading(rank, suit, red, None, 0.0, "print colour undecided", tangled)
        if red != (card.suit in RED_SUITS):
            return CornerReading(rank, suit, red, None, 0.0, "print colour contradicts suit", tangled)
        confidence = min(
            1.0,
            (rank.score - p.min_score) / (1.0 - p.min_score) * 0.5 + 0.5,
            (suit.score - p.min_score) / (1.0 - p.min_score) * 0.5 + 0.5,
            rank.margin / (2 * p.min_margin),
            suit.margin / (2 * p.min_margin),
        )
        return CornerReading(rank, suit, red, card, max(0.0, confidence), "read", tangled)
