"""The roads as pure functions, against tables worked out by hand from the standard rules."""

from __future__ import annotations

import pytest

from daemon.console.roads import all_roads, derived_road, logical_columns, place

B, P, T = "banker", "player", "tie"
R, U = "red", "blue"  # U: blue

# (results, logical columns, big eye boy, small road, cockroach pig), each worked by hand:
#   a column start compares columns c-1 and c-1-k (equal: red); a later entry at row r looks at
#   column c-k (length exactly r: blue, else red); road k starts at (k, 1), else (k+1, 0).
SEQUENCES = [
    # B B | P P P | B B(T) | P
    ([B, B, P, P, P, B, B, T, P], [2, 3, 2, 1], [R, U, U, R, U], [R, R], []),
    # the chop: P B P B P B, every derived road red
    ([P, B, P, B, P, B], [1] * 6, [R] * 4, [R] * 3, [R] * 2),
    # B B | P | B | P P P | B
    ([B, B, P, B, P, P, P, B], [2, 1, 1, 3, 1], [U, R, U, R, U], [U, U, R, U], [R, U, U]),
    # ties only, then one streak: no derived entries yet
    ([T, T, B, T, B, B], [3], [], [], []),
    # a long streak: one column; its tie never makes an entry
    ([P, P, P, P, P, P, P, T, P], [8], [], [], []),
    # B | P P | B B B | P: big eye boy starts at (1, 1)
    ([B, P, P, B, B, B, P], [1, 2, 3, 1], [U, U, R, U, U], [U, R, U], []),
]


@pytest.mark.parametrize(("results", "columns", "beb", "small", "cockroach"), SEQUENCES)
def test_derived_roads_match_the_hand_worked_table(results, columns, beb, small, cockroach) -> None:
    assert logical_columns(results) == columns
    assert derived_road(results, 1) == beb
    assert derived_road(results, 2) == small
    assert derived_road(results, 3) == cockroach


def test_the_first_columns_of_each_derived_road_are_placed_like_the_big_road() -> None:
    results = [B, B, P, B, P, P, P, B]
    roads = all_roads(results)

    def cells(name: str) -> list[tuple[int, int, str]]:
        return [(c["col"], c["row"], c["colour"]) for c in roads[name]]

    assert cells("big_eye_boy") == [(0, 0, U), (1, 0, R), (2, 0, U), (3, 0, R), (4, 0, U)]
    assert cells("small_road") == [(0, 0, U), (0, 1, U), (1, 0, R), (2, 0, U)]
    assert cells("cockroach_pig") == [(0, 0, R), (1, 0, U), (1, 1, U)]


def test_a_derived_streak_longer_than_six_turns_right() -> None:
    assert [(c["col"], c["row"]) for c in place([R] * 8)] == [(0, r) for r in range(6)] + [(1, 5), (2, 5)]


def test_bead_plate_and_big_road_with_ties() -> None:
    roads = all_roads([T, T, B, B, T, P, P, P, P, P, P, P, B])
    bead = [(c["col"], c["row"], c["result"]) for c in roads["bead_plate"]]
    assert bead == [
        (0, 0, "T"), (0, 1, "T"), (0, 2, "B"), (0, 3, "B"), (0, 4, "T"), (0, 5, "P"),
        (1, 0, "P"), (1, 1, "P"), (1, 2, "P"), (1, 3, "P"), (1, 4, "P"), (1, 5, "P"), (2, 0, "B"),
    ]  # fmt: skip
    big = roads["big_road"]
    assert big["leading_ties"] == 2
    assert [(c["col"], c["row"], c["winner"][0], c["ties"]) for c in big["cells"]] == [
        (0, 0, "b", 0), (0, 1, "b", 1),
        (1, 0, "p", 0), (1, 1, "p", 0), (1, 2, "p", 0), (1, 3, "p", 0), (1, 4, "p", 0), (1, 5, "p", 0),
        (2, 0, "b", 0), (2, 5, "p", 0),
    ]  # fmt: skip


def test_an_unknown_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="1, 2 or 3"):
        derived_road([B], 4)
