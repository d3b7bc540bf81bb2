"""The decision: both index corners and the whole face → a card, or unknown with the reason.

The corner channel alone: both corners naming the same card,
or one corner clear enough alone while the other points nowhere else. The face channel
checks it (:meth:`Decider.decide`): a corner read the face clearly disagrees with is
dropped; where the corners name nothing, the face names its card only with a clear lead
and no corner pointing elsewhere. Club/spade and heart/diamond are judged on the pair's
own axis (:meth:`Decider.pair_separation`). The rules in prose, with the measurements
behind each threshold: ``drivers/camera/README.md``, "How recognition decides".

The confidence of a named card says how much independent evidence agrees on it, on the one
scale the engine's ``camera.min_confidence`` (default :data:`CONFIDENT`, 0.9) compares
against (README "Confidence"):

* 0.95-1.00: both index corners name the card (the face does not contradict it);
* 0.90-0.94: one index channel and the face agree (one corner read and the face's best card
  is the same; a corner agreeing on rank or suit with the face's card; both corners nearly);
* 0.60-0.80: one channel alone (one corner, the face elsewhere; the face, the index silent):
  reported, never used by the engine's default.

Within a band, the position follows the path's own strength (corner confidence, face lead).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from common.cards import ALL_CARDS, Card
from drivers.camera.corners import NO_PRINT, CornerReading
from drivers.camera.faces import FaceMatch
from drivers.camera.suits import RED_SUITS, SAME_COLOUR, look_alike_label, suit_index
from drivers.camera.templates import SUIT_ORDER, DeckTemplates
from drivers.camera.thresholds import RecognitionParams


def pair_spread(vectors: NDArray[Any], labels: NDArray[Any]) -> NDArray[Any]:
    """Per card: half the mean squared distance between its learned faces and its look-alike's.

    A card and its look-alike (3♣/3♠) differ only in pip shape, so their faces correlate
    with any picture almost equally; the lead of one over the other is evidence only in
    proportion to how far apart the two learned faces are. Faces are unit vectors learned
    in the same order per card (height, orientation), so slot k of one card matches slot k
    of the other.
    """
    spread = np.ones(len(ALL_CARDS), dtype=np.float32)
    for label in range(len(ALL_CARDS)):
        own, other = vectors[labels == label], vectors[labels == look_alike_label(label)]
        count = min(len(own), len(other))
        if count:
            difference = own[:count] - other[:count]
            spread[label] = max(float(np.einsum("ij,ij->i", difference, difference).mean()) / 2, 1e-6)
    return spread


CONFIDENT = 0.9
"""Confidence from which a read is backed by two independent channels: the engine's default
``camera.min_confidence`` (tests/camera checks that the two stay equal)."""


def _strength(value: float) -> float:
    return min(1.0, max(0.0, value))


def both_corners(strength: float) -> float:
    """Confidence of a card both index corners name (``strength``: 1 - Π(1 - corner confidence))."""
    return 0.95 + 0.05 * _strength(strength)


def index_and_face(strength: float) -> float:
    """Confidence of a card one index channel and the whole face agree on."""
    return CONFIDENT + 0.04 * _strength(strength)


def one_channel(strength: float) -> float:
    """Confidence of a card only one channel names: below :data:`CONFIDENT`, never used by default."""
    return 0.6 + 0.2 * _strength(strength)


class CornerRead(Enum):
    """What the two index corners gave on their own."""

    NONE = "none"
    """No card (the reason says why)."""
    ONE_CORNER = "one corner"
    """One corner named the card, clearly enough alone, the other pointing nowhere else."""
    BOTH_CORNERS = "both corners"
    """Both corners named the same card."""


@dataclass(frozen=True, slots=True)
class _CornerDecision:
    """The corner channel's decision: its card (None for ``CornerRead.NONE``), its raw
    strength (not yet on the confidence scale) and its reason."""

    kind: CornerRead
    card: Card | None
    strength: float
    reason: str

    @classmethod
    def nothing(cls, reason: str) -> _CornerDecision:
        return cls(CornerRead.NONE, None, 0.0, reason)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """The decision of both channels: the card (or None), its confidence, the reason."""

    card: Card | None
    confidence: float
    reason: str


class Decider:
    """Applies the decision rules for one deck (its faces give each look-alike pair's spread)."""

    def __init__(self, templates: DeckTemplates, params: RecognitionParams) -> None:
        self.params = params
        self._pair_spread = pair_spread(templates.face_vectors, templates.face_labels)

    def _contradicts(self, reading: CornerReading, card: Card, look_alike: bool = True) -> bool:
        """True when a corner that could not name a card still points at a different one.

        Pointing means a fair score *and* a lead over the alternatives: a corner whose
        best guess barely beats the rest is no evidence either way. With ``look_alike``
        False, a suit shaped like ``card``'s same-colour look-alike is not counted (the
        whole face has settled that question).
        """
        if not look_alike:
            suit = reading.suit
            if suit is not None and suit.label in (suit_index(card), SAME_COLOUR[suit_index(card)]):
                reading = replace(reading, suit=None)
        if reading.red is not None and reading.red != (card.suit in RED_SUITS):
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
        return reading.red is not None and reading.red != (card.suit in RED_SUITS)

    def decide(
        self, readings: tuple[CornerReading, ...], face: FaceMatch | None
    ) -> tuple[Card | None, float, str]:
        """Both channels: corner reads checked by the face; the face alone only where corners agree."""
        corners = self._combine(readings)
        if face is None:
            verdict = self._corners_alone(corners)
            return verdict.card, verdict.confidence, verdict.reason
        match corners.kind:
            case CornerRead.NONE:
                verdict = self._face_fills_in(readings, face) or self._face_alone(readings, face, corners)
            case CornerRead.ONE_CORNER | CornerRead.BOTH_CORNERS:
                verdict = self._face_checks(readings, face, corners)
        return verdict.card, verdict.confidence, verdict.reason

    @staticmethod
    def _corners_alone(corners: _CornerDecision) -> _Verdict:
        """No face to check the corners: their card, on the scale of one or two channels."""
        match corners.kind:
            case CornerRead.NONE:
                return _Verdict(None, corners.strength, corners.reason)
            case CornerRead.BOTH_CORNERS:
                return _Verdict(corners.card, both_corners(corners.strength), corners.reason)
            case CornerRead.ONE_CORNER:
                return _Verdict(corners.card, one_channel(corners.strength), corners.reason)

    def _face_fills_in(self, readings: tuple[CornerReading, ...], face: FaceMatch) -> _Verdict | None:
        """The corners named no card on their own, but the face settles what they point at."""
        p = self.params
        candidate = ALL_CARDS[face.label]
        named = {r.card for r in readings if r.card is not None}
        unnamed = [r for r in readings if r.card is None]
        if (
            named == {candidate}
            and face.score >= p.face_min_score
            and (face.margin >= p.face_confirm_margin or self._pair_settled(face))
            and not any(self._contradicts(r, candidate, look_alike=False) for r in unnamed)
        ):
            # One corner names the card, the other's suit looks like the look-alike or its own
            # index touches other print: a face naming the same card by a wide lead (court
            # pictures differ by suit) settles it.
            alone = max(r.confidence for r in readings if r.card is not None)
            return _Verdict(candidate, index_and_face(alone), "read (one corner, face agrees)")
        if (
            len(named) == 2
            and named == {candidate, ALL_CARDS[look_alike_label(face.label)]}
            and self._pair_settled(face)
        ):
            # The corners agree on the rank and split on the look-alike suit (a blurred club
            # read as a spade): the face, compared on the pair's own axis, decides.
            return _Verdict(
                candidate, index_and_face(0.0), "read (corners split on the look-alike suit, face decides)"
            )
        if (
            not named
            and face.score >= p.face_min_score
            and len(readings) == 2
            and all(self._points_at(r, candidate) for r in readings)
        ):
            # Both corners point at the face's card, just short of a read (a blurred suit a
            # little less far from its look-alike, a rank scoring 0.80-0.85).
            return _Verdict(candidate, index_and_face(0.0), "read (both corners nearly, face agrees)")
        return None

    def _face_checks(
        self, readings: tuple[CornerReading, ...], face: FaceMatch, corners: _CornerDecision
    ) -> _Verdict:
        """The corners named a card: the face may veto it, or back it as a second channel."""
        card = corners.card
        assert card is not None
        own = ALL_CARDS.index(card)
        veto = self._face_veto(readings, face, corners)
        if veto is not None:
            return _Verdict(None, 0.0, veto)
        if corners.kind is CornerRead.BOTH_CORNERS:
            return _Verdict(card, both_corners(corners.strength), corners.reason)
        if face.label == own:
            # The face's best card is the corner's card: two independent channels agree.
            return _Verdict(card, index_and_face(corners.strength), "read (one corner, face names it too)")
        return _Verdict(card, one_channel(corners.strength), corners.reason)

    def _face_veto(
        self, readings: tuple[CornerReading, ...], face: FaceMatch, corners: _CornerDecision
    ) -> str | None:
        """Why the face refuses the corners' card, else None."""
        p = self.params
        assert corners.card is not None
        own = ALL_CARDS.index(corners.card)
        if face.label != own and face.score - face.score_of(own) > p.face_veto_deficit:
            return f"face contradicts index ({ALL_CARDS[face.label].code})"
        look_alike = look_alike_label(own)
        if (
            face.label == look_alike
            and face.score >= p.face_lookalike_min_score
            and face.score - face.score_of(own) >= p.face_lookalike_deficit
        ):
            return "the face prefers the look-alike suit"
        both = all(r.card is not None for r in readings)
        separation = p.pair_confirm_separation if both else p.pair_single_veto_separation
        if (
            face.score_of(look_alike) >= p.face_lookalike_min_score
            and self.pair_separation(face, look_alike) >= separation
        ):
            return "the face prefers the look-alike suit"
        if (
            corners.kind is CornerRead.ONE_CORNER
            and face.score_of(own) < p.weak_face_score
            and any(self._weak_corner(r) for r in readings if r.card is not None)
        ):
            return "one corner only, on a face unlike this deck's card"
        return None

    def _weak_corner(self, reading: CornerReading) -> bool:
        """True when a named corner's rank or suit scores below what a weak face needs."""
        rank, suit = reading.rank, reading.suit
        return (
            rank is not None
            and suit is not None
            and min(rank.score, suit.score) < self.params.weak_face_corner_score
        )

    def _face_alone(
        self, readings: tuple[CornerReading, ...], face: FaceMatch, corners: _CornerDecision
    ) -> _Verdict:
        """The corners named nothing: the face names its card only with a clear lead and no
        corner pointing elsewhere."""
        p = self.params
        candidate = ALL_CARDS[face.label]
        named = {r.card for r in readings if r.card is not None}
        nothing = _Verdict(None, 0.0, corners.reason)
        margin = self._face_margin(face)
        if face.score < p.face_min_score or margin < p.face_min_margin or named - {candidate}:
            return nothing
        # Once the face has settled club/spade (heart/diamond) on the pair's axis, a corner's
        # suit shaped like the look-alike is no longer a veto; its rank or colour still is.
        settled = self._pair_settled(face)
        if any(self._contradicts(r, candidate, look_alike=not settled) for r in readings if r.card is None):
            return nothing
        if any(self._supports(r, candidate) for r in readings):
            lead = (margin - p.face_min_margin) / p.face_min_margin
            return _Verdict(candidate, index_and_face(lead), "read (face, index agrees)")
        if margin >= p.face_alone_margin and all(r.reason != NO_PRINT for r in readings):
            lead = (margin - p.face_alone_margin) / p.face_alone_margin
            return _Verdict(candidate, one_channel(lead), "read (face, index silent)")
        return nothing

    def pair_separation(self, face: FaceMatch, label: int) -> float:
        """Where the face lies between card ``label`` (+1) and its look-alike (-1), 0 midway."""
        rival = look_alike_label(label)
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
        others = np.delete(face.scores, [label, look_alike_label(label)])
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
            and suit.label == suit_index(card)
            and suit.score >= p.min_score
            and suit.margin >= p.near_suit_margin
            and reading.red is not None
            and reading.red == (card.suit in RED_SUITS)
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
            and suit.label == suit_index(card)
            and suit.score >= p.face_support_suit_score
            and suit.margin >= 0
            and reading.red is not None
            and reading.red == (card.suit in RED_SUITS)
        )

    def _combine(self, readings: tuple[CornerReading, ...]) -> _CornerDecision:
        """The corner channel's decision alone, with its raw strength (not yet on the scale)."""
        named = [r for r in readings if r.card is not None]
        if not named:
            return _CornerDecision.nothing("; ".join(sorted({r.reason for r in readings})))
        cards = {r.card for r in named}
        if len(cards) > 1:
            return _CornerDecision.nothing("index corners disagree")
        card = named[0].card
        assert card is not None
        if len(named) == len(readings):
            strength = 1.0 - float(np.prod([1.0 - r.confidence for r in named]))
            return _CornerDecision(CornerRead.BOTH_CORNERS, card, strength, "read")
        others = [r for r in readings if r.card is None]
        if any(self._contradicts(r, card) for r in others):
            return _CornerDecision.nothing("other index corner contradicts")
        alone = named[0]
        p = self.params
        if alone.rank is None or alone.suit is None:  # a named corner always has both
            return _CornerDecision.nothing("one corner only, incomplete")
        if alone.tangled:
            return _CornerDecision.nothing("one corner only, and its index touches other print")
        if (
            min(alone.rank.score, alone.suit.score) < p.single_corner_min_score
            or min(alone.rank.margin, alone.suit.margin) < p.single_corner_margin_factor * p.min_margin
        ):
            return _CornerDecision.nothing("one corner only, not clear enough alone")
        return _CornerDecision(CornerRead.ONE_CORNER, card, alone.confidence, "read (one corner)")
