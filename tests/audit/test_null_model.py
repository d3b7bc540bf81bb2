"""The null model deals as the table does, and the committed tables are what the code computes."""

from __future__ import annotations

import math
import random

import pytest

from common.cards import ALL_CARDS
from daemon.audit.null_model import Statistic, deal_shoe, simulate
from daemon.audit.null_tables import NULL_TABLES
from daemon.rules.outcome import Winner
from daemon.simulation.dealer import DealSettings, plan_shoe

WINNER = {"player": Winner.PLAYER, "banker": Winner.BANKER, "tie": Winner.TIE}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_deal_shoe_deals_as_the_virtual_dealer_does(seed: int) -> None:
    """Same shuffle as ``plan_shoe``; same cards out of the shoe, same winners."""
    plan = plan_shoe(DealSettings(decks=8, seed=seed, cut_card_from_end=16))
    shoe = [c for _ in range(8) for c in ALL_CARDS]
    random.Random(seed).shuffle(shoe)
    dealt = deal_shoe(shoe, cut_card_from_end=16)
    drawn = tuple(a.card for a in plan.actions if a.kind == "draw" and a.card is not None)
    verdicts = tuple(WINNER[a.verdict[0]] for a in plan.actions if a.kind == "verdict" and a.verdict)
    assert dealt.cards == drawn
    assert dealt.winners == verdicts


@pytest.mark.parametrize("decks", sorted(NULL_TABLES))
def test_committed_table_is_whole(decks: int) -> None:
    table = NULL_TABLES[decks]
    assert table.decks == decks
    for stat in Statistic:
        assert sum(table.histograms[stat]) == table.shoes
        assert table.tail(stat, 0) == 1.0


def test_committed_table_agrees_with_a_fresh_simulation() -> None:
    """2,000 new shoes (another seed): every tail within 4.5 standard errors of the committed one."""
    committed = NULL_TABLES[8]
    fresh = simulate(decks=8, cut_card_from_end=committed.cut_card_from_end, shoes=2_000, seed=99)
    for stat in Statistic:
        for length in range(1, len(committed.histograms[stat]) + 2):
            p = committed.tail(stat, length)
            se = math.sqrt(max(p * (1 - p), 1 / committed.shoes) / fresh.shoes)
            assert abs(fresh.tail(stat, length) - p) <= 4.5 * se + 1 / fresh.shoes, (stat, length)


def test_threshold_is_the_shortest_length_within_alpha() -> None:
    table = NULL_TABLES[8]
    for stat in Statistic:
        for alpha in (0.01, 0.001):
            t = table.threshold(stat, alpha)
            assert table.tail(stat, t) <= alpha < table.tail(stat, t - 1)
