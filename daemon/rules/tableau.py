"""The third-card rule (``daemon/rules/RULES.md``, "Dealing order and the third-card rule").

All five seed pages agree on this tableau; seed 000 phrases the Banker side as
"does not draw when ...".
"""

from __future__ import annotations

# Banker total -> Player third-card point values on which the Banker draws.
_BANKER_DRAWS_ON: dict[int, frozenset[int]] = {
    0: frozenset(range(10)),
    1: frozenset(range(10)),
    2: frozenset(range(10)),
    3: frozenset({0, 1, 2, 3, 4, 5, 6, 7, 9}),
    4: frozenset({2, 3, 4, 5, 6, 7}),
    5: frozenset({4, 5, 6, 7}),
    6: frozenset({6, 7}),
    7: frozenset(),
}


def _check_total(name: str, total: int) -> None:
    if not 0 <= total <= 9:
        raise ValueError(f"{name} must be a baccarat total 0-9, got {total}")


def is_natural(two_card_total: int) -> bool:
    """A two-card 8 or 9."""
    _check_total("two-card total", two_card_total)
    return two_card_total >= 8


def player_draws(player_total: int, banker_total: int) -> bool:
    """Whether the Player takes a third card, given both two-card totals."""
    _check_total("player total", player_total)
    _check_total("banker total", banker_total)
    if player_total >= 8 or banker_total >= 8:
        return False
    return player_total <= 5


def banker_draws(player_total: int, banker_total: int, player_third_points: int | None) -> bool:
    """Whether the Banker takes a third card.

    ``player_third_points`` is the point value of the Player's third card, or
    None when the Player stood.
    """
    _check_total("player total", player_total)
    _check_total("banker total", banker_total)
    if player_total >= 8 or banker_total >= 8:
        return False
    if player_third_points is None:
        return banker_total <= 5
    _check_total("player third card points", player_third_points)
    return player_third_points in _BANKER_DRAWS_ON.get(banker_total, frozenset())
