"""The memoised settlement equals the rules core computed from scratch, for every variant."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.engine.settle import Settler, round_facts, verdict_facts
from daemon.rules.bets import resolve_bets
from daemon.rules.outcome import RoundOutcome, play_round
from daemon.rules.variants import shipped_variant_names
from tests.engine.support import variant

cards6 = st.lists(st.sampled_from(ALL_CARDS), min_size=6, max_size=6)


@settings(max_examples=300)
@given(cards=cards6)
def test_fast_round_facts_equal_the_rules_core(cards: list[Card]) -> None:
    outcome, _ = play_round(cards)
    player = [c.code for c in outcome.player]
    banker = [c.code for c in outcome.banker]
    assert round_facts(player, banker) == outcome.facts


@settings(max_examples=300)
@given(cards=cards6)
def test_verdict_facts_equal_the_rules_core(cards: list[Card]) -> None:
    outcome, _ = play_round(cards)
    player = [c.code for c in outcome.player]
    banker = [c.code for c in outcome.banker]
    for _ in range(2):  # cold, then from the cache
        assert verdict_facts(player, banker) == (
            outcome.facts.winner.value,
            outcome.facts.player_pair,
            outcome.facts.banker_pair,
        )


@settings(max_examples=150)
@given(
    cards=cards6,
    name=st.sampled_from(shipped_variant_names()),
    hand=st.integers(1, 80),
    die=st.integers(1, 12),
)
def test_settlement_equals_outcome_and_resolution_from_scratch(
    cards: list[Card], name: str, hand: int, die: int
) -> None:
    var = variant(name)
    outcome, _ = play_round(cards)
    the_die = die if var.needs_super_round_die else None
    settler = Settler(var)
    for _ in range(2):  # cold, then from the cache
        summary, bets = settler.settle(
            [c.code for c in outcome.player], [c.code for c in outcome.banker], hand, the_die
        )
        expected = RoundOutcome(outcome.player, outcome.banker).to_dict()
        assert summary == expected
        assert list(summary) == list(expected)  # the same key order: the same JSON in the journal
        fresh = resolve_bets(var, outcome, the_die)
        assert bets == {n: fresh[n].to_dict() for n in var.offered_bets(hand)}
