"""Package boundaries: ``drivers/`` and ``common/`` never import ``daemon/``.

``daemon/`` wires the drivers together, so a driver importing the daemon would make a
package cycle. Every ``import daemon…`` / ``from daemon… import`` counts, at any nesting
level (inside a function, a class, an ``if TYPE_CHECKING:`` block).
"""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO_ROOT

FORBIDDEN = "daemon"


def daemon_imports(source: str, filename: str) -> list[str]:
    """``"file:line: statement"`` for every import of the ``daemon`` package in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = [node.module]
        else:
            continue
        if any(name == FORBIDDEN or name.startswith(FORBIDDEN + ".") for name in names):
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


@pytest.mark.parametrize("package", ["drivers", "common"])
def test_package_never_imports_daemon(package: str) -> None:
    files = sorted((REPO_ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    found = [
        line
        for path in files
        for line in daemon_imports(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))
    ]
    assert found == [], f"{package}/ must not import daemon/:\n" + "\n".join(found)
