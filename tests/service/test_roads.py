"""Bead plate and big road placement."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.rules.roads import ROWS, bead_plate, big_road, big_road_grid

results_strategy = st.lists(st.sampled_from(["player", "banker", "tie"]), max_size=90)


def test_bead_plate_fills_columns_top_to_bottom() -> None:
    grid = bead_plate(["banker"] * 6 + ["player", "tie"])
    assert [row[0] for row in grid] == ["B"] * 6
    assert [row[1] for row in grid] == ["P", "T", " ", " ", " ", " "]


def test_big_road_new_column_on_change_and_ties_on_last_cell() -> None:
    road = big_road(["tie", "banker", "banker", "tie", "tie", "player", "banker"])
    assert road.leading_ties == 1
    assert {pos: (c.winner, c.ties) for pos, c in road.cells.items()} == {
        (0, 0): ("banker", 0),
        (0, 1): ("banker", 2),
        (1, 0): ("player", 0),
        (2, 0): ("banker", 0),
    }
    grid = big_road_grid(road)
    assert grid[0][:3] == ["B", "P", "B"]
    assert grid[1][0] == "b"


def test_big_road_dragon_tail_turns_right_at_the_bottom() -> None:
    road = big_road(["banker"] * 8 + ["player"] * 7)
    banker = sorted(p for p, c in road.cells.items() if c.winner == "banker")
    assert banker == [(0, r) for r in range(ROWS)] + [(1, 5), (2, 5)]
    player = sorted(p for p, c in road.cells.items() if c.winner == "player")
    # the player streak starts in column 1 and turns right above the banker tail
    assert player == [(1, r) for r in range(5)] + [(2, 4), (3, 4)]


@given(results_strategy)
def test_big_road_places_every_decisive_round_once(results: list[str]) -> None:
    road = big_road(results)
    decisive = [r for r in results if r != "tie"]
    assert len(road.cells) == len(decisive)
    first_decisive = next((i for i, r in enumerate(results) if r != "tie"), len(results))
    assert road.leading_ties == first_decisive
    assert road.leading_ties + sum(c.ties for c in road.cells.values()) == results.count("tie")
    assert all(0 <= row < ROWS for _, row in road.cells)
    # reading cells in placement order reproduces the decisive sequence
    assert sorted(c.winner for c in road.cells.values()) == sorted(decisive)


@given(results_strategy)
def test_bead_plate_holds_every_round_in_order(results: list[str]) -> None:
    grid = bead_plate(results)
    flat = [grid[row][col] for col in range(len(grid[0])) for row in range(ROWS)]
    letters = {"player": "P", "banker": "B", "tie": "T"}
    assert flat[: len(results)] == [letters[r] for r in results]
    assert all(cell == " " for cell in flat[len(results) :])
