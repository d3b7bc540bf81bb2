"""One confidence scale from the recogniser to the engine (issue #12).

The engine uses a camera read at ``camera.min_confidence`` (default 0.9) or above; the
recogniser puts a card at 0.9 or more exactly when two independent channels agree on it, so
an occluded card read by one corner and confirmed by its face is used, a one-channel read is
reported but not used. Figures behind the bands: drivers/camera/README.md "Confidence".
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from common.cards import ALL_CARDS, Card
from daemon.engine.settings import CameraArbitration
from drivers.camera.decide import CONFIDENT, Decider, both_corners, index_and_face, one_channel
from drivers.camera.faces import FaceMatch
from tests.camera.evaluate import score_frame
from tests.camera.synth import frame_set, load_faces
from tests.camera.test_recognition import _corner, _face


def test_the_engine_default_is_the_recognisers_two_channel_threshold() -> None:
    assert CameraArbitration().min_confidence == CONFIDENT == 0.9


def test_the_bands_do_not_overlap() -> None:
    strengths = np.linspace(0.0, 1.0, 101)
    assert min(both_corners(s) for s in strengths) >= 0.95
    assert all(CONFIDENT <= index_and_face(s) < 0.95 for s in strengths)
    assert max(one_channel(s) for s in strengths) <= 0.8 < CONFIDENT
    assert both_corners(2.0) == 1.0  # out-of-range strengths are clamped, never above 1
    assert one_channel(-1.0) == 0.6  # the camera's own min_confidence (0.6) still reports it


def test_one_corner_reads_are_used_only_when_the_face_names_the_same_card(recognizers) -> None:
    decider: Decider = recognizers["svg-cards"].decider
    nine = Card.parse("9h")
    corner = replace(_corner((9, 0.97, 0.4), ("h", 0.97, 0.4), True), card=nine, confidence=0.7)
    silent = _corner(None, None, None)
    card, confidence, reason = decider.decide((corner, silent), _face("9h", 0.80, "9d", 0.02))
    assert (card, reason) == (nine, "read (one corner, face names it too)")
    assert confidence >= CONFIDENT
    # The face's best card is another one (not by enough to veto the corner): one channel only.
    card, confidence, reason = decider.decide((corner, silent), _face("8h", 0.80, "9h", 0.05))
    assert (card, reason) == (nine, "read (one corner)")
    assert 0.6 <= confidence < CONFIDENT
    # Both corners: the top band.
    assert decider.decide((corner, corner), _face("9h", 0.80, "9d", 0.02))[1] >= 0.95


def test_no_face_leaves_a_one_corner_read_below_the_threshold(recognizers) -> None:
    decider: Decider = recognizers["svg-cards"].decider
    nine = Card.parse("9h")
    corner = replace(_corner((9, 0.97, 0.4), ("h", 0.97, 0.4), True), card=nine, confidence=0.7)
    none: FaceMatch | None = None
    assert decider.decide((corner, _corner(None, None, None)), none)[1] < CONFIDENT
    assert decider.decide((corner, corner), none)[1] >= 0.95


def test_occluded_cards_read_right_are_mostly_confident(decks, recognizers) -> None:
    # Occluded frames (a hand over 25-45 % of each card): what the recogniser names is right, and
    # most of it (the one-corner reads the face confirms) clears the engine's threshold.
    named = confident = 0
    for frame in frame_set(load_faces(decks["svg-cards"]), "occlusion", frames=8, seed=1207):
        recognitions = recognizers["svg-cards"].recognize_frame(frame.image)
        assert score_frame(frame, recognitions).wrong == 0
        reads = [r for r in recognitions if r.card is not None]
        named += len(reads)
        confident += sum(1 for r in reads if r.confidence >= CONFIDENT)
        assert all(
            ALL_CARDS[r.face.label] == r.card
            for r in reads
            if r.reason == "read (one corner, face names it too)" and r.face
        )
    assert named >= 8
    assert confident >= named * 0.75
