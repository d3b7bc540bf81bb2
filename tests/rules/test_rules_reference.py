"""daemon/rules/RULES.md says what the code does, and has every section the project cites.

Auditors read RULES.md, not the code: its tableau grid and its shipped pay tables are checked
against the code, so a change of either shows up as a failure naming the cell or the bet that
no longer agrees; and every "RULES.md dealing mistake N" or "RULES.md \"Section\"" written
in code, events, fixtures or docs must name a numbered case or a heading that is there.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path, PurePosixPath

from daemon.rules.resolution import fraction_text
from daemon.rules.tableau import banker_draws
from daemon.rules.variants import load_variant_by_name, shipped_variant_names
from tests.test_docs_self_contained import REPO, TEXT_SUFFIXES, tracked_files

RULES_MD = REPO / "daemon" / "rules" / "RULES.md"
GRID_HEADER = "| Banker total | Player stood | P3 = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 |"


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _table_after(lines: list[str], start: int) -> list[list[str]]:
    """The body rows of the Markdown table whose header is at ``start``."""
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def test_tableau_grid_is_the_code() -> None:
    lines = RULES_MD.read_text(encoding="utf-8").splitlines()
    rows = _table_after(lines, lines.index(GRID_HEADER))
    assert [row[0] for row in rows] == [str(total) for total in range(8)]
    wrong = []
    for row in rows:
        banker = int(row[0])
        stood = banker_draws(6, banker, None)
        drew = [banker_draws(0, banker, third) for third in range(10)]
        expected = ["D" if draws else "S" for draws in (stood, *drew)]
        if row[1:] != expected:
            wrong.append(f"Banker {banker}: RULES.md {row[1:]}, code {expected}")
    assert wrong == [], "RULES.md disagrees with the code:\n" + "\n".join(wrong)


def _variant_rows(text: str, name: str) -> dict[str, list[str]]:
    """Bet name -> [kind, pays, offered] from the variant's section of RULES.md."""
    heading = re.search(rf"^#### `{re.escape(name)}`.*$", text, re.MULTILINE)
    assert heading is not None, f"RULES.md has no section for the shipped variant {name!r}"
    lines = text[heading.end() :].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| bet |"))
    rows = _table_after(lines, header)
    return {row[0]: row[1:] for row in rows}


def _figures(value: object) -> list[Fraction]:
    """The payout figures of one bet field (a zero refund is no figure a pay table shows)."""
    values = value.values() if isinstance(value, dict) else [value]
    return [v for v in values if isinstance(v, Fraction) and v != 0]


def test_shipped_pay_tables_are_the_variant_files() -> None:
    text = RULES_MD.read_text(encoding="utf-8")
    wrong = []
    for name in shipped_variant_names():
        variant = load_variant_by_name(name)
        rows = _variant_rows(text, name)
        assert sorted(rows) == sorted(bet.name for bet in variant.bets), name
        for bet in variant.bets:
            kind, pays, offered = rows[bet.name]
            where = f"{name}: {bet.name}"
            if not kind.startswith(f"`{bet.kind}`"):
                wrong.append(f"{where}: kind {kind!r}, file {bet.kind!r}")
            expected_offered = f"hands 1-{bet.max_hand}" if bet.max_hand else "every hand"
            if offered != expected_offered:
                wrong.append(f"{where}: offered {offered!r}, file {expected_offered!r}")
            numbers = set(re.findall(r"\d+(?:/\d+)?", pays))
            for field, value in bet:
                for figure in _figures(value):
                    if fraction_text(figure) not in numbers:
                        wrong.append(f"{where}: {field} {fraction_text(figure)} not in {pays!r}")
    assert wrong == [], "RULES.md disagrees with the code:\n" + "\n".join(wrong)


# "RULES.md dealing mistake 7", "RULES.md mistakes 1-2", "RULES.md dealing mistakes 1/2", ...
NUMBERED_CITATION = re.compile(r"RULES\.md (?:dealing )?(?:mistake|case)s? (\d+)(?:\s*(?:/|-|and)\s*(\d+))?")
# RULES.md "Shoe procedure" (a heading, or the start of one)
QUOTED_CITATION = re.compile(r'RULES\.md "([^"]+)"')
MISTAKES_HEADING = "## Dealing mistakes and how they resolve"


def _numbered_cases(lines: list[str]) -> list[int]:
    start = lines.index(MISTAKES_HEADING)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return [int(m.group(1)) for line in lines[start:end] if (m := re.match(r"(\d+)\. \*\*", line))]


def test_every_citation_names_a_section_that_is_there() -> None:
    lines = RULES_MD.read_text(encoding="utf-8").splitlines()
    cases = _numbered_cases(lines)
    assert cases == list(range(1, 9)), f"dealing mistakes numbered {cases}, the seeds' digest has 1-8"
    headings = [line.lstrip("#").strip().lower() for line in lines if line.startswith("#")]
    missing = []
    numbered = quoted = 0
    this_file = PurePosixPath(Path(__file__).resolve().relative_to(REPO).as_posix())
    for path in tracked_files():
        if not path.name.endswith(TEXT_SUFFIXES) or path == this_file:
            continue
        for number, line in enumerate((REPO / path).read_text(encoding="utf-8").splitlines(), start=1):
            for match in NUMBERED_CITATION.finditer(line):
                numbered += 1
                first, last = int(match.group(1)), int(match.group(2) or match.group(1))
                if not {first, last} <= set(cases):
                    missing.append(f"{path}:{number}: {match.group(0)}")
            for match in QUOTED_CITATION.finditer(line):
                quoted += 1
                if not any(h.startswith(match.group(1).lower()) for h in headings):
                    missing.append(f"{path}:{number}: {match.group(0)}")
    assert numbered > 0, "no numbered citation found: the pattern no longer matches the code"
    assert quoted > 0, "no quoted citation found: the pattern no longer matches the code"
    assert missing == [], "citations of RULES.md sections it does not have:\n" + "\n".join(missing)
