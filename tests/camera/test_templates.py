"""Templates file: round trip, validation with named errors; calibration input checks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from drivers.camera.templates import (
    DeckTemplates,
    TemplateError,
    learn_templates,
    load_templates,
    save_templates,
)
from tests.camera.synth import FELT_BGR


def test_round_trip_keeps_every_array(deck_templates: dict[str, DeckTemplates], tmp_path: Path) -> None:
    original = deck_templates["younestouati"]
    path = tmp_path / "deck.npz"
    save_templates(original, path)
    loaded = load_templates(path)
    assert loaded.deck == "younestouati"
    assert loaded.index == original.index
    for name in (
        "rank_vectors",
        "rank_labels",
        "suit_vectors",
        "suit_labels",
        "rank_heights",
        "suit_variants",
        "face_vectors",
        "face_labels",
        "face_mean",
    ):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(original, name))


def _rewrite(source: Path, target: Path, **changes: object) -> None:
    with np.load(source, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = np.asarray(value)
    with target.open("wb") as handle:
        np.savez(handle, **arrays)


def test_bad_files_are_rejected_with_file_and_key(templates_file: Path, tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=re.escape("nope.npz: templates file not found")):
        load_templates(tmp_path / "nope.npz")
    text = tmp_path / "text.npz"
    text.write_text("not numpy")
    with pytest.raises(TemplateError, match=re.escape("text.npz: not a templates file")):
        load_templates(text)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "no_vectors.npz": ({"rank_vectors": None}, "missing array 'rank_vectors'"),
        "version.npz": (
            {"meta": np.array(json.dumps({"format": "baccarat-edge-card-templates", "version": 99}))},
            "meta.version",
        ),
        # A file written before the face channel (version 1, no face arrays): recalibrate.
        "version1.npz": (
            {"meta": np.array(json.dumps({"format": "baccarat-edge-card-templates", "version": 1}))},
            "meta.version 1 unsupported (want 2); recalibrate the deck with `baccarat-edge camera calibrate`",
        ),
        "labels.npz": ({"rank_labels": np.zeros(3, np.int16)}, "rank_labels"),
        "nan.npz": ({"suit_vectors": np.full((4, 576), np.nan, np.float32)}, "suit"),
        "no_faces.npz": ({"face_vectors": None}, "missing array 'face_vectors'"),
        "face_labels.npz": ({"face_labels": np.zeros(3, np.int16)}, "face_labels"),
        "face_mean.npz": ({"face_mean": np.zeros(7, np.float32)}, "face_mean"),
    }
    for name, (changes, message) in cases.items():
        target = tmp_path / name
        _rewrite(templates_file, target, **changes)
        with pytest.raises(TemplateError) as caught:
            load_templates(target)
        assert name in str(caught.value)
        assert message in str(caught.value)


def test_calibration_names_missing_and_misnamed_faces(decks: dict[str, Path], tmp_path: Path) -> None:
    faces = tmp_path / "faces"
    shutil.copytree(decks["svg-cards"], faces)
    (faces / "Qh.png").unlink()
    (faces / "Td.png").unlink()
    with pytest.raises(TemplateError, match="missing face images for Td, Qh"):
        learn_templates(faces)
    (faces / "Zq.png").write_bytes(b"")
    with pytest.raises(TemplateError, match=re.escape("Zq.png: file name is not a card code")):
        learn_templates(faces)
    with pytest.raises(TemplateError, match="not a directory"):
        learn_templates(tmp_path / "nowhere")


def test_calibration_rejects_images_that_are_not_card_faces(decks: dict[str, Path], tmp_path: Path) -> None:
    import cv2

    faces = tmp_path / "faces"
    shutil.copytree(decks["svg-cards"], faces)
    felt = np.empty((489, 338, 3), np.uint8)
    felt[:] = FELT_BGR
    cv2.imwrite(str(faces / "5c.png"), felt)
    with pytest.raises(TemplateError, match=re.escape("5c.png: expected one card outline")):
        learn_templates(faces)
    (faces / "5c.png").write_bytes(b"garbage")
    with pytest.raises(TemplateError, match=re.escape("5c.png: not a readable image")):
        learn_templates(faces)
