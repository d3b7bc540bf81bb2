"""Package boundaries: imports only point down the layers.

``drivers/`` and ``common/`` never import ``daemon/`` (``daemon/`` wires the drivers
together, so a driver importing the daemon would make a package cycle); ``common/`` never
imports ``drivers/`` (both the drivers and the daemon build on it); ``daemon/mqtt`` never
imports ``daemon/service`` (the service composes the MQTT parts, not the other way round).
Every ``import x…`` / ``from x… import`` counts, at any nesting level (inside a function, a
class, an ``if TYPE_CHECKING:`` block).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

FORBIDDEN = "daemon"


def daemon_imports(source: str, filename: str, forbidden: str = FORBIDDEN) -> list[str]:
    """``"file:line: statement"`` for every import of the package ``forbidden`` in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = [node.module]
        else:
            continue
        if any(name == forbidden or name.startswith(forbidden + ".") for name in names):
            found.append((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)}"))
    return [text for _, text in sorted(found)]


def test_the_check_finds_imports_at_any_level() -> None:
    source = (
        "import os\n"
        "import daemon.rules\n"
        "from daemonic import x\n"
        "def f():\n"
        "    if True:\n"
        "        from daemon.rules.outcome import next_slot\n"
        "class C:\n"
        "    import daemon as d\n"
    )
    assert daemon_imports(source, "x.py") == [
        "x.py:2: import daemon.rules",
        "x.py:6: from daemon.rules.outcome import next_slot",
        "x.py:8: import daemon as d",
    ]


def test_the_check_tells_a_subpackage_from_a_longer_name() -> None:
    source = "from daemon.service.config import load\nimport daemon.services\nimport daemon.service\n"
    assert daemon_imports(source, "x.py", "daemon.service") == [
        "x.py:1: from daemon.service.config import load",
        "x.py:3: import daemon.service",
    ]


# (package, the package it must not import)
BOUNDARIES = [
    ("drivers", "daemon"),
    ("common", "daemon"),
    ("common", "drivers"),
    ("daemon/mqtt", "daemon.service"),
]

# Imports that break a boundary today and are being moved by a change in flight; each entry
# names its file and import. (The acknowledgement's journal-continuity alert moved from the
# service into daemon/journal: none is left.)
ALLOWED: frozenset[str] = frozenset()


def _without_line(found: str) -> str:
    filename, _line, statement = found.split(":", 2)
    return f"{filename}:{statement}"


def imports_of(package: str, forbidden: str) -> list[str]:
    """Every import of ``forbidden`` under ``package/`` (outside ``ALLOWED``)."""
    files = sorted((REPO_ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    found = [
        line
        for path in files
        for line in daemon_imports(
            path.read_text(encoding="utf-8"), Path(path.relative_to(REPO_ROOT)).as_posix(), forbidden
        )
    ]
    return [line for line in found if _without_line(line) not in ALLOWED]


@pytest.mark.parametrize(("package", "forbidden"), BOUNDARIES)
def test_package_never_imports_a_higher_layer(package: str, forbidden: str) -> None:
    found = imports_of(package, forbidden)
    assert found == [], f"{package}/ must not import {forbidden}:\n" + "\n".join(found)
