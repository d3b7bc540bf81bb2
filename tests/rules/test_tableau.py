"""The third-card rule, exhaustively, against a table written out by hand from RULES.md.

Every Player two-card total x Banker two-card total x Player third card (or none),
for both the tableau functions and a dealt round (``play_round``).
"""

from __future__ import annotations

import pytest

from common.cards import Card, Rank, Suit
from common.slots import Slot
from daemon.rules.outcome import next_slot, play_round
from daemon.rules.tableau import banker_draws, is_natural, player_draws

# RULES.md "Dealing order and the third-card rule", copied cell by cell. Rows are the
# Banker's two-card total 0-7; the string has one letter per Player third-card point
# value 0..9: D = Banker draws, S = Banker stands.
BANKER_WHEN_PLAYER_DREW = {
    0: "DDDDDDDDDD",
    1: "DDDDDDDDDD",
    2: "DDDDDDDDDD",
    3: "DDDDDDDDSD",
    4: "SSDDDDDDSS",
    5: "SSSSDDDDSS",
    6: "SSSSSSDDSS",
    7: "SSSSSSSSSS",
}


def expected_player_draws(p: int, b: int) -> bool:
    if p in (8, 9) or b in (8, 9):
        return False  # a natural on either side: both stand
    return p in (0, 1, 2, 3, 4, 5)


def expected_banker_draws(p: int, b: int, third: int | None) -> bool:
    if p in (8, 9) or b in (8, 9):
        return False
    if third is None:
        return b in (0, 1, 2, 3, 4, 5)
    return BANKER_WHEN_PLAYER_DREW[b][third] == "D"


CASES = [(p, b, t) for p in range(10) for b in range(10) for t in [None, *range(10)]]


def test_every_total_pair_and_third_card() -> None:
    mismatches: list[tuple[object, ...]] = []
    for p, b, third in CASES:
        if player_draws(p, b) != expected_player_draws(p, b):
            mismatches.append(("player", p, b))
        # The Banker rule with a third card only applies when the Player really drew.
        if third is not None and not expected_player_draws(p, b):
            continue
        if banker_draws(p, b, third) != expected_banker_draws(p, b, third):
            mismatches.append(("banker", p, b, third))
    assert mismatches == []
    assert len(CASES) == 1100


def test_naturals() -> None:
    assert [t for t in range(10) if is_natural(t)] == [8, 9]


@pytest.mark.parametrize("bad", [-1, 10, 99])
def test_totals_out_of_range_are_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="0-9"):
        player_draws(bad, 0)
    with pytest.raises(ValueError, match="0-9"):
        banker_draws(0, bad, None)
    with pytest.raises(ValueError, match="0-9"):
        banker_draws(0, 0, bad)


def card_with_points(points: int, suit: Suit = Suit.SPADES) -> Card:
    return Card(Rank.KING if points == 0 else Rank(points), suit)


def test_dealt_rounds_follow_the_table() -> None:
    """play_round on every (P total, B total, P3 or none, B3) deals exactly the cards the table asks."""
    checked = 0
    for p, b, third in CASES:
        if (third is not None) != expected_player_draws(p, b):
            continue
        for b3 in range(10):
            # P1 carries the Player total, P2 a zero; same for the Banker.
            shoe = [card_with_points(p), card_with_points(b), Card(Rank.TEN, Suit.HEARTS)]
            shoe += [Card(Rank.QUEEN, Suit.CLUBS)]
            tail = [card_with_points(third)] if third is not None else []
            tail += [card_with_points(b3, Suit.DIAMONDS), Card(Rank.JACK, Suit.SPADES)]
            outcome, used = play_round(shoe + tail)
            banker_drew = expected_banker_draws(p, b, third)
            expected_player_total = (p + (third or 0)) % 10
            expected_banker_total = (b + (b3 if banker_drew else 0)) % 10
            assert len(outcome.player) == (3 if third is not None else 2)
            assert len(outcome.banker) == (3 if banker_drew else 2)
            assert used == len(outcome.player) + len(outcome.banker)
            assert (outcome.player_total, outcome.banker_total) == (
                expected_player_total,
                expected_banker_total,
            )
            checked += 1
    # 100 total pairs; those where the Player draws have 10 third cards.
    drawing = sum(expected_player_draws(p, b) for p in range(10) for b in range(10))
    assert checked == (100 - drawing + drawing * 10) * 10


def test_next_slot_order_and_illegal_prefixes() -> None:
    five, six = card_with_points(5), card_with_points(6)
    zero = card_with_points(0)
    assert next_slot([], []) is Slot.P1
    assert next_slot([five], []) is Slot.B1
    assert next_slot([five], [six]) is Slot.P2
    assert next_slot([five, zero], [six]) is Slot.B2
    assert next_slot([five, zero], [six, zero]) is Slot.P3
    # Player stood on 6 with the Banker on 5: Banker draws.
    assert next_slot([six, zero], [five, zero]) is Slot.B3
    assert next_slot([six, zero], [six, zero]) is None
    with pytest.raises(ValueError, match="legal"):
        next_slot([], [five])
    with pytest.raises(ValueError, match="Player has a third card"):
        next_slot([six, zero, zero], [six, zero])
    with pytest.raises(ValueError, match="Banker has a third card"):
        next_slot([six, zero], [six, zero, zero])
    with pytest.raises(ValueError, match="ran out"):
        play_round([five, six, zero])
