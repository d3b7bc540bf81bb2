"""Scoreboard roads of a shoe: the bead plate and the big road, as shown on table displays.

Both are pure functions of the shoe's round results in order (``"player"``,
``"banker"``, ``"tie"``). The bead plate fills six-row columns top to bottom, one
cell per round. The big road starts a new column whenever the winner changes,
records ties on the cell of the last non-tie result, and when a streak reaches the
bottom row (or meets an occupied cell) it turns right: the "dragon tail".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

ROWS = 6

Result = str  # "player" | "banker" | "tie"

_LETTER = {"player": "P", "banker": "B", "tie": "T"}


@dataclass(slots=True)
class BigRoadCell:
    """One cell of the big road: a Player or Banker win with the ties that followed it."""

    winner: Result
    ties: int = 0


@dataclass(slots=True)
class BigRoad:
    """Cells by (column, row); ``leading_ties`` counts ties before the first decisive round."""

    cells: dict[tuple[int, int], BigRoadCell] = field(default_factory=dict)
    leading_ties: int = 0

    @property
    def columns(self) -> int:
        return 1 + max((c for c, _ in self.cells), default=-1)


def bead_plate(results: Sequence[Result], rows: int = ROWS) -> list[list[str]]:
    """Rows of letters (``P``/``B``/``T``, blank when empty), columns filled top to bottom."""
    columns = max(1, -(-len(results) // rows))
    grid = [[" "] * columns for _ in range(rows)]
    for index, result in enumerate(results):
        grid[index % rows][index // rows] = _LETTER.get(result, "?")
    return grid


def big_road(results: Sequence[Result], rows: int = ROWS) -> BigRoad:
    """Place every result on the big road."""
    road = BigRoad()
    last: tuple[int, int] | None = None
    streak_column = -1  # the logical column of the current streak (where it started)
    previous_winner: Result | None = None
    for result in results:
        if result == "tie":
            if last is None:
                road.leading_ties += 1
            else:
                road.cells[last].ties += 1
            continue
        if result not in ("player", "banker"):
            continue
        if previous_winner is None or result != previous_winner:
            streak_column += 1
            # a new streak starts at the top of the first column not used by a dragon tail
            while (streak_column, 0) in road.cells:
                streak_column += 1
            position = (streak_column, 0)
        else:
            assert last is not None
            col, row = last
            below = (col, row + 1)
            if row + 1 < rows and below not in road.cells and col == streak_column:
                position = below
            else:
                position = (col + 1, row)  # dragon tail: turn right
        road.cells[position] = BigRoadCell(result)
        last = position
        previous_winner = result
    return road


def big_road_grid(road: BigRoad, rows: int = ROWS) -> list[list[str]]:
    """Text grid of the big road: ``P``/``B`` (lower case when ties followed), blank when empty."""
    columns = max(1, road.columns)
    grid = [[" "] * columns for _ in range(rows)]
    for (col, row), cell in road.cells.items():
        letter = _LETTER[cell.winner]
        grid[row][col] = letter.lower() if cell.ties else letter
    return grid
