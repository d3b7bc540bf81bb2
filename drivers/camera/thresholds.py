"""The recognition thresholds, each with the measurement it came from.

Every number the corner and face rules compare against lives here, in one frozen
dataclass, so that a tuning run changes one place; ``drivers/camera/README.md``
("How recognition decides") tells the rules in prose and the seeds each was tuned on.
"""

from __future__ import annotations

from dataclasses import dataclass


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
