"""Camera test fixtures: real card art fetched once (npm, cached), each deck calibrated once.

Calibration runs through the real CLI (`baccarat-edge camera calibrate`), so every test
that uses templates also exercises the command that makes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
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
    """``{deck: (templates file, JSON summary printed)}`` from `camera calibrate` per deck.

    Once per test run: pytest-xdist's workers share the run's temporary folder, and the first
    worker to take the lock calibrates for all of them (a calibration takes seconds)."""
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent  # the run's folder, above the workers' own
    out_dir = run_dir / "camera-templates"
    results: dict[str, tuple[Path, Any]] = {}
    with (run_dir / "camera-templates.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out_dir.mkdir(exist_ok=True)
        for name, folder in decks.items():
            out, summary = out_dir / f"{name}.npz", out_dir / f"{name}.json"
            if not summary.exists():
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    argv = ["camera", "calibrate", "--faces", str(folder), "--out", str(out), "--deck", name]
                    status = main(argv)
                assert status == 0, f"calibrate {name} failed"
                summary.write_text(printed.getvalue())
            results[name] = (out, json.loads(summary.read_text()))
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
