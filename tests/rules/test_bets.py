"""Bet resolution for every kind, on dealt rounds, with the shipped variant files."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.rules.bets import BET_KINDS, resolve_bets
from daemon.rules.outcome import play_round
from daemon.rules.resolution import Resolution
from daemon.rules.variants import Variant, load_variant_by_name, shipped_variant_names
from tests.rules.support import deal

# Named rounds, dealt P1 B1 P2 B2 [P3] [B3]; the comment says what each one is.
PLAYER_NATURAL_9 = "5c 2s 4d 5h"  # P 9 (natural) v B 7; tiger first card
BANKER_7_V_6 = "3c 3s 3d 4h"  # P 6 v B 7, both stand; first cards tie
TIE_6_BOTH_PAIRS = "3c 3s 3d 3h"  # 6-6 tie, two pairs of threes, not the same cards
BANKER_TWO_CARD_6 = "Kc 3s 2d 3h Kd"  # P 2 draws 0; B 6 stands
BANKER_THREE_CARD_6 = "Kc Ks Ad 3h 3c 3d"  # P 4 v B 6 with three cards
BANKER_THREE_CARD_7 = "Kc Ks Ad 3h 3c 4d"  # P 4 v B 7 with three cards
PLAYER_THREE_CARD_8 = "Kc Ks 5d 7h 3c"  # P 8 with three cards v B 7
PLAYER_BY_9 = "Kc Ks 4d Qh 5c Jd"  # P 9 (three cards) v B 0: margin 9, no natural
NATURAL_TIE_9 = "9c 9s Kd Kh"  # 9-9 natural tie
P8_V_B9_NATURALS = "4c 5s 4d 4h"  # P natural 8 v B natural 9
DRAGON_NATURALS = "Qc Ks 8d 9h"  # Banker's first card K beats Q
PLAYER_PERFECT_PAIR = "8s 2c 8s 5h"  # P 8s 8s = 6 v B 7
IDENTICAL_PAIRS = "9c 9c 9h 9h"  # P 9c 9h, B 9c 9h: 8-8 natural tie


def settle(variant_name: str, codes: str, die: int | None = None) -> dict[str, Fraction | int]:
    """Net return per unit of every bet (typed loosely so tests can compare with plain ints)."""
    variant = load_variant_by_name(variant_name)
    return {name: r.multiplier for name, r in resolve_bets(variant, deal(codes), die).items()}


F = Fraction


def test_standard_main_bets() -> None:
    assert settle("standard", PLAYER_NATURAL_9) == {
        "Player": 1,
        "Banker": -1,
        "Tie": -1,
        "Player Pair": -1,
        "Banker Pair": -1,
    }
    assert settle("standard", BANKER_7_V_6)["Banker"] == F(19, 20)
    tie = settle("standard", TIE_6_BOTH_PAIRS)
    assert (tie["Player"], tie["Banker"], tie["Tie"]) == (0, 0, 8)
    assert tie["Player Pair"] == tie["Banker Pair"] == 11


def test_no_commission_banker_six_pays_half() -> None:
    assert settle("no-commission", BANKER_TWO_CARD_6)["Banker"] == F(1, 2)
    assert settle("no-commission", BANKER_7_V_6)["Banker"] == 1
    assert settle("no-commission", BANKER_TWO_CARD_6)["Super 6"] == 12
    assert settle("no-commission", BANKER_THREE_CARD_6)["Super 6"] == 20
    assert settle("no-commission", BANKER_7_V_6)["Super 6"] == -1


def test_ez_banker_pushes_on_three_card_seven() -> None:
    seven = settle("ez", BANKER_THREE_CARD_7)
    assert (seven["Banker"], seven["Dragon 7"], seven["Panda 8"], seven["Player"]) == (0, 40, -1, -1)
    assert settle("ez", BANKER_7_V_6)["Banker"] == 1  # a two-card 7 is paid
    assert settle("ez", BANKER_7_V_6)["Dragon 7"] == -1
    panda = settle("ez", PLAYER_THREE_CARD_8)
    assert (panda["Panda 8"], panda["Player"], panda["Dragon 7"]) == (25, 1, -1)


def test_tiger_family() -> None:
    two = settle("tiger", BANKER_TWO_CARD_6)
    assert (two["Tiger"], two["Small Tiger"], two["Big Tiger"], two["Banker"]) == (12, 22, -1, F(1, 2))
    three = settle("tiger", BANKER_THREE_CARD_6)
    assert (three["Tiger"], three["Small Tiger"], three["Big Tiger"]) == (18, -1, 50)
    tie = settle("tiger", TIE_6_BOTH_PAIRS)
    assert (tie["Tiger Tie"], tie["Tiger Pair"], tie["Tiger"]) == (35, 20, -1)
    assert settle("tiger", IDENTICAL_PAIRS)["Tiger Pair"] == 100
    assert settle("tiger", PLAYER_PERFECT_PAIR)["Tiger Pair"] == 4
    assert settle("tiger", PLAYER_NATURAL_9)["Tiger Pair"] == -1
    assert settle("tiger", NATURAL_TIE_9)["Tiger Tie"] == -1


def test_cow_cow_multiplies_by_the_winning_total() -> None:
    nine = settle("cow-cow", PLAYER_BY_9)
    assert (nine["Cow Cow Player"], nine["Cow Cow Banker"]) == (F(171, 20), -9)
    seven = settle("cow-cow", BANKER_7_V_6)
    assert (seven["Cow Cow Player"], seven["Cow Cow Banker"]) == (-7, 7)
    tie = settle("cow-cow", TIE_6_BOTH_PAIRS)
    assert (tie["Cow Cow Player"], tie["Cow Cow Banker"], tie["Tie"]) == (0, 0, 8)


def test_seed_000_dragon_bonus() -> None:
    by_nine = settle("seed-000", PLAYER_BY_9)
    assert (by_nine["Player Dragon Bonus"], by_nine["Banker Dragon Bonus"]) == (30, -1)
    natural = settle("seed-000", PLAYER_NATURAL_9)  # natural win (margin 2 would not pay)
    assert (natural["Player Dragon Bonus"], natural["Banker Dragon Bonus"]) == (1, -1)
    natural_tie = settle("seed-000", NATURAL_TIE_9)
    assert natural_tie["Player Dragon Bonus"] == natural_tie["Banker Dragon Bonus"] == 0
    plain_tie = settle("seed-000", TIE_6_BOTH_PAIRS)
    assert plain_tie["Player Dragon Bonus"] == plain_tie["Banker Dragon Bonus"] == -1
    assert settle("seed-000", BANKER_7_V_6)["Banker Dragon Bonus"] == -1  # margin 1
    assert settle("seed-000", BANKER_THREE_CARD_6)["Banker Dragon Bonus"] == -1  # margin 2
    assert settle("seed-000", PLAYER_THREE_CARD_8)["Player Dragon Bonus"] == -1  # margin 1


def test_seed_000_naturals_and_first_card() -> None:
    naturals = settle("seed-000", P8_V_B9_NATURALS)
    assert (naturals["Banker Natural"], naturals["Player Natural"], naturals["Either Natural"]) == (
        4,
        -1,
        F(8, 5),
    )
    tie = settle("seed-000", NATURAL_TIE_9)
    assert (tie["Banker Natural"], tie["Player Natural"], tie["Either Natural"]) == (-1, -1, -1)
    assert (tie["Dragon"], tie["Tiger"], tie["Dragon Tiger Tie"]) == (F(-1, 2), F(-1, 2), 8)
    dragon = settle("seed-000", DRAGON_NATURALS)
    assert (dragon["Dragon"], dragon["Tiger"], dragon["Dragon Tiger Tie"]) == (1, -1, -1)
    tiger = settle("seed-000", PLAYER_NATURAL_9)
    assert (tiger["Dragon"], tiger["Tiger"]) == (-1, 1)


def test_seed_000_pairs_ties_and_counts() -> None:
    perfect = settle("seed-000", PLAYER_PERFECT_PAIR)
    assert (perfect["Perfect Pair"], perfect["Any Pair"], perfect["Player Pair"]) == (25, 5, 11)
    assert perfect["Banker Pair"] == -1
    both = settle("seed-000", TIE_6_BOTH_PAIRS)
    assert (both["Perfect Pair"], both["Any Pair"], both["Super Tie 6"], both["Tiger Tie"]) == (-1, 5, 40, 40)
    assert both["Super Tie 7"] == -1
    assert (both["Small"], both["Big"]) == (F(3, 2), -1)
    identical = settle("seed-000", IDENTICAL_PAIRS)
    assert (identical["Tiger Pair"], identical["Super Tie 8"], identical["Perfect Pair"]) == (100, 70, -1)
    five = settle("seed-000", BANKER_TWO_CARD_6)
    assert (five["Big"], five["Small"], five["Lucky 6"], five["Small Tiger"]) == (F(1, 2), -1, 12, 22)
    three = settle("seed-000", BANKER_THREE_CARD_7)
    assert (three["Long 7"], three["Panda 8"], three["Banker"]) == (40, -1, F(19, 20))
    assert settle("seed-000", PLAYER_THREE_CARD_8)["Panda 8"] == 25


def test_super_98_super_round_payouts() -> None:
    normal = settle("super-98", PLAYER_NATURAL_9, die=1)
    boosted = settle("super-98", PLAYER_NATURAL_9, die=8)
    assert (normal["Player"], boosted["Player"]) == (1, F(21, 20))
    assert (normal["Player 9"], boosted["Player 9"]) == (8, 9)
    # A super round whose result meets no super condition pays the normal table (seed 002).
    assert settle("super-98", BANKER_TWO_CARD_6, die=9)["Banker"] == F(1, 2)
    assert settle("super-98", BANKER_7_V_6, die=9)["Banker"] == 1
    tie = settle("super-98", NATURAL_TIE_9, die=9)
    assert (tie["Tie"], tie["Player 9"], tie["Banker 9"]) == (9, -1, -1)
    assert settle("super-98", TIE_6_BOTH_PAIRS, die=9)["Tie"] == 8  # a tie on 6 is not boosted
    pairs = settle("super-98", TIE_6_BOTH_PAIRS, die=8)
    assert pairs["Player Pair"] == pairs["Banker Pair"] == 12
    assert settle("super-98", TIE_6_BOTH_PAIRS, die=12)["Player Pair"] == 11
    naturals = settle("super-98", P8_V_B9_NATURALS, die=8)
    assert (naturals["Player 8"], naturals["Banker 9"], naturals["Banker 8"]) == (-1, 9, -1)


@pytest.mark.parametrize("die", [None, 0, 13, True])
def test_super_98_needs_a_valid_die(die: object) -> None:
    variant = load_variant_by_name("super-98")
    assert variant.needs_super_round_die
    with pytest.raises(ValueError, match="die"):
        resolve_bets(variant, deal(PLAYER_NATURAL_9), die)  # type: ignore[arg-type]


def test_variants_without_super_round_ignore_the_die() -> None:
    variant = load_variant_by_name("standard")
    assert not variant.needs_super_round_die
    assert resolve_bets(variant, deal(BANKER_7_V_6), 8) == resolve_bets(variant, deal(BANKER_7_V_6))


def test_natural_without_must_win_pays_on_the_natural_alone() -> None:
    variant = Variant.model_validate(
        {
            "name": "seed-003-naturals",
            "bets": [
                {
                    "name": "Player Natural",
                    "kind": "natural",
                    "side": "player",
                    "payout": 4,
                    "must_win": False,
                },
                {"name": "P Win Natural", "kind": "natural", "side": "player", "payout": 4, "must_win": True},
            ],
        }
    )
    settled = resolve_bets(variant, deal(P8_V_B9_NATURALS))
    assert settled["Player Natural"] == Resolution("win", F(4))
    assert settled["P Win Natural"] == Resolution("lose", F(-1))


def test_perfect_pair_per_side_and_both() -> None:
    variant = Variant.model_validate(
        {
            "name": "perfect",
            "bets": [
                {"name": "PP either", "kind": "perfect_pair", "payout": 25, "both_payout": 200},
                {"name": "PP banker", "kind": "perfect_pair", "side": "banker", "payout": 25},
                {"name": "PP player", "kind": "perfect_pair", "side": "player", "payout": 25},
            ],
        }
    )
    both = resolve_bets(variant, deal("9c 9h 9c 9h"))
    assert {k: r.multiplier for k, r in both.items()} == {"PP either": 200, "PP banker": 25, "PP player": 25}
    one = resolve_bets(variant, deal(PLAYER_PERFECT_PAIR))
    assert {k: r.multiplier for k, r in one.items()} == {"PP either": 25, "PP banker": -1, "PP player": 25}


def test_resolution_to_dict() -> None:
    assert Resolution("win", F(19, 20)).to_dict() == {
        "outcome": "win",
        "multiplier": "19/20",
        "multiplier_float": 0.95,
    }
    assert Resolution("lose", F(-9)).to_dict()["multiplier"] == "-9"


def test_catalogue_covers_every_shipped_kind() -> None:
    used = {bet.kind for name in shipped_variant_names() for bet in load_variant_by_name(name).bets}
    assert used == set(BET_KINDS)


SHIPPED = {name: load_variant_by_name(name) for name in shipped_variant_names()}


@settings(max_examples=150)
@example([Card.parse(c) for c in BANKER_THREE_CARD_7.split()], "ez", 1)  # EZ Banker push
@example([Card.parse(c) for c in PLAYER_BY_9.split()], "super-98", 8)
@given(
    st.lists(st.sampled_from(ALL_CARDS), min_size=6, max_size=6),
    st.sampled_from(sorted(SHIPPED)),
    st.integers(1, 12),
)
def test_every_resolution_is_consistent(cards: list[Card], variant_name: str, die: int) -> None:
    variant = SHIPPED[variant_name]
    outcome, _ = play_round(cards)
    settled = resolve_bets(variant, outcome, die)
    assert list(settled) == [bet.name for bet in variant.bets]
    for name, resolution in settled.items():
        sign = {"win": 1, "push": 0, "lose": -1}[resolution.outcome]
        assert (resolution.multiplier > 0) - (resolution.multiplier < 0) == sign, name
        as_json = json.loads(json.dumps(resolution.to_dict()))
        assert Fraction(as_json["multiplier"]) == resolution.multiplier
        bet = variant.bet(name)
        if bet.kind in ("player", "banker", "cow_cow"):
            pushes = outcome.player_total == outcome.banker_total
            if getattr(bet, "push_on_three_card_seven", False):
                pushes |= outcome.banker_total == 7 > outcome.player_total and len(outcome.banker) == 3
            assert (resolution.outcome == "push") == pushes


def test_full_tie_refund_is_a_push() -> None:
    variant = Variant.model_validate(
        {
            "name": "dt",
            "bets": [{"name": "D", "kind": "first_card", "pick": "dragon", "payout": 1, "tie_refund": 1}],
        }
    )
    assert resolve_bets(variant, deal(NATURAL_TIE_9))["D"] == Resolution("push", F(0))
