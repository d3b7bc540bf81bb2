"""Reading a YAML settings file into a pydantic model, reporting every error at once.

Each error names the file, the line when known, the key path (``broker.tls.ca_file``)
and what is wrong. Environment variables override single keys, which is how secrets
and deployment paths reach the daemon without living in the file or on the command
line: ``BACCARAT_EDGE__BROKER__PASSWORD_FILE=/run/credentials/...`` sets
``broker.password_file``. An override's value is parsed as a YAML scalar; errors in
it name the variable, never its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

# KeyPath and format_key_path are part of this module's vocabulary (problems name key paths).
from common.yamlfile import DuplicateKeyError
from common.yamlfile import KeyPath as KeyPath
from common.yamlfile import format_key_path as format_key_path
from common.yamlfile import parse_yaml as parse_document

ENV_PREFIX = "BACCARAT_EDGE__"

_SECRET_MARKERS = ("password", "secret", "token", "key", "passphrase")

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a configuration."""

    source: str
    path: KeyPath
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        key = format_key_path(self.path) if self.path else "(top level)"
        return f"{where}: {key}: {self.message}"


class ConfigError(Exception):
    """A configuration could not be loaded; ``problems`` lists every error found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        count = len(problems)
        header = f"{count} configuration error{'s' if count != 1 else ''}:"
        super().__init__("\n".join([header, *(f"  - {p}" for p in problems)]))


@dataclass(slots=True)
class RawConfig:
    """Parsed YAML data with where each key came from."""

    data: dict[str, Any]
    source: str
    lines: dict[KeyPath, int]
    env_sources: dict[KeyPath, str]

    def describe(self, path: KeyPath) -> tuple[str, int | None]:
        """The source (file or environment variable) and line of the value at ``path``."""
        for cut in range(len(path), 0, -1):
            prefix = path[:cut]
            if prefix in self.env_sources:
                return f"environment variable {self.env_sources[prefix]}", None
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            if prefix in self.lines:
                return self.source, self.lines[prefix]
        return self.source, None


def read_yaml(path: Path) -> RawConfig:
    """Parse ``path``; a syntax error or a non-mapping document is a ConfigError."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(source, (), "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(source, (), f"cannot read file: {exc}")]) from None
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> RawConfig:
    """Parse YAML text (``source`` names it in errors); every key given twice is an error."""
    try:
        document = parse_document(text, source)
    except DuplicateKeyError as exc:
        raise ConfigError(
            [ConfigProblem(source, d.path, d.message, d.line) for d in exc.duplicates]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([ConfigProblem(source, (), f"YAML syntax error: {problem}", line)]) from None
    data = {} if document.data is None else document.data
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigProblem(source, (), f"expected a mapping of settings, got {type(data).__name__}", 1)]
        )
    lines: dict[KeyPath, int] = {}
    if document.node is not None:
        _collect_lines(document.node, (), lines)
    return RawConfig(data=data, source=source, lines=lines, env_sources={})


def _collect_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*path, key)
            lines[child] = key_node.start_mark.line + 1
            _collect_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _collect_lines(item, child, lines)


def apply_env_overrides(raw: RawConfig, environ: Mapping[str, str] | None = None) -> list[ConfigProblem]:
    """Apply ``BACCARAT_EDGE__A__B=value`` overrides in place; returns problems found in them."""
    env = os.environ if environ is None else environ
    problems: list[ConfigProblem] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        if not parts or any(not p for p in parts):
            problems.append(
                ConfigProblem(f"environment variable {name}", (), "malformed name: use A__B__C key parts")
            )
            continue
        try:
            value = parse_document(env[name], f"environment variable {name}").data if env[name] else ""
        except yaml.YAMLError:
            problems.append(
                ConfigProblem(
                    f"environment variable {name}", tuple(parts), "value is not a valid YAML scalar"
                )
            )
            continue
        if isinstance(value, (dict, list)):
            value = env[name]  # only scalars: a secret that looks like YAML stays a string
        target: Any = raw.data
        path: KeyPath = ()
        for part in parts[:-1]:
            path = (*path, part)
            existing = target.get(part) if isinstance(target, dict) else None
            if existing is None and isinstance(target, dict):
                target[part] = existing = {}
            if not isinstance(existing, dict):
                problems.append(
                    ConfigProblem(
                        f"environment variable {name}", path, "cannot override inside a non-mapping"
                    )
                )
                break
            target = existing
        else:
            target[parts[-1]] = value
            raw.env_sources[tuple(parts)] = name
    return problems


def set_override(raw: RawConfig, path: KeyPath, value: Any, source: str) -> None:
    """Set one key programmatically (used by the demo for the pty path and broker port)."""
    target: Any = raw.data
    for part in path[:-1]:
        target = target.setdefault(part, {}) if isinstance(part, str) else target[part]
    target[path[-1]] = value
    raw.env_sources[path] = source


def problems_from_validation(
    raw: RawConfig, exc: ValidationError, prefix: KeyPath = ()
) -> list[ConfigProblem]:
    """Turn pydantic errors into ConfigProblems that name source, line and key path."""
    problems: list[ConfigProblem] = []
    for err in exc.errors(include_url=False):
        loc: KeyPath = (*prefix, *(p for p in err["loc"] if isinstance(p, (str, int))))
        loc = _strip_union_tags(loc, raw.data)
        source, line = raw.describe(loc)
        problems.append(ConfigProblem(source, loc, _describe_error(err, source), line))
    return problems


def _strip_union_tags(loc: KeyPath, data: Any) -> KeyPath:
    """Drop pydantic's union member names (``'int'``, ``'function-after[...]'``) absent from the data."""
    kept: list[str | int] = []
    node: Any = data
    for part in loc:
        present = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if present:
            kept.append(part)
            node = node[part]
        elif isinstance(node, (dict, list)):
            kept.append(part)  # a missing key: still name it
            node = None
        # else: a tag inside a scalar (union branch name): not a key the user wrote
    return tuple(kept)


def _describe_error(err: Any, source: str) -> str:
    kind = err.get("type", "")
    message: str = err.get("msg", "invalid value")
    if kind == "extra_forbidden":
        return "unknown key (not a setting; check the spelling)"
    if kind == "missing":
        return "required setting is missing"
    loc = [str(p).lower() for p in err.get("loc", ())]
    if source.startswith("environment variable") or any(
        marker in part for part in loc for marker in _SECRET_MARKERS
    ):
        return message  # never echo an environment value or a secret: show only what is wrong
    value = err.get("input")
    if isinstance(value, (str, int, float, bool)) or value is None:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"{message} (got {shown})"
    return message


def validate(
    model: type[ModelT], raw: RawConfig, extra_problems: list[ConfigProblem] | None = None
) -> ModelT:
    """Validate ``raw`` against ``model``; raise ConfigError with every problem at once."""
    problems = list(extra_problems or [])
    result: ModelT | None = None
    try:
        result = model.model_validate(raw.data)
    except ValidationError as exc:
        problems.extend(problems_from_validation(raw, exc))
    if problems or result is None:
        raise ConfigError(problems)
    return result
