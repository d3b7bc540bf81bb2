"""The files shipped beside the code reach a non-editable install too."""

from __future__ import annotations

import tomllib
from pathlib import Path

from daemon.rules.variants import VARIANTS_DIR, shipped_variant_names
from daemon.service.config import DEFAULTS_FILE
from daemon.shipped import shipped_config_dir

REPO = Path(__file__).resolve().parent.parent


def _data_files() -> set[Path]:
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped: set[Path] = set()
    for patterns in table.values():
        for pattern in patterns:
            shipped.update(p.relative_to(REPO) for p in REPO.glob(pattern))
    return shipped


def test_source_checkout_uses_the_repository_config() -> None:
    assert shipped_config_dir() == REPO / "config"
    assert VARIANTS_DIR == REPO / "config" / "variants"
    assert DEFAULTS_FILE == REPO / "config" / "defaults.yaml"


def test_every_variant_and_the_defaults_are_in_the_wheel_data_files() -> None:
    shipped = _data_files()
    assert Path("config/defaults.yaml") in shipped
    names = shipped_variant_names()
    assert names, "no variants found"
    for name in names:
        assert Path(f"config/variants/{name}.yaml") in shipped, name
