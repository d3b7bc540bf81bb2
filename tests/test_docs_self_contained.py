"""The repository's documentation stands on its own.

A user of the product has only this repository: no file may send a reader to the design
folder or the rule-page seeds kept outside it, and every relative Markdown link must lead to
a file (or folder) that is in the repository. Nor may the product cite the project's issue
tracker: its users have none.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

REPO = Path(__file__).resolve().parent.parent

TEXT_SUFFIXES = (".md", ".py", ".yaml", ".json", ".toml", ".jsonl")

# The outside folders, spelled as a regex so that this file does not name them itself.
OUTSIDE_REFERENCE = re.compile(r"\.\./shared|shared/(?:design|seeds)")

# [text](target) and [text](<target> "title"); images (![alt](target)) match too.
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...


@cache
def tracked_files() -> tuple[PurePosixPath, ...]:
    """Every file git tracks in the repository, as repository-relative paths."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    return tuple(PurePosixPath(name) for name in out.split("\0") if name)


@cache
def tracked_folders() -> frozenset[PurePosixPath]:
    return frozenset(parent for path in tracked_files() for parent in path.parents)


def _text_files(suffixes: tuple[str, ...]) -> list[PurePosixPath]:
    return [path for path in tracked_files() if path.name.endswith(suffixes)]


def _lines(path: PurePosixPath) -> list[str]:
    return (REPO / path).read_text(encoding="utf-8").splitlines()


def _links(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link outside code blocks and code spans."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1) == fence:
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        prose = INLINE_CODE.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(prose)]
        definition = REFERENCE_DEFINITION.match(prose)
        if definition:
            targets.append(definition.group(1))
        found.extend((number, target.strip("<>")) for target in targets)
    return found


def _resolves(source: PurePosixPath, target: str) -> bool:
    """Whether a relative link from ``source`` names a tracked file or a folder holding some."""
    path_part = unquote(target.split("#", 1)[0])
    if not path_part:
        return True  # a link to a heading of the same page
    base = PurePosixPath() if path_part.startswith("/") else source.parent
    parts: list[str] = list(base.parts)
    for part in PurePosixPath(path_part.lstrip("/")).parts:
        if part == "..":
            if not parts:
                return False  # leaves the repository
            parts.pop()
        elif part != ".":
            parts.append(part)
    resolved = PurePosixPath(*parts)
    return resolved in tracked_files() or resolved in tracked_folders()


def test_no_file_points_outside_the_repository() -> None:
    offenders = [
        f"{path}:{number}: {line.strip()}"
        for path in _text_files(TEXT_SUFFIXES)
        for number, line in enumerate(_lines(path), start=1)
        if OUTSIDE_REFERENCE.search(line)
    ]
    assert offenders == [], "references to files outside the repository:\n" + "\n".join(offenders)


def test_every_relative_markdown_link_resolves() -> None:
    documents = _text_files((".md",))
    assert PurePosixPath("README.md") in documents
    broken = [
        f"{path}:{number}: {target}"
        for path in documents
        for number, target in _links(_lines(path))
        if not EXTERNAL.match(target) and not _resolves(path, target)
    ]
    assert broken == [], "Markdown links to files not in the repository:\n" + "\n".join(broken)


def test_link_finder_reads_links_and_skips_code() -> None:
    lines = [
        'See [rules](daemon/rules/RULES.md#shoe-procedure) and ![logo](<img/a b.png> "t").',
        "`[not a link](nowhere.md)` and [web](https://example.com).",
        "```",
        "[inside a fence](nowhere.md)",
        "```",
        "[ref]: config/README.md",
    ]
    assert _links(lines) == [
        (1, "daemon/rules/RULES.md#shoe-procedure"),
        (1, "img/a b.png"),
        (2, "https://example.com"),
        (6, "config/README.md"),
    ]
    readme = PurePosixPath("config/README.md")
    assert _resolves(readme, "../README.md")
    assert _resolves(readme, "variants/")
    assert _resolves(readme, "#every-key")
    assert not _resolves(readme, "missing.md")
    assert not _resolves(readme, "../../outside.md")


# "issue 12", "issues #11 and #13": the project's tracker, which no user of the product has.
TRACKER_REFERENCE = re.compile(r"\b[Ii]ssues? #?\d+")
PRODUCT_FOLDERS = ("common/", "daemon/", "drivers/", "config/", "systemd/")


def test_the_product_cites_no_tracker_issue() -> None:
    offenders = [
        f"{path}:{number}"
        for path in _text_files((*TEXT_SUFFIXES, ".sh", ".conf", ".js", ".css", ".1"))
        if str(path).startswith(PRODUCT_FOLDERS) or str(path) == "README.md"
        for number, line in enumerate(_lines(path), start=1)
        if TRACKER_REFERENCE.search(line)
    ]
    assert not offenders, f"say what the thing is instead of citing a tracker issue: {offenders}"


def test_tracker_reference_pattern_finds_what_it_should() -> None:
    assert TRACKER_REFERENCE.search("the camera arbitration of issue 7")
    assert TRACKER_REFERENCE.search("(issue #13; see the README)")
    assert TRACKER_REFERENCE.search("Issues 11 and 13")
    assert not TRACKER_REFERENCE.search("a reissue of the card")
    assert not TRACKER_REFERENCE.search("the issuer's key")
