"""Camera test fixtures: real card art fetched once (npm, cached), templates learned once."""

from __future__ import annotations

from pathlib import Path

import pytest

from drivers.camera.recognize import Recognizer
from drivers.camera.templates import DeckTemplates, learn_templates, save_templates
from tests.camera.fetch_art import ArtFetchError, ensure_decks


@pytest.fixture(scope="session")
def decks() -> dict[str, Path]:
    """Folders of 52 faces per deck; fetched with npm on first use. Fails (never skips) without npm."""
    try:
        return ensure_decks()
    except ArtFetchError as exc:
        pytest.fail(f"camera tests need the card art: {exc}")


@pytest.fixture(scope="session")
def deck_templates(decks: dict[str, Path]) -> dict[str, DeckTemplates]:
    """Templates learned from each deck's own faces (as `camera calibrate` does)."""
    return {name: learn_templates(folder, name) for name, folder in decks.items()}


@pytest.fixture(scope="session")
def recognizers(deck_templates: dict[str, DeckTemplates]) -> dict[str, Recognizer]:
    return {name: Recognizer(templates) for name, templates in deck_templates.items()}


@pytest.fixture(scope="session")
def templates_file(
    deck_templates: dict[str, DeckTemplates], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The svg-cards templates saved to a file."""
    path = tmp_path_factory.mktemp("templates") / "svg-cards.npz"
    save_templates(deck_templates["svg-cards"], path)
    return path
