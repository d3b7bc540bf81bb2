"""Score recognitions against synthetic ground truth: right, wrong, abstained."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2

from drivers.camera.recognize import Recognition
from tests.camera.synth import SynthFrame


@dataclass(slots=True)
class Score:
    """Counts over ground-truth cards (right, abstained) and over reported cards (wrong)."""

    right: int = 0
    wrong: int = 0
    abstained: int = 0
    wrong_examples: list[str] = field(default_factory=list)

    @property
    def cards(self) -> int:
        return self.right + self.abstained

    def add(self, other: Score) -> None:
        self.right += other.right
        self.wrong += other.wrong
        self.abstained += other.abstained
        self.wrong_examples.extend(other.wrong_examples)


def score_frame(frame: SynthFrame, recognitions: Sequence[Recognition]) -> Score:
    """Match each named card to the ground-truth card lying on top at its centre.

    A named card is *right* when it is that card, *wrong* otherwise (including a card
    named where none lies). A ground-truth card not named right is *abstained*
    (a card both named wrong and not named right counts once in each column).
    """
    score = Score()
    read_right: set[int] = set()
    for rec in recognitions:
        if rec.card is None:
            continue
        under = None
        for index in reversed(range(len(frame.cards))):
            contour = frame.cards[index].corners.reshape(-1, 1, 2)
            if cv2.pointPolygonTest(contour, rec.outline.center, False) >= 0:
                under = index
                break
        if under is not None and frame.cards[under].card == rec.card:
            read_right.add(under)
        else:
            truth = frame.cards[under].card.code if under is not None else "none"
            score.wrong += 1
            score.wrong_examples.append(f"{frame.condition}: read {rec.card.code}, truth {truth}")
    score.right = len(read_right)
    score.abstained = len(frame.cards) - len(read_right)
    return score
