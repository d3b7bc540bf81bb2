"""Recognition on real card art: every clean card named, never a wrong card, unknown when unsure."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from drivers.camera.decide import Decider
from drivers.camera.geometry import find_card_outlines
from drivers.camera.recognize import Recognizer
from tests.camera.evaluate import Score, score_frame
from tests.camera.synth import (
    CONDITIONS,
    FRAME_H,
    FRAME_W,
    card_corners,
    felt_table,
    frame_set,
    load_faces,
    make_frame,
    paste,
)

DECKS = ("svg-cards", "younestouati")


@pytest.fixture(scope="module")
def faces(decks: dict[str, Path]) -> dict[str, dict[Card, np.ndarray]]:
    return {name: load_faces(folder) for name, folder in decks.items()}


@pytest.mark.parametrize("deck", DECKS)
def test_every_card_is_recognised_on_clean_frames(deck: str, faces, recognizers) -> None:
    # 13 frames x 4 cards walk once through a shuffled deck: all 52 cards, each once.
    frames = frame_set(faces[deck], "clean", frames=13, seed=5)
    assert {p.card for f in frames for p in f.cards} == set(ALL_CARDS)
    named: set[Card] = set()
    total = Score()
    for frame in frames:
        recognitions = recognizers[deck].recognize_frame(frame.image)
        total.add(score_frame(frame, recognitions))
        named |= {r.card for r in recognitions if r.card is not None}
    assert total.wrong == 0, total.wrong_examples
    # svg-cards draws the king of spades' sceptre touching its index spade; that one card is
    # sometimes (1 frame in 6 here) left unknown. Any other miss is a regression.
    missed = {c.code for c in set(ALL_CARDS) - named}
    assert missed <= {"Ks"}, f"not named: {sorted(missed)}"


@pytest.mark.parametrize("deck", DECKS)
def test_never_a_wrong_card_on_hard_frames(deck: str, faces, recognizers) -> None:
    total = Score()
    for index, condition in enumerate(c for c in CONDITIONS if c != "clean"):
        for frame in frame_set(faces[deck], condition, frames=3, seed=900 + index):
            total.add(score_frame(frame, recognizers[deck].recognize_frame(frame.image)))
    assert total.wrong == 0, total.wrong_examples
    assert total.right > 0  # the sample is not all abstentions: the check above means something


@settings(max_examples=12)
@given(angle=st.floats(min_value=0, max_value=360), card_index=st.integers(0, 51))
def test_a_turned_card_is_read_right_or_not_at_all(angle: float, card_index: int, faces, recognizers) -> None:
    card = ALL_CARDS[card_index]
    rng = np.random.default_rng(card_index)
    frame = felt_table(rng)
    face = faces["svg-cards"][card]
    corners = card_corners((FRAME_W / 2, FRAME_H / 2), 170, face.shape[1] / face.shape[0], angle, 0.0, rng)
    paste(frame, face, corners)
    named = [r.card for r in recognizers["svg-cards"].recognize_frame(frame) if r.card is not None]
    assert named in ([], [card])


@pytest.mark.parametrize("quarter", [0, 1, 2, 3])
def test_quarter_turns_are_read(quarter: int, faces, recognizers) -> None:
    rng = np.random.default_rng(quarter)
    frame = felt_table(rng)
    cards = [Card.parse("7h"), Card.parse("Qs")]
    for x, card in zip((400, 880), cards, strict=True):
        face = faces["younestouati"][card]
        paste(frame, face, card_corners((x, 360), 180, face.shape[1] / face.shape[0], 90 * quarter, 0.0, rng))
    named = sorted(r.card.code for r in recognizers["younestouati"].recognize_frame(frame) if r.card)
    assert named == sorted(c.code for c in cards)


def _blank_card(frame: np.ndarray, rng: np.random.Generator, scribble: bool) -> None:
    face = np.full((489, 338, 4), 255, np.uint8)
    if scribble:
        for _ in range(25):
            colour = (0, 0, 200) if rng.random() < 0.5 else (20, 20, 20)
            start = (int(rng.integers(0, 338)), int(rng.integers(0, 489)))
            end = (int(rng.integers(0, 338)), int(rng.integers(0, 489)))
            cv2.line(face, start, end, (*colour, 255), int(rng.integers(3, 12)))
    paste(frame, face, card_corners((640, 360), 180, 338 / 489, float(rng.uniform(0, 360)), 0.0, rng))


@pytest.mark.parametrize("deck", DECKS)
def test_unknown_on_images_that_hold_no_card(deck: str, recognizers) -> None:
    rng = np.random.default_rng(3)
    recognizer: Recognizer = recognizers[deck]
    felt = felt_table(rng)
    assert recognizer.recognize_frame(felt) == []
    noise = rng.integers(0, 256, (FRAME_H, FRAME_W, 3), dtype=np.uint8)
    assert [r for r in recognizer.recognize_frame(noise) if r.card is not None] == []
    for scribble in (False, True):
        frame = felt_table(rng)
        _blank_card(frame, rng, scribble)
        found = recognizer.recognize_frame(frame)
        assert len(found) == 1
        assert found[0].card is None
        assert found[0].confidence == 0.0


def test_a_card_whose_indices_are_covered_is_unknown(faces, recognizers) -> None:
    rng = np.random.default_rng(4)
    face = faces["svg-cards"][Card.parse("9d")].copy()
    h, w = face.shape[:2]
    face[: int(h * 0.3), : int(w * 0.3), :3] = 255  # paper over both index corners
    face[int(h * 0.7) :, int(w * 0.7) :, :3] = 255
    frame = felt_table(rng)
    paste(frame, face, card_corners((640, 360), 180, w / h, 10.0, 0.0, rng))
    found = recognizers["svg-cards"].recognize_frame(frame)
    assert len(found) == 1
    assert found[0].card is None


def test_a_card_of_another_deck_is_never_named_wrong(faces, recognizers) -> None:
    """Templates are per deck; another deck's print must abstain or still be read right."""
    total = Score()
    for frame in frame_set(faces["younestouati"], "clean", frames=6, seed=21):
        total.add(score_frame(frame, recognizers["svg-cards"].recognize_frame(frame.image)))
    assert total.wrong == 0, total.wrong_examples


