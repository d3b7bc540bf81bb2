"""promtool (Debian's ``prometheus`` package, installed by .ci/system-deps): the tests fail,
never skip, when it is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        raise AssertionError(
            "promtool is not installed: the metrics tests need it. "
            "Run `make system-deps` (it installs Debian's prometheus package)."
        )
    return found


def promtool_check_metrics(text: str) -> None:
    """``promtool check metrics`` on an exposition: no error and no lint finding."""
    result = subprocess.run(
        [promtool(), "check", "metrics"], input=text.encode(), capture_output=True, timeout=60, check=False
    )
    output = (result.stdout + result.stderr).decode(errors="replace")
    assert result.returncode == 0, output
    assert output.strip() == "", output


def promtool_run(*args: str | Path) -> str:
    """Run ``promtool ARGS``; its output, asserting success."""
    result = subprocess.run(
        [promtool(), *(str(a) for a in args)], capture_output=True, timeout=120, check=False
    )
    output = (result.stdout + result.stderr).decode(errors="replace")
    assert result.returncode == 0, output
    return output
