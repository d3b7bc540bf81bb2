"""The one YAML loader of the product: safe, and a key given twice in a mapping is an error.

Plain YAML keeps the last of two equal keys without a word, so a table config or a variant
with ``decks: 8`` on line 3 and ``decks: 6`` on line 40 would run on six decks while its
reader believes eight. Every YAML file the daemon and the drivers read goes through
:func:`parse_yaml` (or :func:`load_yaml`), which refuses such a file with an error naming the
file, the line and the key path of every repeated key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KeyPath = tuple[str | int, ...]
"""Where a value sits in a document: ``("readers", 0, "settings", "url")``."""


def format_key_path(path: KeyPath) -> str:
    """``("readers", 0, "device")`` → ``readers[0].device``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


@dataclass(frozen=True, slots=True)
class DuplicateKey:
    """One key given twice in the same mapping."""

    path: KeyPath
    line: int
    """1-based line of the repetition."""
    first_line: int
    """1-based line where the key was first given."""

    @property
    def message(self) -> str:
        """What is wrong, without the file and key path (callers place those)."""
        return (
            f"key {self.path[-1]!r} is given twice, on line {self.first_line} and again on line "
            f"{self.line} (YAML would silently keep the last): remove one"
        )


class DuplicateKeyError(yaml.YAMLError):
    """A YAML document repeats a key; ``duplicates`` lists every repetition, in file order."""

    def __init__(self, source: str, duplicates: list[DuplicateKey]) -> None:
        self.source = source
        self.duplicates = duplicates
        super().__init__(
            "\n".join(f"{source}:{d.line}: {format_key_path(d.path)}: {d.message}" for d in duplicates)
        )


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """A parsed document: the Python data and the node tree (for the lines of keys)."""

    data: Any
    node: yaml.Node | None


def parse_yaml(text: str, source: str) -> YamlDocument:
    """Parse one YAML document with the safe loader, refusing repeated keys.

    Raises :class:`DuplicateKeyError` (a ``yaml.YAMLError``) naming ``source``, and
    ``yaml.YAMLError`` for a syntax error.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(None, None)
        duplicates: list[DuplicateKey] = []
        _find_duplicates(node, (), duplicates, set())
        if duplicates:
            raise DuplicateKeyError(source, duplicates)
        return YamlDocument(loader.construct_document(node), node)
    finally:
        loader.dispose()


def load_yaml(path: Path) -> Any:
    """The data of the YAML file ``path`` (``None`` for an empty file).

    Raises OSError or UnicodeDecodeError when it cannot be read, :class:`DuplicateKeyError`
    for a repeated key and ``yaml.YAMLError`` for a syntax error.
    """
    return parse_yaml(path.read_text(encoding="utf-8"), str(path)).data


def _find_duplicates(node: yaml.Node, path: KeyPath, found: list[DuplicateKey], seen: set[int]) -> None:
    # An alias repeats a node already checked (and may point back at its own parent).
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_lines: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            # Settings keys are scalars; a mapping or list used as a key is named by its line.
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else f"<key at line {line}>"
            child = (*path, key)
            # The resolved tag tells the string "1" from the number 1, as the loader does.
            identity = (key_node.tag, key)
            if identity in first_lines:
                found.append(DuplicateKey(child, line, first_lines[identity]))
            else:
                first_lines[identity] = line
            _find_duplicates(value_node, child, found, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _find_duplicates(item, (*path, index), found, seen)
