"""Per-slot observation of real frames: boxes, shoe mouth, outside the layout, motion."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from common.cards import Card
from drivers.camera.observe import LayoutObserver
from drivers.camera.settings import SLOTS, parse_camera_settings
from drivers.camera.stability import SlotState, StabilityFilter
from tests.camera.synth import SHOE_MOUTH, card_corners, felt_table, load_faces, paste
from tests.camera.test_settings import valid


def _frame(faces, placements: list[tuple[tuple[float, float], str]], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    frame = felt_table(rng)
    for (x, y), code in placements:
        face = faces[Card.parse(code)]
        paste(
            frame, face, card_corners((x * 1280, y * 720), 150, face.shape[1] / face.shape[0], 0.0, 0.0, rng)
        )
    return frame


def test_cards_are_placed_by_box_and_never_reported_from_the_shoe_mouth_or_outside(
    decks: dict[str, Path], recognizers
) -> None:
    faces = load_faces(decks["younestouati"])
    layout = parse_camera_settings(valid()).layout
    observer = LayoutObserver(recognizers["younestouati"], layout, motion_threshold=6.0)
    stability = StabilityFilter(SLOTS, 3, 0.6)
    mouth = ((SHOE_MOUTH[0] + SHOE_MOUTH[2]) / 2, 0.12)
    frame = _frame(faces, [((0.27, 0.53), "5h"), (mouth, "Kd"), ((0.5, 0.14), "2c")])
    reports = []
    for _ in range(5):
        seen = observer.observe(frame)
        reports.extend(stability.update(seen.slots))
    assert sorted(s for s in seen.slot_of if s is not None) == ["P1", "shoe_mouth"]
    assert seen.slots["P1"].state is SlotState.CARD
    assert all(seen.slots[s].state is SlotState.EMPTY for s in SLOTS if s != "P1")
    assert [(r.slot, r.card.code) for r in reports] == [("P1", "5h")]


def test_the_first_frame_and_a_changing_box_count_as_moving(decks: dict[str, Path], recognizers) -> None:
    faces = load_faces(decks["younestouati"])
    observer = LayoutObserver(recognizers["younestouati"], parse_camera_settings(valid()).layout, 6.0)
    empty = _frame(faces, [])
    with_card = _frame(faces, [((0.58, 0.53), "Qs")])
    assert all(o.moving for o in observer.observe(empty).slots.values())
    assert not any(o.moving for o in observer.observe(empty).slots.values())
    changed = observer.observe(with_card).slots
    assert changed["B1"].moving
    assert not changed["P3"].moving
    assert not observer.observe(with_card).slots["B1"].moving
