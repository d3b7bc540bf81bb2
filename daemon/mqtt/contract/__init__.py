"""The MQTT contract files: ``asyncapi.yaml`` (AsyncAPI 3) and ``schemas/*.json`` (JSON Schema
2020-12), shipped inside the package so tools and tests load exactly what is documented."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCHEMA_NAMES = ("event", "status", "state", "health", "command", "reply", "ack", "audit")


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one payload (see :data:`SCHEMA_NAMES`)."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"no schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    text = resources.files(__package__).joinpath("schemas", f"{name}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def asyncapi_text() -> str:
    """The AsyncAPI 3 document."""
    return resources.files(__package__).joinpath("asyncapi.yaml").read_text("utf-8")