def test_other_corner_shaped_like_the_look_alike_vetoes_a_one_corner_read(faces, recognizers) -> None:
    # Seed 1106 ("small", bench seed 11) frames 10 and 14: one svg-cards index corner read A♣
    # and 2♣ while the other corner correlated best with clubs but was shaped like a spade
    # (the cards were A♠ and 2♠). Such a corner is spade evidence: the card must not be named.
    frames = frame_set(faces["svg-cards"], "small", frames=15, seed=1106)
    total = Score()
    for frame in (frames[10], frames[14]):
        total.add(score_frame(frame, recognizers["svg-cards"].recognize_frame(frame.image)))
    assert total.wrong == 0, total.wrong_examples
    assert total.cards == 8


def test_rank_run_into_suit_by_blur_is_no_evidence(faces, recognizers) -> None:
    # Seed 1102 ("blur", bench seed 11) frame 8: younestouati 3♣ blurred until the 3 ran into
    # the club and the club's lobes merged into a spade's outline; both corners, cut apart by
    # their boxes, read 3♠. A corner whose rank and suit print run together names nothing.
    frame = frame_set(faces["younestouati"], "blur", frames=9, seed=1102)[8]
    recognitions = recognizers["younestouati"].recognize_frame(frame.image)
    score = score_frame(frame, recognitions)
    assert score.wrong == 0, score.wrong_examples
    assert any("run together" in c.reason for r in recognitions for c in r.corners)


@pytest.mark.parametrize(("deck", "other"), [("younestouati", "svg-cards"), ("svg-cards", "younestouati")])
def test_every_card_of_a_foreign_deck_abstains_or_is_right(deck: str, other: str, faces, recognizers) -> None:
    # All 52 cards of one deck read with the other deck's templates (a deck changed without
    # recalibrating): the faces correlate poorly, the indices differ in shape; nearly all abstain.
    frames = frame_set(faces[deck], "clean", frames=13, seed=31)
    assert {p.card for f in frames for p in f.cards} == set(ALL_CARDS)
    total = Score()
    for frame in frames:
        total.add(score_frame(frame, recognizers[other].recognize_frame(frame.image)))
    assert total.wrong == 0, total.wrong_examples
    assert total.abstained >= 48


