"""`baccarat-edge camera calibrate|recognize` through the real CLI entry point; art bootstrap errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from common.cards import Card
from daemon.cli import main
from drivers.camera.templates import load_templates
from tests.camera import fetch_art
from tests.camera.synth import SLOT_BOXES, card_corners, felt_table, load_faces, paste
from tests.camera.test_settings import layout


def test_calibrate_writes_a_templates_file(calibrated) -> None:
    # The session fixture ran `camera calibrate` for each deck; check what it printed and wrote.
    for deck, (out, summary) in calibrated.items():
        assert summary["deck"] == deck
        assert summary["templates"] == str(out)
        loaded = load_templates(out)
        assert loaded.deck == deck
        assert summary["rank_templates"] == len(loaded.rank_labels) > 0
        assert summary["suit_templates"] == len(loaded.suit_labels) > 0


def test_calibrate_reports_bad_faces(tmp_path: Path, capsys) -> None:
    (tmp_path / "faces").mkdir()
    assert (
        main(["camera", "calibrate", "--faces", str(tmp_path / "faces"), "--out", str(tmp_path / "t.npz")])
        == 1
    )
    assert "missing face images for Ac" in capsys.readouterr().err


def test_recognize_prints_one_line_per_image(
    decks: dict[str, Path], templates_file: Path, tmp_path: Path, capsys
) -> None:
    rng = np.random.default_rng(8)
    faces = load_faces(decks["svg-cards"])
    x0, y0, x1, y1 = SLOT_BOXES["B2"]
    with_card = felt_table(rng)
    face = faces[Card.parse("Qh")]
    center = ((x0 + x1) / 2 * 1280, (y0 + y1) / 2 * 720)
    paste(with_card, face, card_corners(center, 180, face.shape[1] / face.shape[0], -4.0, 0.0, rng))
    cv2.imwrite(str(tmp_path / "card.png"), with_card)
    cv2.imwrite(str(tmp_path / "felt.png"), felt_table(rng))
    (tmp_path / "broken.png").write_bytes(b"not an image")
    layout_file = tmp_path / "layout.yaml"
    layout_file.write_text(yaml.safe_dump(layout()))
    images = [str(tmp_path / name) for name in ("card.png", "felt.png", "broken.png")]
    status = main(
        ["camera", "recognize", "--templates", str(templates_file), "--layout", str(layout_file), *images]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == 1  # one image was unreadable
    assert len(lines) == 3
    assert lines[0]["card"] == "Qh"
    assert lines[0]["slot"] == "B2"
    assert 0.6 <= lines[0]["confidence"] <= 1.0
    assert lines[0]["ms"] >= 0
    assert lines[1]["card"] == "unknown"
    assert lines[1]["cards"] == []
    assert lines[2]["error"] == "not a readable image"


def test_recognize_rejects_a_bad_templates_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.npz").write_text("nope")
    assert main(["camera", "recognize", "--templates", str(tmp_path / "bad.npz"), "x.png"]) == 1
    assert "bad.npz: not a templates file" in capsys.readouterr().err


def test_missing_npm_fails_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(fetch_art.ArtFetchError, match="npm is not installed"):
        fetch_art.ensure_decks(tmp_path / "cache")
