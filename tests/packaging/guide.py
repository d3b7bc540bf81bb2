"""The install guide (``systemd/README.md``) read as the technician reads it: its numbered
steps and the shell commands of their fenced ``sh`` blocks, exactly as written.

The package test runs these very lines in a fresh Debian 12 root, and the guide test compares
the files they install with the files the example config names, so a guide that drifts from
the package or from the example config breaks a test instead of a technician's afternoon.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "systemd" / "README.md"

_STEP = re.compile(r"^## (\d+)\. (.+)$", re.M)
_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True, slots=True)
class Step:
    """One numbered section of the guide: its number, title and ``sh`` blocks (each a list of
    command lines, comments and continuation lines kept as written)."""

    number: int
    title: str
    blocks: tuple[tuple[str, ...], ...]


def install_steps(text: str | None = None) -> list[Step]:
    """The guide's numbered steps (``## 1. ...`` up to the next ``## `` heading), in order."""
    text = GUIDE.read_text() if text is None else text
    steps: list[Step] = []
    for match in _STEP.finditer(text):
        rest = text[match.end() :]
        following = re.search(r"^## ", rest, re.M)
        body = rest[: following.start()] if following else rest
        blocks = tuple(tuple(block.rstrip("\n").split("\n")) for block in _BLOCK.findall(body))
        steps.append(Step(int(match.group(1)), match.group(2), blocks))
    return steps


@dataclass(frozen=True, slots=True)
class Installed:
    """One file an ``install`` line of the guide puts in place."""

    source: str
    path: PurePosixPath
    mode: str
    group: str | None


def installed_files(lines: tuple[str, ...]) -> list[Installed]:
    """The files the ``sudo install`` lines of a block install (sources in order)."""
    found: list[Installed] = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:2] != ["sudo", "install"]:
            continue
        options: dict[str, str] = {}
        positional: list[str] = []
        rest = iter(words[2:])
        for word in rest:
            if word in ("-m", "-g", "-o"):
                options[word] = next(rest)
            elif word.startswith("-"):
                options[word] = ""
            else:
                positional.append(word)
        *sources, target = positional
        for source in sources:
            path = (
                PurePosixPath(target) / PurePosixPath(source).name
                if target.endswith("/")
                else PurePosixPath(target)
            )
            found.append(Installed(source, path, options.get("-m", "0755"), options.get("-g")))
    return found