def test_the_face_vetoes_a_foreign_index_read(faces, recognizers) -> None:
    # Bench seed 11, foreign_deck frame 18: a younestouati K♠ read with svg-cards templates; one
    # index corner read K♣ (club and spade told apart by shape only). The whole face is nearest
    # K♥ and 0.18 further from K♣: the read is dropped.
    frame = frame_set(faces["younestouati"], "clean", frames=19, seed=1109)[18]
    recognitions = recognizers["svg-cards"].recognize_frame(frame.image)
    score = score_frame(frame, recognitions)
    assert score.wrong == 0, score.wrong_examples
    assert any(r.reason.startswith("face contradicts index") for r in recognitions)


@pytest.mark.parametrize("deck", DECKS)
def test_blurred_cards_read_by_the_face_are_right(deck: str, faces, recognizers) -> None:
    # All 52 cards blurred (σ 1.2-1.8): a pip is a few pixels, so the face alone cannot tell a club
    # from a spade; the corners veto such a swap. Every card named is right, some only by the face.
    frames = frame_set(faces[deck], "blur", frames=13, seed=77)
    total = Score()
    by_face = 0
    for frame in frames:
        recognitions = recognizers[deck].recognize_frame(frame.image)
        total.add(score_frame(frame, recognitions))
        by_face += sum(1 for r in recognitions if r.card is not None and r.reason.startswith("read (face"))
    assert total.wrong == 0, total.wrong_examples
    assert by_face >= 2
    assert total.right >= 46


def _corner(rank: tuple[int, float, float] | None, suit: tuple[str, float, float] | None, red: bool | None):
    from drivers.camera.corners import CornerReading
    from drivers.camera.matching import LabelMatch
    from drivers.camera.templates import SUIT_ORDER

    return CornerReading(
        rank=LabelMatch(*rank) if rank else None,
        suit=LabelMatch(SUIT_ORDER.index(suit[0]), suit[1], suit[2]) if suit else None,
        red=red,
        card=None,
        confidence=0.0,
        reason="weak template match",
    )


def _face(best: str, score: float, runner_up: str, margin: float):
    from drivers.camera.faces import FaceMatch

    scores = np.full(len(ALL_CARDS), 0.2, np.float32)
    best_index, runner_index = ALL_CARDS.index(Card.parse(best)), ALL_CARDS.index(Card.parse(runner_up))
    scores[best_index], scores[runner_index] = score, score - margin
    return FaceMatch(label=best_index, score=score, margin=margin, scores=scores)


def test_decision_rules_of_the_two_channels(recognizers) -> None:
    from drivers.camera.corners import CornerReading

    decider: Decider = recognizers["svg-cards"].decider
    silent = _corner(None, None, None)
    face = _face("3c", 0.99, "3s", 0.12)
    # Corners that cannot name a card but agree with the face's rank: the face names it.
    assert decider.decide((_corner((3, 0.8, 0.2), None, False), silent), face)[0] == Card.parse("3c")
    # Corners silent: the face alone, with its larger lead.
    card, confidence, reason = decider.decide((silent, silent), face)
    assert (card, reason) == (Card.parse("3c"), "read (face, index silent)")
    assert 0.6 <= confidence <= 1.0
    # The runner-up another rank 0.04 behind: not a clear face.
    assert decider.decide((silent, silent), _face("3c", 0.99, "4c", 0.04))[0] is None
    # The runner-up the look-alike 0.01 behind: a quarter of the way from midway, not settled.
    assert decider.pair_separation(_face("3c", 0.99, "3s", 0.01), ALL_CARDS.index(Card.parse("3c"))) < 0.3
    assert decider.decide((silent, silent), _face("3c", 0.99, "3s", 0.01))[0] is None
    # A corner washed out (glare) may hide what would change the face's answer: no face alone.
    washed = CornerReading(None, None, None, None, 0.0, "no print in corner")
    assert decider.decide((washed, silent), face)[0] is None
    # A corner whose suit is shaped like a spade vetoes the face's club unless the face settles
    # club vs spade on the pair's own axis (separation >= 0.5); a corner pointing at another
    # rank vetoes it either way.
    spade_shaped = _corner((3, 0.8, 0.2), ("s", 0.8, 0.05), False)
    unsettled = _face("3c", 0.99, "3s", 0.015)
    assert decider.decide((spade_shaped, silent), unsettled)[0] is None
    assert decider.decide((spade_shaped, silent), face)[0] == Card.parse("3c")
    assert decider.decide((_corner((4, 0.8, 0.2), None, False), silent), face)[0] is None
    # ...and so does a corner in the other print colour.
    assert decider.decide((_corner(None, None, True), silent), face)[0] is None
    # A face that looks like no learned card well names nothing.
    assert decider.decide((silent, silent), _face("3c", 0.80, "3s", 0.2))[0] is None


