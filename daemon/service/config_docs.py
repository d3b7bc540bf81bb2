"""Generate the key reference of ``config/README.md`` from the settings models themselves.

``python -m daemon.service.config_docs --write`` rewrites the part of config/README.md
between the markers, so the documentation cannot drift from what is validated.
"""

from __future__ import annotations

import argparse
import enum
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from daemon.service.config import CONFIG_DIR, READER_DRIVERS, DaemonConfig

README = CONFIG_DIR / "README.md"
BEGIN = "<!-- BEGIN GENERATED KEYS: python -m daemon.service.config_docs --write -->"
END = "<!-- END GENERATED KEYS -->"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " \\| ".join(f"`{m.value}`" for m in annotation)
        if issubclass(annotation, BaseModel):
            return "mapping"
        return annotation.__name__
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args if a is not type(None)) + (
            " or null" if type(None) in args else ""
        )
    if origin in (list, tuple):
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is typing.Annotated:
        return _type_text(args[0])
    return str(annotation).replace("typing.", "")


def _default_text(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        value = info.default
        if isinstance(value, enum.Enum):
            value = value.value
        if isinstance(value, BaseModel):
            return "(section)"
        return f"`{value}`" if value is not None else "null"
    if info.default_factory is not None:
        return "(section)"
    return "**required**"


def rows(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """(key path, type, default, description) for every field, nested sections expanded."""
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        nested = _model_of(info.annotation)
        description = (info.description or "").replace("\n", " ").replace("|", "\\|")
        yield key, _type_text(info.annotation), _default_text(info), description
        if nested is not None and name != "settings":
            inner = f"{key}[]" if typing.get_origin(info.annotation) is list else key
            yield from rows(nested, inner)


def _table(title: str, model: type[BaseModel], prefix: str) -> list[str]:
    lines = [f"### {title}", "", "| key | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {t} | {d} | {m} |" for k, t, d, m in rows(model, prefix)]
    return [*lines, ""]


def generate() -> str:
    """The generated part of config/README.md."""
    from drivers.registry import load

    out = [BEGIN, "", *_table("Daemon config (top level and sections)", DaemonConfig, "")]
    for driver in READER_DRIVERS:
        settings = load(driver).settings
        out += _table(f"`readers[].settings` for driver `{driver}`", settings, "readers[].settings")
    camera = load("camera").settings
    out += _table("`camera.settings`", camera, "camera.settings")
    return "\n".join([*out, END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite config/README.md in place")
    args = parser.parse_args(argv)
    generated = generate()
    if not args.write:
        print(generated)
        return 0
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    README.write_text(text[:start] + generated + text[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
