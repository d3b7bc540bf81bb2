"""Camera test fixtures: real card art fetched once (npm, cached), each deck calibrated once.

Calibration runs through the real CLI (`baccarat-edge camera calibrate`), so every test
that uses templates also exercises the command that makes them.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from daemon.cli import main
from drivers.camera.recognize import Recognizer
from drivers.camera.templates import DeckTemplates, load_templates
from tests.camera.fetch_art import ArtFetchError, ensure_decks


@pytest.fixture(scope="session")
def decks() -> dict[str, Path]:
    """Folders of 52 faces per deck; fetched with npm on first use. Fails (never skips) without npm."""
    try:
        return ensure_decks()
    except ArtFetchError as exc:
        pytest.fail(f"camera tests need the card art: {exc}")


@pytest.fixture(scope="session")
def calibrated(
    decks: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, Any]]:
    """``{deck: (templates file, JSON summary printed)}`` from `camera calibrate` per deck."""
    out_dir = tmp_path_factory.mktemp("templates")
    results: dict[str, tuple[Path, Any]] = {}
    for name, folder in decks.items():
        out = out_dir / f"{name}.npz"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = main(["camera", "calibrate", "--faces", str(folder), "--out", str(out), "--deck", name])
        assert status == 0, f"calibrate {name} failed"
        results[name] = (out, json.loads(printed.getvalue()))
    return results


@pytest.fixture(scope="session")
def deck_templates(calibrated: dict[str, tuple[Path, Any]]) -> dict[str, DeckTemplates]:
    return {name: load_templates(path) for name, (path, _) in calibrated.items()}


@pytest.fixture(scope="session")
def recognizers(deck_templates: dict[str, DeckTemplates]) -> dict[str, Recognizer]:
    return {name: Recognizer(templates) for name, templates in deck_templates.items()}


@pytest.fixture(scope="session")
def templates_file(calibrated: dict[str, tuple[Path, Any]]) -> Path:
    """The svg-cards templates file written by `camera calibrate`."""
    return calibrated["svg-cards"][0]