def test_the_face_drops_an_index_read_it_clearly_disagrees_with(recognizers) -> None:
    from dataclasses import replace

    decider: Decider = recognizers["svg-cards"].decider
    spade = replace(_corner((3, 0.95, 0.3), ("s", 0.95, 0.3), False), card=Card.parse("3s"), confidence=0.9)
    agreeing = _face("3s", 0.95, "3c", 0.05)
    assert decider.decide((spade, spade), agreeing)[0] == Card.parse("3s")
    club_face = _face("3c", 0.99, "3s", 0.19)
    card, _, reason = decider.decide((spade, spade), club_face)
    assert card is None
    assert reason.startswith("face contradicts index")
    # The face preferring the look-alike suit of the same rank by 0.03 or more: dropped, with
    # one corner or two (bench seed 53: an svg-cards 3♠ 70 px high read 3♣ by both corners).
    lookalike = _face("3c", 0.90, "3s", 0.04)
    assert decider.decide((spade, _corner(None, None, None)), lookalike)[0] is None
    assert decider.decide((spade, spade), lookalike)[0] is None
    assert decider.decide((spade, spade), _face("3c", 0.90, "3s", 0.01))[0] == Card.parse("3s")
    # A smaller raw lead still drops the read when it lies far toward the look-alike on the
    # pair's own axis (svg-cards 3♣/3♠ faces are close: 0.025 is 0.64 of the way to 3♣'s face).
    nearer_club = _face("3c", 0.90, "3s", 0.025)
    assert decider.pair_separation(nearer_club, ALL_CARDS.index(Card.parse("3c"))) >= 0.5
    assert decider.decide((spade, spade), nearer_club)[0] is None


def test_one_weak_corner_on_a_face_unlike_the_deck_is_not_enough(faces, recognizers) -> None:
    # Bench seed 79, foreign_deck frame 0: a younestouati 7♠ read with svg-cards templates; one
    # corner read 7♣ (rank 0.86), the face agreed but correlated only 0.67 with svg-cards' 7♣.
    frame = frame_set(faces["younestouati"], "clean", frames=1, seed=7909)[0]
    recognitions = recognizers["svg-cards"].recognize_frame(frame.image)
    score = score_frame(frame, recognitions)
    assert score.wrong == 0, score.wrong_examples
    assert any(r.reason == "one corner only, on a face unlike this deck's card" for r in recognitions)


def test_the_face_settles_club_or_spade_on_the_pairs_axis(recognizers) -> None:
    from dataclasses import replace

    from drivers.camera.corners import CornerReading

    decider: Decider = recognizers["younestouati"].decider
    three_c, three_s = Card.parse("3c"), Card.parse("3s")
    # younestouati 3♣ and 3♠ faces differ by pip shape only: a 0.02 lead is more than half-way from
    # midway to 3♣ (bench seed 11 blur frames 8 and 21: both corners run together, face 0.021).
    clear, close = _face("3c", 0.99, "3s", 0.02), _face("3c", 0.99, "3s", 0.005)
    assert decider.pair_separation(clear, ALL_CARDS.index(three_c)) >= 0.5
    tangled = CornerReading(None, None, None, None, 0.0, "rank and suit print run together", True)
    assert decider.decide((tangled, tangled), clear)[0] == three_c
    assert decider.decide((tangled, tangled), close)[0] is None
    # Corners agreeing on the rank, split between club and spade: the settled face decides...
    club = replace(_corner((3, 0.95, 0.3), ("c", 0.95, 0.2), False), card=three_c, confidence=0.5)
    spade = replace(_corner((3, 0.95, 0.3), ("s", 0.95, 0.2), False), card=three_s, confidence=0.5)
    card, _, reason = decider.decide((club, spade), clear)
    assert (card, reason) == (three_c, "read (corners split on the look-alike suit, face decides)")
    # ...never when it is close, nor when the corners split on the rank.
    assert decider.decide((club, spade), close)[0] is None
    four_s = replace(_corner((4, 0.95, 0.3), ("s", 0.95, 0.2), False), card=Card.parse("4s"), confidence=0.5)
    assert decider.decide((club, four_s), clear)[0] is None


