"""Where the files the project ships beside its code live: embedded defaults and game variants.

In a source checkout (and an editable install) that is the repository's ``config/``. A wheel
installs the same files under ``<prefix>/share/baccarat-edge/config`` (pyproject
``data-files``), because the install guide installs the daemon non-editable into its own venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE_CONFIG = Path(__file__).resolve().parents[1] / "config"
_INSTALLED_CONFIG = Path(sys.prefix) / "share" / "baccarat-edge" / "config"


def shipped_config_dir() -> Path:
    """The shipped ``config/`` directory: the source tree's if present, else the installed copy."""
    if (_SOURCE_CONFIG / "variants").is_dir():
        return _SOURCE_CONFIG
    return _INSTALLED_CONFIG
