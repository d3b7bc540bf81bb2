"""Exact bet odds: published house edges, and a brute-force average on a small shoe."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from functools import cache

import pytest

from common.cards import Card
from daemon.rules.bets import resolve_bets
from daemon.rules.enumerate import Enumeration, enumerate_composition, enumerate_shoe
from daemon.rules.outcome import RoundFacts
from daemon.rules.rtp import BetOdds, variant_odds
from daemon.rules.variants import Variant, load_variant_by_name, shipped_variant_names
from tests.rules.independent import brute_force_joint


@pytest.fixture(scope="module")
def eight() -> Enumeration:
    return enumerate_shoe(8)


def odds_by_name(variant: Variant, e: Enumeration) -> dict[str, BetOdds]:
    return {o.name: o for o in variant_odds(variant, e)}


def edge_percent(o: BetOdds, places: int = 4) -> float:
    return round(float(o.house_edge) * 100, places)


def test_commission_banker_returns_98_94_percent(eight: Enumeration) -> None:
    """Seed 003: "RTP ... 98.94%"."""
    banker = odds_by_name(load_variant_by_name("standard"), eight)["Banker"]
    assert round(float(banker.rtp) * 100, 2) == 98.94
    assert banker.rtp == 1 + banker.expected_return == 1 - banker.house_edge


def test_published_house_edges(eight: Enumeration) -> None:
    """https://www.multiplayerbaccarat.com/odds.html (8 decks: 1.0579%, 1.2351%, 14.3596%) and
    Wizard of Odds EZ Baccarat (Banker 1.0183%, Dragon 7 7.6113%, Panda 8 10.1876%)."""
    standard = odds_by_name(load_variant_by_name("standard"), eight)
    assert edge_percent(standard["Banker"]) == 1.0579
    assert edge_percent(standard["Player"]) == 1.2351
    assert edge_percent(standard["Tie"]) == 14.3596
    ez = odds_by_name(load_variant_by_name("ez"), eight)
    assert edge_percent(ez["Banker"]) == 1.0183
    assert edge_percent(ez["Dragon 7"]) == 7.6113
    assert edge_percent(ez["Panda 8"]) == 10.1876
    assert round(float(ez["Banker"].p_push), 6) == round(0.095156 + 0.022534, 6)


def test_published_dragon_bonus_edges(eight: Enumeration) -> None:
    """Wizard of Odds appendix 5 with the usual pay table 30/10/6/4/2/1: Player 2.6517%, Banker 9.3731%."""
    margins = {9: 30, 8: 10, 7: 6, 6: 4, 5: 2, 4: 1}
    variant = Variant.model_validate(
        {
            "name": "dragon-bonus",
            "bets": [
                {"name": side, "kind": "dragon_bonus", "side": side, "margin_payouts": margins}
                | {"natural_win_payout": 1}
                for side in ("player", "banker")
            ],
        }
    )
    got = odds_by_name(variant, eight)
    assert edge_percent(got["player"]) == 2.6517
    assert edge_percent(got["banker"]) == 9.3731


def test_closed_form_pair_edge(eight: Enumeration) -> None:
    """Player Pair at 11:1 from 8 decks: P = 31/415, return 12 * 31/415 - 1 = -43/415."""
    pair = odds_by_name(load_variant_by_name("standard"), eight)["Player Pair"]
    assert pair.p_win == Fraction(31, 415)
    assert pair.expected_return == Fraction(-43, 415)


def test_dragon_tiger_tie_refund(eight: Enumeration) -> None:
    """Dragon loses half the stake on a first-card tie: E = P(dragon) - P(tiger) - P(tie)/2 = -P(tie)/2."""
    seed = odds_by_name(load_variant_by_name("seed-000"), eight)
    tie_probability = Fraction(31, 415)
    assert seed["Dragon"].expected_return == -tie_probability / 2
    assert seed["Dragon Tiger Tie"].p_win == tie_probability


@pytest.mark.slow
def test_every_shipped_bet_has_consistent_odds(eight: Enumeration) -> None:
    for name in shipped_variant_names():
        variant = load_variant_by_name(name)
        odds = variant_odds(variant, eight)
        assert [o.name for o in odds] == [b.name for b in variant.bets]
        for o in odds:
            assert o.p_win + o.p_push + o.p_lose == 1, (name, o.name)
            assert min(o.p_win, o.p_push, o.p_lose) >= 0
            assert -1 < o.house_edge < 1 or o.kind == "cow_cow"
            d = o.to_dict()
            assert Fraction(d["rtp"]["fraction"]) == o.rtp  # type: ignore[index]


SMALL_SHOE = "9c 9c 9h 9h Ks 6d 4c 3h"


@cache
def small_shoe_rounds() -> Counter[RoundFacts]:
    """Every permutation of the small shoe, played through ``play_round`` (no enumeration code)."""
    return brute_force_joint(Counter(Card.parse(code) for code in SMALL_SHOE.split()))


def brute_force_odds(variant: Variant) -> dict[str, tuple[Fraction, Fraction]]:
    """(P(win), expected return) per bet over the played permutations, averaging a fair die."""
    faces = range(1, 13) if variant.needs_super_round_die else [1]
    wins: Counter[str] = Counter()
    returns: dict[str, Fraction] = dict.fromkeys((b.name for b in variant.bets), Fraction(0))
    rounds = 0
    for facts, n in small_shoe_rounds().items():
        for die in faces:
            rounds += n
            for name, resolution in resolve_bets(variant, facts, die).items():
                wins[name] += n * (resolution.outcome == "win")
                returns[name] += n * resolution.multiplier
    return {name: (Fraction(wins[name], rounds), returns[name] / rounds) for name in returns}


@pytest.mark.parametrize("variant_name", ["seed-000", "super-98", "cow-cow", "ez", "tiger"])
def test_small_shoe_odds_equal_brute_force(variant_name: str) -> None:
    variant = load_variant_by_name(variant_name)
    shoe: dict[Card, int] = Counter(Card.parse(code) for code in SMALL_SHOE.split())
    exact = odds_by_name(variant, enumerate_composition(shoe))
    brute = brute_force_odds(variant)
    assert {name: (o.p_win, o.expected_return) for name, o in exact.items()} == brute