@pytest.mark.parametrize("deck", DECKS)
@pytest.mark.parametrize("condition", ["blur", "perspective"])
def test_a_club_and_a_spade_of_the_same_rank_are_never_swapped(
    deck: str, condition: str, faces, recognizers
) -> None:
    # Ranks A-10, each frame showing the club and the spade of one rank twice: pip cards whose
    # faces differ only in pip shape. Every card named is right; most are named (37-40 of 40
    # measured), some through the face settling the pair.
    total = Score()
    by_face = 0
    for rank, code in enumerate("A23456789T", start=1):
        club, spade = Card.parse(f"{code}c"), Card.parse(f"{code}s")
        rng = np.random.default_rng(4000 + rank)
        frame = make_frame(faces[deck], [club, spade, spade, club], condition, rng)
        recognitions = recognizers[deck].recognize_frame(frame.image)
        total.add(score_frame(frame, recognitions))
        by_face += sum(1 for r in recognitions if r.card is not None and "face" in r.reason)
    assert total.wrong == 0, total.wrong_examples
    assert total.right >= 35
    assert by_face >= 1


@pytest.mark.parametrize(("deck", "index"), [("younestouati", 20), ("svg-cards", 4)])
def test_a_small_card_turned_near_45_degrees_in_perspective_is_outlined(
    deck: str, index: int, faces, recognizers
) -> None:
    # Bench seed 31, perspective: cards 110-140 px high turned near 45° whose first quad fit put
    # its vertices on the rounded corners (covering 83-87 % of the outline) were never outlined.
    frame = frame_set(faces[deck], "perspective", frames=index + 1, seed=3101)[index]
    outlines = find_card_outlines(frame.image)
    for placed in frame.cards:
        centre = tuple(float(v) for v in placed.corners.mean(axis=0))
        assert any(cv2.pointPolygonTest(o.corners.reshape(-1, 1, 2), centre, False) >= 0 for o in outlines)
    score = score_frame(frame, recognizers[deck].recognize_frame(frame.image))
    assert score.wrong == 0, score.wrong_examples
    assert score.right >= 3


def test_a_one_corner_read_whose_face_leans_to_the_look_alike_is_dropped(faces, recognizers) -> None:
    # Held-out seed 149, perspective frame 4: a younestouati 2♠ 110 px high read 2♣ by one corner
    # (rank 0.91, suit 0.96), the other corner garbled; the face 2♠ by only 0.012, but 0.48 of
    # the way toward 2♠ on the 2♣/2♠ axis. The other corner cannot vouch: the read is dropped.
    frame = frame_set(faces["younestouati"], "perspective", frames=5, seed=14901)[4]
    recognitions = recognizers["younestouati"].recognize_frame(frame.image)
    score = score_frame(frame, recognitions)
    assert score.wrong == 0, score.wrong_examples
    assert any(r.reason == "the face prefers the look-alike suit" for r in recognitions)


def test_the_look_alike_veto_is_stricter_for_one_corner(recognizers) -> None:
    from dataclasses import replace

    decider: Decider = recognizers["younestouati"].decider
    two_c = Card.parse("2c")
    club = replace(_corner((2, 0.95, 0.4), ("c", 0.95, 0.3), False), card=two_c, confidence=0.7)
    leaning_spade = _face("2s", 0.95, "2c", 0.008)
    separation = decider.pair_separation(leaning_spade, ALL_CARDS.index(Card.parse("2s")))
    assert 0.2 <= separation < 0.5
    assert decider.decide((club, club), leaning_spade)[0] == two_c
    card, _, reason = decider.decide((club, _corner(None, None, None)), leaning_spade)
    assert (card, reason) == (None, "the face prefers the look-alike suit")
