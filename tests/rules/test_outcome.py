"""Round outcomes and their facts, checked against independent recomputation from the cards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.rules.outcome import RoundOutcome, Winner, play_round
from tests.rules.support import deal

six_cards = st.lists(st.sampled_from(ALL_CARDS), min_size=6, max_size=6)


def points(card: Card) -> int:
    value = int(card.rank)
    return value if value < 10 else 0


def total(cards: tuple[Card, ...]) -> int:
    return sum(points(c) for c in cards) % 10


@settings(max_examples=300)
@given(six_cards)
def test_outcome_and_facts_agree_with_the_cards(cards: list[Card]) -> None:
    outcome, used = play_round(cards)
    assert outcome.player == tuple(cards[0:4:2] + cards[4 : 4 + (len(outcome.player) - 2)])
    assert outcome.banker[:2] == (cards[1], cards[3])
    assert used == len(outcome.player) + len(outcome.banker)
    p, b = total(outcome.player), total(outcome.banker)
    facts = outcome.facts
    assert (facts.player_total, facts.banker_total) == (p, b)
    assert facts.winner is (Winner.PLAYER if p > b else Winner.BANKER if b > p else Winner.TIE)
    assert facts.winner is outcome.winner
    assert facts.margin == abs(p - b) == outcome.margin
    assert facts.card_count == used == outcome.card_count
    # A side keeping two cards with 8-9 is exactly a two-card natural.
    assert facts.player_natural == (total(outcome.player[:2]) >= 8) == outcome.player_natural
    assert facts.banker_natural == (total(outcome.banker[:2]) >= 8) == outcome.banker_natural
    assert facts.player_pair == (cards[0].rank == cards[2].rank)
    assert facts.banker_pair == (cards[1].rank == cards[3].rank)
    assert facts.player_suited_pair == (cards[0] == cards[2])
    assert facts.banker_suited_pair == (cards[1] == cards[3])
    same_cards = sorted(map(str, (cards[0], cards[2]))) == sorted(map(str, (cards[1], cards[3])))
    assert facts.identical_pairs == (facts.player_pair and facts.banker_pair and same_cards)
    first = int(cards[1].rank) - int(cards[0].rank)
    assert facts.first_card_comparison == (first > 0) - (first < 0)


def test_to_dict_is_complete() -> None:
    outcome = deal("Qc Ks 8d 9h")
    assert outcome.to_dict() == {
        "player": ["Qc", "8d"],
        "banker": ["Ks", "9h"],
        "player_total": 8,
        "banker_total": 9,
        "winner": "banker",
        "margin": 1,
        "player_natural": True,
        "banker_natural": True,
        "player_pair": False,
        "banker_pair": False,
        "player_suited_pair": False,
        "banker_suited_pair": False,
        "cards": 4,
        "first_card": "dragon",
    }


def test_identical_pairs_needs_the_same_two_cards() -> None:
    assert deal("9c 9h 9h 9c").identical_pairs
    assert not deal("9c 9s 9h 9d").identical_pairs  # both pairs, different suits
    assert deal("9c 9s 9h 9d").player_pair
    assert deal("9c 9s 9h 9d").banker_pair


def test_round_outcome_is_hashable_value() -> None:
    a, b = deal("5c 2s 4d 5h"), deal("5c 2s 4d 5h")
    assert a == b
    assert hash(a.facts) == hash(b.facts)
    assert isinstance(a, RoundOutcome)
