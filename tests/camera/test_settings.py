"""Camera settings: validated YAML, errors naming the file and the field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from drivers.camera.settings import CameraSettingsError, load_camera_settings, parse_camera_settings
from tests.camera.synth import SHOE_MOUTH, SLOT_BOXES


def layout() -> dict[str, Any]:
    boxes: dict[str, Any] = {
        slot: {"x0": x0, "y0": y0, "x1": x1, "y1": y1} for slot, (x0, y0, x1, y1) in SLOT_BOXES.items()
    }
    x0, y0, x1, y1 = SHOE_MOUTH
    boxes["shoe_mouth"] = {"x0": x0, "y0": y0, "x1": x1, "y1": y1}
    return boxes


def valid() -> dict[str, Any]:
    return {"source": "/dev/video0", "templates": "deck.npz", "layout": layout()}


def test_a_valid_file_loads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "camera.yaml"
    path.write_text(yaml.safe_dump(valid()))
    settings = load_camera_settings(path)
    assert settings.source == "/dev/video0"
    assert settings.stability_frames == 3
    assert settings.min_confidence == 0.6
    assert settings.layout.slot_at(0.27, 0.5) == "P1"
    assert settings.layout.slot_at(0.58, 0.5) == "B1"
    assert settings.layout.slot_at(0.9, 0.1) == "shoe_mouth"
    assert settings.layout.slot_at(0.5, 0.05) is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(colour="red"), "colour"),
        (lambda d: d["layout"]["P1"].update(x1=0.1), "layout.P1.x1"),
        (lambda d: d["layout"].pop("B3"), "layout.B3"),
        (lambda d: d["layout"]["B2"].update(y0=1.5), "layout.B2.y0"),
        (lambda d: d.update(min_confidence=2), "min_confidence"),
        (lambda d: d.update(stability_frames=1), "stability_frames"),
        (lambda d: d.update(fps=0), "fps"),
        (lambda d: d.update(source_kind="webcam"), "source_kind"),
        (lambda d: d.pop("templates"), "templates"),
    ],
)
def test_errors_name_the_field(change, named: str) -> None:
    data = valid()
    change(data)
    with pytest.raises(CameraSettingsError) as caught:
        parse_camera_settings(data, "table7.yaml")
    assert "table7.yaml" in str(caught.value)
    assert named in str(caught.value)


def test_unreadable_and_malformed_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(CameraSettingsError, match=re.escape("missing.yaml: cannot read")):
        load_camera_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("source: [unclosed\n")
    with pytest.raises(CameraSettingsError, match=re.escape("bad.yaml: not valid YAML")):
        load_camera_settings(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(CameraSettingsError, match=re.escape("scalar.yaml")):
        load_camera_settings(scalar)
