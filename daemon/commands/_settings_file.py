"""Protocol settings given on the command line as a YAML file (``decode``, ``record``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_protocol_settings(path: Path | None) -> dict[str, Any] | str:
    """The mapping in ``path`` (``{}`` without a file), or a message naming what is wrong.

    Only read here; the protocol's own settings model validates the keys and values.
    """
    if path is None:
        return {}
    import yaml

    from common.yamlfile import load_yaml

    try:
        data = load_yaml(path)
    except (OSError, yaml.YAMLError) as exc:
        return f"{path}: cannot read settings: {exc}"
    if data is None:
        return {}
    if not isinstance(data, dict):
        return f"{path}: settings must be a mapping of setting names to values"
    return data
