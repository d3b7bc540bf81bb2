"""Card identity, parsing and point values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card, CardParseError, Rank, Suit, hand_total


def test_a_deck_has_52_distinct_cards() -> None:
    assert len(ALL_CARDS) == 52
    assert len(set(ALL_CARDS)) == 52


@pytest.mark.parametrize(
    ("rank", "points"),
    [(Rank.ACE, 1), (Rank.FIVE, 5), (Rank.NINE, 9), (Rank.TEN, 0), (Rank.JACK, 0), (Rank.KING, 0)],
)
def test_point_values(rank: Rank, points: int) -> None:
    assert Card(rank, Suit.SPADES).points == points


@pytest.mark.parametrize(
    ("text", "card"),
    [
        ("8s", Card(Rank.EIGHT, Suit.SPADES)),
        ("Th", Card(Rank.TEN, Suit.HEARTS)),
        ("10h", Card(Rank.TEN, Suit.HEARTS)),
        ("QD", Card(Rank.QUEEN, Suit.DIAMONDS)),
        (" ac ", Card(Rank.ACE, Suit.CLUBS)),
    ],
)
def test_parse_accepts_common_spellings(text: str, card: Card) -> None:
    assert Card.parse(text) == card


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "too short"), ("8", "too short"), ("1s", "unknown rank"), ("8x", "unknown suit"), ("ZZs", "rank")],
)
def test_parse_rejects_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(CardParseError, match=message):
        Card.parse(text)


@given(st.sampled_from(ALL_CARDS))
def test_code_round_trips(card: Card) -> None:
    assert Card.parse(card.code) == card
    assert str(card) == card.code


@given(st.text(max_size=6))
def test_parse_never_raises_anything_but_card_parse_error(text: str) -> None:
    try:
        card = Card.parse(text)
    except CardParseError:
        return
    assert card in ALL_CARDS


@given(st.lists(st.sampled_from(ALL_CARDS), min_size=1, max_size=3))
def test_hand_total_is_sum_of_points_mod_10(cards: list[Card]) -> None:
    assert hand_total(cards) == sum(c.points for c in cards) % 10
    assert 0 <= hand_total(cards) <= 9
