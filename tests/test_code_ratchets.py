"""Ratchets on the product's code (``common/``, ``daemon/``, ``drivers/``): no new function
above ruff's complexity limit (C901) or with more positional parameters than its limit
(PLR0917), and no listed offender growing.

The limits are pyproject.toml's (``[tool.ruff.lint.mccabe]``, ``[tool.ruff.lint.pylint]``).
The functions over them when the rules came in are listed, with their figure, in
``tests/code_ratchets_baseline.txt``; ruff skips their files (``per-file-ignores``), this test
does not. A listed function may shrink or leave the list (then delete its line: the list only
goes down: ``python -m tests.test_code_ratchets --write``); a new one must be split, or take
keyword-only (``*``) parameters.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PRODUCT = ("common", "daemon", "drivers")
BASELINE = REPO_ROOT / "tests" / "code_ratchets_baseline.txt"
RULES = ("C901", "PLR0917")


@dataclass(frozen=True, order=True)
class Offender:
    """One function over a limit: ``rule path qualified.name figure``."""

    rule: str
    path: str
    name: str
    figure: int

    @property
    def key(self) -> tuple[str, str, str]:
        return self.rule, self.path, self.name

    def line(self) -> str:
        return f"{self.rule} {self.path} {self.name} {self.figure}"


def _limits() -> dict[str, int]:
    lint = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["ruff"]["lint"]
    return {
        "C901": int(lint["mccabe"]["max-complexity"]),
        "PLR0917": int(lint["pylint"]["max-positional-args"]),
    }


def _ruff() -> str:
    beside = Path(sys.executable).parent / "ruff"
    found = str(beside) if beside.exists() else shutil.which("ruff")
    assert found, "ruff is a dev dependency: install the project with .[dev]"
    return found


def qualified_names(source: str) -> dict[int, str]:
    """``Class.method`` (or ``function``, ``outer.inner``) of each ``def`` by its line."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    names[child.lineno] = name
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return names


_FIGURE = re.compile(r"\((\d+) > \d+\)")


def offenders(root: Path = REPO_ROOT, paths: tuple[str, ...] = PRODUCT) -> list[Offender]:
    """Every function under ``paths`` (the product's by default) over a limit, as ruff finds it."""
    limits = _limits()
    result = subprocess.run(
        [
            _ruff(),
            "check",
            "--isolated",
            "--no-cache",
            "--select",
            ",".join(RULES),
            "--config",
            f"lint.mccabe.max-complexity={limits['C901']}",
            "--config",
            f"lint.pylint.max-positional-args={limits['PLR0917']}",
            "--output-format",
            "json",
            *paths,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    names: dict[str, dict[int, str]] = {}
    found = []
    for item in json.loads(result.stdout):
        path = Path(item["filename"]).resolve().relative_to(root.resolve()).as_posix()
        if path not in names:
            names[path] = qualified_names((root / path).read_text("utf-8"))
        figure = _FIGURE.search(item["message"])
        assert figure, item["message"]
        found.append(Offender(item["code"], path, names[path][item["location"]["row"]], int(figure.group(1))))
    return sorted(found)


def baseline() -> list[Offender]:
    listed = []
    for line in BASELINE.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            rule, path, name, figure = line.split()
            listed.append(Offender(rule, path, name, int(figure)))
    return listed


@pytest.fixture(scope="module")
def found() -> list[Offender]:
    return offenders()


def test_the_limits_are_the_agreed_ones() -> None:
    assert _limits() == {"C901": 15, "PLR0917": 4}


def test_qualified_names_name_methods_by_their_class() -> None:
    source = "def f():\n    def inner():\n        pass\nclass C:\n    def m(self):\n        pass\n"
    assert qualified_names(source) == {1: "f", 2: "f.inner", 5: "C.m"}


def test_the_check_finds_a_function_over_each_limit(tmp_path: Path) -> None:
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(16))
    (tmp_path / "m.py").write_text(
        "class C:\n"
        "    def five(self, a, b, c, d, e):\n        return a\n"
        "    def four(self, a, b, c, d, *, e):\n        return a\n"
        f"def branchy(x):\n{branches}    return -1\n"
    )
    assert offenders(tmp_path, ("m.py",)) == [
        Offender("C901", "m.py", "branchy", 17),
        Offender("PLR0917", "m.py", "C.five", 5),
    ]


def test_no_function_is_over_a_limit_unless_listed_and_none_grew(found: list[Offender]) -> None:
    allowed: dict[tuple[str, str, str], list[int]] = {}
    for entry in baseline():
        allowed.setdefault(entry.key, []).append(entry.figure)
    problems = []
    seen: dict[tuple[str, str, str], list[int]] = {}
    for offender in found:
        seen.setdefault(offender.key, []).append(offender.figure)
    for key, figures in seen.items():
        limits = sorted(allowed.get(key, []), reverse=True)
        for index, figure in enumerate(sorted(figures, reverse=True)):
            if index >= len(limits):
                problems.append(f"new: {' '.join(key)} {figure}")
            elif figure > limits[index]:
                problems.append(f"grew: {' '.join(key)} {limits[index]} -> {figure}")
    assert not problems, (
        "split these functions, or make their parameters after the fourth keyword-only (*):\n"
        + "\n".join(problems)
    )


def test_the_baseline_lists_only_functions_still_over_a_limit(found: list[Offender]) -> None:
    current = {offender.key: offender.figure for offender in found}
    stale = [entry.line() for entry in baseline() if entry.key not in current]
    shrunk = [
        f"{entry.line()} -> {current[entry.key]}"
        for entry in baseline()
        if entry.key in current and current[entry.key] < entry.figure
    ]
    advice = f"the ratchet only goes down: in {BASELINE.name} delete fixed lines, lower shrunk figures:\n"
    assert not stale, advice + "\n".join(stale)
    assert not shrunk, advice + "\n".join(shrunk)


def test_ruff_skips_exactly_the_listed_rules_in_the_listed_files() -> None:
    lint = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["ruff"]["lint"]
    skipped = {
        path: set(RULES) & set(rules)
        for path, rules in lint["per-file-ignores"].items()
        if set(RULES) & set(rules) and not path.endswith("/**")
    }
    listed: dict[str, set[str]] = {}
    for entry in baseline():
        listed.setdefault(entry.path, set()).add(entry.rule)
    assert skipped == listed


def write_baseline() -> None:
    """Rewrite the baseline's entries (its comment lines kept) and pyproject.toml's matching
    per-file-ignores from what ruff finds now: ``python -m tests.test_code_ratchets --write``.
    For after a listed function was split; never to let a new offender in."""
    found = offenders()
    comments = [line for line in BASELINE.read_text("utf-8").splitlines() if line.startswith("#")]
    BASELINE.write_text("\n".join([*comments, *(o.line() for o in found)]) + "\n", "utf-8")
    rules: dict[str, set[str]] = {}
    for offender in found:
        rules.setdefault(offender.path, set()).add(offender.rule)
    entries = [
        f"{json.dumps(path)} = [{', '.join(json.dumps(rule) for rule in sorted(rs))}]"
        for path, rs in sorted(rules.items())
    ]
    pyproject = REPO_ROOT / "pyproject.toml"
    text = pyproject.read_text("utf-8")
    begin, end = "# BEGIN ratchet baseline files\n", "# END ratchet baseline files"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    pyproject.write_text(head + begin + "\n".join(entries) + "\n" + end + tail, "utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_code_ratchets --write")
    write_baseline()
