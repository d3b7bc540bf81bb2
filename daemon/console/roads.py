"""The scoreboard roads as cell lists for the browser: bead plate, big road and the three
derived roads (big eye boy, small road, cockroach pig), all pure functions of the shoe's
results in order (``"player"``, ``"banker"``, ``"tie"``).

The bead plate and big road placement are ``daemon.rules.roads`` (the monitor's). The
derived roads follow the standard rules, read off the big road's *logical* columns (one
column per streak, however a dragon tail bends it on screen; ties are not entries):

- Road ``k`` (big eye boy 1, small road 2, cockroach pig 3) gets an entry for each big-road
  entry from column ``k`` row 2 on (or column ``k+1`` row 1 when column ``k`` has one
  entry only): columns and rows counted from 0 below, so from ``(k, 1)``, else ``(k+1, 0)``.
- An entry that starts a column (row 0) compares the two columns before it that lie ``k``
  apart: column ``c-1`` and column ``c-1-k``; equal lengths are red, else blue.
- An entry at row ``r >= 1`` looks at column ``c-k``: red when that column does not end
  exactly at row ``r-1`` (it has a cell at row ``r``, or is shorter than ``r``), blue when
  its length is exactly ``r``.

Red and blue entries are then placed like the big road (a new column on each change of
colour, dragon tails at the bottom row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from daemon.rules.roads import ROWS, bead_plate, big_road

RED, BLUE = "red", "blue"
DERIVED_OFFSETS = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}


def logical_columns(results: Sequence[str]) -> list[int]:
    """The length of each big-road streak (ties ignored)."""
    columns: list[int] = []
    previous: str | None = None
    for result in results:
        if result not in ("player", "banker"):
            continue
        if result == previous:
            columns[-1] += 1
        else:
            columns.append(1)
        previous = result
    return columns


def derived_road(results: Sequence[str], k: int) -> list[str]:
    """The red/blue entries of derived road ``k`` (1 big eye boy, 2 small road, 3 cockroach pig)."""
    if k not in (1, 2, 3):
        raise ValueError(f"derived road offset must be 1, 2 or 3, got {k}")
    columns: list[int] = []
    previous: str | None = None
    out: list[str] = []
    for result in results:
        if result not in ("player", "banker"):
            continue
        if result == previous:
            columns[-1] += 1
        else:
            columns.append(1)
        previous = result
        c, r = len(columns) - 1, columns[-1] - 1
        if c < k or (c == k and r == 0):
            continue
        if r == 0:
            out.append(RED if columns[c - 1] == columns[c - 1 - k] else BLUE)
        else:
            out.append(BLUE if columns[c - k] == r else RED)
    return out


def place(entries: Sequence[str], rows: int = ROWS) -> list[dict[str, Any]]:
    """Red/blue entries on a grid, placed like the big road: ``{"col", "row", "colour"}``."""
    as_results = ["banker" if e == RED else "player" for e in entries]
    road = big_road(as_results, rows)
    return [
        {"col": col, "row": row, "colour": RED if cell.winner == "banker" else BLUE}
        for (col, row), cell in sorted(road.cells.items())
    ]


def bead_cells(results: Sequence[str], rows: int = ROWS) -> list[dict[str, Any]]:
    """The bead plate: ``{"col", "row", "result"}`` (``P``/``B``/``T``), top to bottom."""
    grid = bead_plate(results, rows)
    return [
        {"col": col, "row": row, "result": grid[row][col]}
        for col in range(len(grid[0]))
        for row in range(rows)
        if grid[row][col].strip()
    ]


def big_road_cells(results: Sequence[str], rows: int = ROWS) -> dict[str, Any]:
    """The big road: cells ``{"col", "row", "winner", "ties"}`` and the ties before the first."""
    road = big_road(results, rows)
    cells = [
        {"col": col, "row": row, "winner": cell.winner, "ties": cell.ties}
        for (col, row), cell in sorted(road.cells.items())
    ]
    return {"cells": cells, "leading_ties": road.leading_ties}


def all_roads(results: Sequence[str]) -> dict[str, Any]:
    """Every road of a shoe, as the table view draws them."""
    roads: dict[str, Any] = {"bead_plate": bead_cells(results), "big_road": big_road_cells(results)}
    for name, k in DERIVED_OFFSETS.items():
        roads[name] = place(derived_road(results, k))
    return roads
