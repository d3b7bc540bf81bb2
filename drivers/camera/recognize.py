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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from common.cards import ALL_CARDS, Card, Rank, Suit
from drivers.camera.faces import FaceMatch, face_picture, match_face, picture_vector
from drivers.camera.geometry import CardOutline, DetectorParams, Image, detect_cards, warp_corners
from drivers.camera.glyphs import (
    CORNER_SIZE,
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
from drivers.camera.templates import SUIT_ORDER, DeckTemplates

_LABEL_SLOTS = 14
"""Label values are ranks 1..13 or suit indexes 0..3: one array slot per possible label."""
_RED_SUITS = frozenset({Suit.DIAMONDS, Suit.HEARTS})
_RED = frozenset({SUIT_ORDER.index("d"), SUIT_ORDER.index("h")})
_BLACK = frozenset({SUIT_ORDER.index("c"), SUIT_ORDER.index("s")})
_SAME_COLOUR = {
    SUIT_ORDER.index(a): SUIT_ORDER.index(b) for a, b in (("c", "s"), ("s", "c"), ("d", "h"), ("h", "d"))
}


_NO_PRINT = "no print in corner"


def _suit_index(card: Card) -> int:
    return SUIT_ORDER.index(card.suit.value)


@dataclass(frozen=True, slots=True)
class RecognitionParams:
    """Acceptance thresholds. Scores are normalised correlations in [-1, 1]."""

    min_score: float = 0.85
    """Best rank (and suit) template correlation needed to name it."""
    min_margin: float = 0.10
    """Best score minus the best score of any *other* rank (suit)."""
    min_suit_separation: float = 0.3
    """Suit vs its same-colour look-alike: how far (0 = midway, 1 = at the own mean glyph)
    toward the own suit's mean glyph a suit must lie, along the axis separating the two."""
    contradiction_score: float = 0.75
    """A second corner whose best other label scores this well vetoes the first corner."""
    contradiction_margin: float = 0.03
    """...and leads its runner-up by at least this much."""
    contradiction_suit_margin: float = 0.0
    """...for a suit, any lead at all: a suit's margin is its position between it and its
    look-alike, so >= 0 means the shape lies on the other suit's side of the midpoint."""
    contradiction_shape_score: float = 0.70
    """A second corner whose suit scores this well and whose shape lies on the look-alike's
    side (club/spade, diamond/heart) by at least ``min_margin`` vetoes the first corner."""
    max_aspect_error: float = 0.35
    """Relative glyph height/width difference beyond which a template is not compared."""
    colour_shape_gap: float = 0.08
    """A suit shape matching the other colour's suits better by more than this vetoes the corner."""
    red_min: float = 35.0
    """Print redness (R - max(G, B)) above which print is red."""
    black_max: float = 20.0
    """Print redness below which print is black; in between the colour is undecided."""
    single_corner_min_score: float = 0.85
    """With one readable corner only, rank and suit must both score at least this."""
    single_corner_margin_factor: float = 1.0
    """...and lead by this multiple of ``min_margin``: the other corner cannot vouch."""
    single_corner_factor: float = 0.8
    """Confidence multiplier when only one index corner could be read."""
    face_veto_deficit: float = 0.15
    """A corner read is dropped when the face correlates this much better with another card
    (a foreign deck's K♠ read K♣ by one corner, its face nearest K♥ by 0.18)."""
    face_lookalike_deficit: float = 0.03
    """A corner read is dropped when the face prefers the same rank in the look-alike suit
    (club/spade, heart/diamond) by this much (an svg-cards 3♠ 70 px high read 3♣ by both
    corners, its face 0.045 nearer 3♠)..."""
    face_lookalike_min_score: float = 0.6
    """...and the face is visible enough to say so (a covered face correlates poorly)."""
    weak_face_score: float = 0.75
    """A one-corner read whose face correlates less than this with the card (a face of another
    deck, or a half-covered one)..."""
    weak_face_corner_score: float = 0.88
    """...needs its rank and suit to score at least this (a foreign deck's 7♠ read 7♣ by one
    corner at 0.86, its face 0.67)."""
    face_confirm_margin: float = 0.12
    """A face naming a one-corner read's card by this lead overrules the other corner's suit
    looking like the look-alike (a rank or colour pointing elsewhere still vetoes)."""
    near_rank_score: float = 0.80
    """Both corners whose rank scores this (with the usual lead) and whose suit lies this far..."""
    near_suit_margin: float = 0.05
    """...toward the card's suit (in ``min_margin`` units) name it when the face names it too."""
    face_min_score: float = 0.88
    """The face's best correlation needed before the face can name a card the corners did not."""
    face_min_margin: float = 0.05
    """...its lead over the runner-up card when a corner agrees with its rank or suit..."""
    face_alone_margin: float = 0.05
    """...and when no corner agrees (none may point elsewhere either, and both must show print:
    a corner washed out by glare may hide the pip that would change the face's answer)."""
    face_support_rank_score: float = 0.5
    """A corner agrees with the face's rank when its best rank is that rank with this score..."""
    face_support_suit_score: float = 0.7
    """...or with its suit: best suit with this score, on the suit's side of the look-alike
    axis, in the right print colour."""
    pair_min_separation: float = 0.3
    """Club/spade, heart/diamond of one rank: the face's lead over the look-alike divided by
    half the squared distance between the two learned faces (0 = midway, 1 = at the card's
    own face). Where the face names a card, this replaces the raw lead over the look-alike
    (3♣ vs 3♠ lead by 0.02 on blurred frames, separation 0.6-1.0)."""
    pair_single_veto_separation: float = 0.2
    """A one-corner read (the other corner cannot vouch) is dropped at this separation toward
    the look-alike (held-out seed 149: a younestouati 2♠ 110 px high read 2♣ by one corner,
    its face 0.48 toward 2♠, raw lead 0.012). 0.1 would cost 2 right reads on seeds 7-79."""
    pair_confirm_separation: float = 0.5
    """The face *settles* the look-alike question at this separation (score >= ``face_min_score``,
    lead over every other card >= ``face_min_margin``): a one-corner read whose other corner's
    suit looks like the look-alike, or two corners split between the pair, are named by it, and
    a corner suit shaped like the look-alike no longer vetoes the face's card. A corner read
    whose face lies this far toward the look-alike (score >= ``face_lookalike_min_score``) is
    dropped."""


@dataclass(frozen=True, slots=True)
class LabelMatch:
    """Best label of one glyph, its score and its lead over the runner-up label."""

    label: int
    score: float
    margin: float


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


@dataclass(frozen=True, slots=True)
class Recognition:
    """One card outline in a frame and what it is (``card`` None = unknown, abstained)."""

    outline: CardOutline
    card: Card | None
    confidence: float
    reason: str
    corners: tuple[CornerReading, ...] = field(default=())
    face: FaceMatch | None = None


def _best(
    vectors: NDArray[Any],
    labels: NDArray[Any],
    aspects: NDArray[Any],
    vector: NDArray[Any],
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
    per_label = np.full(_LABEL_SLOTS, -2.0, dtype=np.float32)
    np.maximum.at(per_label, labels[comparable], scores)
    order = np.argsort(per_label)
    best_label, runner_up = int(order[-1]), float(per_label[order[-2]])
    best_score = float(per_label[best_label])
    return LabelMatch(label=best_label, score=best_score, margin=best_score - max(runner_up, -1.0))


@dataclass(frozen=True, slots=True)
class _Bank:
    """Templates of one glyph kind learned at one card height."""

    vectors: NDArray[Any]
    labels: NDArray[Any]
    aspects: NDArray[Any]
    means: dict[int, NDArray[Any]]


def _banks(
    vectors: NDArray[Any],
    labels: NDArray[Any],
    aspects: NDArray[Any],
    heights: NDArray[Any],
    variants: NDArray[Any],
) -> dict[float, list[_Bank]]:
    """Templates grouped by learned height, then by rendering (one bank per variant)."""
    banks: dict[float, list[_Bank]] = {}
    for h in np.unique(heights).tolist():
        for v in np.unique(variants[heights == h]).tolist():
            sel = (heights == h) & (variants == v)
            means = {
                int(label): vectors[sel][labels[sel] == label].mean(axis=0)
                for label in np.unique(labels[sel])
            }
            banks.setdefault(float(h), []).append(_Bank(vectors[sel], labels[sel], aspects[sel], means))
    return banks


def _pair_separation(bank: _Bank, vector: NDArray[Any], label: int, rival: int) -> float:
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


def _look_alike(label: int) -> int:
    """Index in ``ALL_CARDS`` of the same rank in the same-colour look-alike suit."""
    card = ALL_CARDS[label]
    return ALL_CARDS.index(Card(card.rank, Suit(SUIT_ORDER[_SAME_COLOUR[_suit_index(card)]])))


def _pair_spread(vectors: NDArray[Any], labels: NDArray[Any]) -> NDArray[Any]:
    """Per card: half the mean squared distance between its learned faces and its look-alike's.

    A card and its look-alike (3♣/3♠) differ only in pip shape, so their faces correlate
    with any picture almost equally; the lead of one over the other is evidence only in
    proportion to how far apart the two learned faces are. Faces are unit vectors learned
    in the same order per card (height, orientation), so slot k of one card matches slot k
    of the other.
    """
    spread = np.ones(len(ALL_CARDS), dtype=np.float32)
    for label in range(len(ALL_CARDS)):
        own, other = vectors[labels == label], vectors[labels == _look_alike(label)]
        count = min(len(own), len(other))
        if count:
            difference = own[:count] - other[:count]
            spread[label] = max(float(np.einsum("ij,ij->i", difference, difference).mean()) / 2, 1e-6)
    return spread


class Recognizer:
    """Recognises the cards of one deck in BGR frames."""

    def __init__(
        self,
        templates: DeckTemplates,
        params: RecognitionParams | None = None,
        detector: DetectorParams | None = None,
    ) -> None:
        self.templates = templates
        self.params = params or RecognitionParams()
        self.detector = detector or DetectorParams()
        t = templates
        self._rank_banks = _banks(
            t.rank_vectors, t.rank_labels, t.rank_aspects, t.rank_heights, t.rank_variants
        )
        self._suit_banks = _banks(
            t.suit_vectors, t.suit_labels, t.suit_aspects, t.suit_heights, t.suit_variants
        )
        self._heights = np.array(sorted(self._rank_banks), dtype=np.float32)
        self._pair_spread = _pair_spread(t.face_vectors, t.face_labels)

    def _scale(self, height_px: float) -> float:
        """The learned card height nearest (in ratio) to a card seen ``height_px`` high."""
        distance = np.abs(np.log(self._heights / max(height_px, 1.0)))
        return float(self._heights[int(np.argmin(distance))])

    def recognize_frame(self, frame: Image) -> list[Recognition]:
        """Every card outline in ``frame`` with its card or an explicit unknown."""
        return self.analyse(frame)[0]

    def analyse(self, frame: Image) -> tuple[list[Recognition], Image]:
        """Recognitions, plus the not-felt mask (at detection scale) for occupancy checks."""
        outlines, mask = detect_cards(frame, self.detector)
        return [self.recognize_outline(frame, outline) for outline in outlines], mask

    def recognize_outline(self, frame: Image, outline: CardOutline) -> Recognition:
        """Read one outline found in ``frame``."""
        scale = self._scale(outline.height_px)
        views = warp_corners(frame, outline, CORNER_SIZE)
        readings = tuple(self.read_corner(view, scale) for view in views)
        face = self.read_face(frame, outline)
        card, confidence, reason = self.decide(readings, face)
        return Recognition(
            outline=outline, card=card, confidence=confidence, reason=reason, corners=readings, face=face
        )

    def read_face(self, frame: Image, outline: CardOutline) -> FaceMatch | None:
        """Correlate the whole card in ``outline`` with the deck's 52 learned faces."""
        t = self.templates
        vector = picture_vector(face_picture(frame, outline))
        return match_face(vector, t.face_vectors, t.face_labels, t.face_mean, len(ALL_CARDS))

    def _match(
        self,
        glyph: Glyph,
        banks: list[_Bank],
        size: tuple[int, int],
        partner: dict[int, int] | None = None,
        allowed: frozenset[int] | None = None,
    ) -> LabelMatch | None:
        """Match against the rendering (sharp, blurred, aliased) the glyph resembles most."""
        vector = glyph_vector(glyph, size)
        # A glyph cut out by its expected box has that box's shape, not its own.
        aspect = None if glyph.windowed else box_aspect(glyph.box)
        match: LabelMatch | None = None
        bank = banks[0]
        for candidate in banks:
            found = _best(
                candidate.vectors,
                candidate.labels,
                candidate.aspects,
                vector,
                aspect,
                self.params.max_aspect_error,
                allowed,
            )
            if found is not None and (match is None or found.score > match.score):
                match, bank = found, candidate
        if match is None or partner is None:
            return match
        # Margin against the look-alike of the same colour, along the axis that separates them,
        # rescaled so that ``min_suit_separation`` lands on ``min_margin``.
        separation = _pair_separation(bank, vector, match.label, partner[match.label])
        return LabelMatch(
            match.label, match.score, separation * self.params.min_margin / self.params.min_suit_separation
        )

    def read_corner(self, view: Image, scale: float | None = None) -> CornerReading:
        """Read the top-left index of an upright warped card view.

        ``scale`` is the learned card height whose templates are compared (default: the largest).
        """
        p = self.params
        scale = scale if scale is not None else float(self._heights[-1])
        corner = read_corner_ink(view)
        if corner is None:
            return CornerReading(None, None, None, None, 0.0, _NO_PRINT)
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
        shape = self._match(suit_glyph, banks, SUIT_SIZE, _SAME_COLOUR)
        suit = shape
        if red is not None:
            # Blurred, a diamond's outline is a spade's: the colour, measured apart, picks the
            # pair of suits and the shape only chooses within it...
            suit = self._match(suit_glyph, banks, SUIT_SIZE, _SAME_COLOUR, _RED if red else _BLACK)
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
        if red != (card.suit in _RED_SUITS):
            return CornerReading(rank, suit, red, None, 0.0, "print colour contradicts suit", tangled)
        confidence = min(
            1.0,
            (rank.score - p.min_score) / (1.0 - p.min_score) * 0.5 + 0.5,
            (suit.score - p.min_score) / (1.0 - p.min_score) * 0.5 + 0.5,
            rank.margin / (2 * p.min_margin),
            suit.margin / (2 * p.min_margin),
        )
        return CornerReading(rank, suit, red, card, max(0.0, confidence), "read", tangled)

    def _contradicts(self, reading: CornerReading, card: Card, look_alike: bool = True) -> bool:
        """True when a corner that could not name a card still points at a different one.

        Pointing means a fair score *and* a lead over the alternatives: a corner whose
        best guess barely beats the rest is no evidence either way. With ``look_alike``
        False, a suit shaped like ``card``'s same-colour look-alike is not counted (the
        whole face has settled that question).
        """
        if not look_alike:
            suit = reading.suit
            if suit is not None and suit.label in (_suit_index(card), _SAME_COLOUR[_suit_index(card)]):
                reading = replace(reading, suit=None)
        if reading.red is not None and reading.red != (card.suit in _RED_SUITS):
            return True
        if reading.tangled:
            return False
        threshold = self.params.contradiction_score
        lead = self.params.contradiction_margin
        rank = reading.rank
        if (
            rank is not None
            and rank.score >= threshold
            and rank.margin >= lead
            and rank.label != int(card.rank)
        ):
            return True
        suit = reading.suit
        if (
            suit is not None
            and suit.score >= threshold
            and suit.margin >= self.params.contradiction_suit_margin
            and SUIT_ORDER[suit.label] != card.suit.value
        ):
            return True
        # A suit's margin is its lead over its same-colour look-alike along the axis that
        # separates them: a corner correlating best with clubs but shaped like a spade as
        # clearly as a read requires is spade evidence, not club evidence.
        if (
            suit is not None
            and suit.score >= self.params.contradiction_shape_score
            and suit.margin <= -self.params.min_margin
            and SUIT_ORDER[suit.label] == card.suit.value
        ):
            return True
        return reading.red is not None and reading.red != (card.suit in _RED_SUITS)

    def decide(
        self, readings: tuple[CornerReading, ...], face: FaceMatch | None
    ) -> tuple[Card | None, float, str]:
        """Both channels: corner reads checked by the face; the face alone only where corners agree."""
        card, confidence, reason = self._combine(readings)
        if face is None:
            return card, confidence, reason
        p = self.params
        candidate = ALL_CARDS[face.label]
        named = {r.card for r in readings if r.card is not None}
        unnamed = [r for r in readings if r.card is None]
        if (
            card is None
            and named == {candidate}
            and face.score >= p.face_min_score
            and (face.margin >= p.face_confirm_margin or self._pair_settled(face))
            and not any(self._contradicts(r, candidate, look_alike=False) for r in unnamed)
        ):
            # One corner names the card, the other's suit looks like the look-alike or its own
            # index touches other print: a face naming the same card by a wide lead (court
            # pictures differ by suit) settles it.
            alone = max(r.confidence for r in readings if r.card is not None)
            return candidate, alone * p.single_corner_factor, "read (one corner, face agrees)"
        if (
            card is None
            and len(named) == 2
            and named == {candidate, ALL_CARDS[_look_alike(face.label)]}
            and self._pair_settled(face)
        ):
            # The corners agree on the rank and split on the look-alike suit (a blurred club
            # read as a spade): the face, compared on the pair's own axis, decides.
            return candidate, 0.6, "read (corners split on the look-alike suit, face decides)"
        if (
            card is None
            and not named
            and face.score >= p.face_min_score
            and len(readings) == 2
            and all(self._points_at(r, candidate) for r in readings)
        ):
            # Both corners point at the face's card, just short of a read (a blurred suit a
            # little less far from its look-alike, a rank scoring 0.80-0.85).
            return candidate, 0.6, "read (both corners nearly, face agrees)"
        if card is not None:
            own = ALL_CARDS.index(card)
            if face.label != own and face.score - face.score_of(own) > p.face_veto_deficit:
                return None, 0.0, f"face contradicts index ({ALL_CARDS[face.label].code})"
            look_alike = _look_alike(own)
            if (
                face.label == look_alike
                and face.score >= p.face_lookalike_min_score
                and face.score - face.score_of(own) >= p.face_lookalike_deficit
            ):
                return None, 0.0, "the face prefers the look-alike suit"
            both = all(r.card is not None for r in readings)
            veto = p.pair_confirm_separation if both else p.pair_single_veto_separation
            if (
                face.score_of(look_alike) >= p.face_lookalike_min_score
                and self.pair_separation(face, look_alike) >= veto
            ):
                return None, 0.0, "the face prefers the look-alike suit"
            named_corners = [r for r in readings if r.card is not None]
            if (
                reason == "read (one corner)"
                and face.score_of(own) < p.weak_face_score
                and any(
                    r.rank is not None
                    and r.suit is not None
                    and min(r.rank.score, r.suit.score) < p.weak_face_corner_score
                    for r in named_corners
                )
            ):
                return None, 0.0, "one corner only, on a face unlike this deck's card"
            return card, confidence, reason
        margin = self._face_margin(face)
        if face.score < p.face_min_score or margin < p.face_min_margin:
            return None, 0.0, reason
        if named - {candidate}:
            return None, 0.0, reason
        # Once the face has settled club/spade (heart/diamond) on the pair's axis, a corner's
        # suit shaped like the look-alike is no longer a veto; its rank or colour still is.
        settled = self._pair_settled(face)
        if any(self._contradicts(r, candidate, look_alike=not settled) for r in readings if r.card is None):
            return None, 0.0, reason
        if any(self._supports(r, candidate) for r in readings):
            lead = (margin - p.face_min_margin) / p.face_min_margin
            return candidate, 0.6 + 0.3 * min(1.0, lead), "read (face, index agrees)"
        if margin >= p.face_alone_margin and all(r.reason != _NO_PRINT for r in readings):
            lead = (margin - p.face_alone_margin) / p.face_alone_margin
            return candidate, 0.6 + 0.2 * min(1.0, lead), "read (face, index silent)"
        return None, 0.0, reason

    def pair_separation(self, face: FaceMatch, label: int) -> float:
        """Where the face lies between card ``label`` (+1) and its look-alike (-1), 0 midway."""
        rival = _look_alike(label)
        return (face.score_of(label) - face.score_of(rival)) / float(self._pair_spread[label])

    def _pair_settled(self, face: FaceMatch) -> bool:
        """True when the face names its card clearly, its look-alike judged on the pair's axis."""
        p = self.params
        return (
            face.score >= p.face_min_score
            and self.pair_separation(face, face.label) >= p.pair_confirm_separation
            and self._lead_over_others(face, face.label) >= p.face_min_margin
        )

    def _lead_over_others(self, face: FaceMatch, label: int) -> float:
        """The face's lead for ``label`` over every card except its look-alike."""
        others = np.delete(face.scores, [label, _look_alike(label)])
        return face.score_of(label) - float(others.max())

    def _face_margin(self, face: FaceMatch) -> float:
        """The face's lead, with the look-alike judged by pair separation, not raw correlation.

        Returns the lead over every other card when the pair separation reaches
        ``pair_min_separation`` (that lead is what the margin rules compare), else the plain
        margin (the look-alike then is the runner-up, within a few hundredths).
        """
        if self.pair_separation(face, face.label) >= self.params.pair_min_separation:
            return self._lead_over_others(face, face.label)
        return face.margin

    def _points_at(self, reading: CornerReading, card: Card) -> bool:
        """True when a corner that named nothing is just short of naming ``card``."""
        p = self.params
        rank, suit = reading.rank, reading.suit
        return (
            rank is not None
            and rank.label == int(card.rank)
            and rank.score >= p.near_rank_score
            and rank.margin >= p.min_margin
            and suit is not None
            and suit.label == _suit_index(card)
            and suit.score >= p.min_score
            and suit.margin >= p.near_suit_margin
            and reading.red is not None
            and reading.red == (card.suit in _RED_SUITS)
        )

    def _supports(self, reading: CornerReading, card: Card) -> bool:
        """True when an index corner agrees with ``card`` on its rank or on its suit."""
        if reading.card is not None:
            return reading.card == card
        p = self.params
        rank, suit = reading.rank, reading.suit
        if rank is not None and rank.label == int(card.rank) and rank.score >= p.face_support_rank_score:
            return True
        return (
            suit is not None
            and suit.label == _suit_index(card)
            and suit.score >= p.face_support_suit_score
            and suit.margin >= 0
            and reading.red is not None
            and reading.red == (card.suit in _RED_SUITS)
        )

    def _combine(
        self, readings: tuple[CornerReading, ...], look_alike: bool = True
    ) -> tuple[Card | None, float, str]:
        """The corner channel's decision alone (``look_alike``: see :meth:`_contradicts`)."""
        named = [r for r in readings if r.card is not None]
        if not named:
            return None, 0.0, "; ".join(sorted({r.reason for r in readings}))
        cards = {r.card for r in named}
        if len(cards) > 1:
            return None, 0.0, "index corners disagree"
        card = named[0].card
        assert card is not None
        if len(named) == len(readings):
            confidence = 1.0 - float(np.prod([1.0 - r.confidence for r in named]))
            return card, confidence, "read"
        others = [r for r in readings if r.card is None]
        if any(self._contradicts(r, card, look_alike) for r in others):
            return None, 0.0, "other index corner contradicts"
        alone = named[0]
        p = self.params
        if alone.rank is None or alone.suit is None:  # a named corner always has both
            return None, 0.0, "one corner only, incomplete"
        if alone.tangled:
            return None, 0.0, "one corner only, and its index touches other print"
        if (
            min(alone.rank.score, alone.suit.score) < p.single_corner_min_score
            or min(alone.rank.margin, alone.suit.margin) < p.single_corner_margin_factor * p.min_margin
        ):
            return None, 0.0, "one corner only, not clear enough alone"
        return card, named[0].confidence * self.params.single_corner_factor, "read (one corner)"
