"""Exact enumeration: invariants, independent counters, closed forms and published figures."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from math import perm

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.rules.enumerate import Enumeration, enumerate_composition, enumerate_shoe, standard_shoe
from tests.rules.independent import brute_force_joint, point_counts
from tests.rules.support import REQUIRED_KEYS


@pytest.fixture(scope="module")
def eight() -> Enumeration:
    return enumerate_shoe(8)


@pytest.fixture(scope="module")
def one() -> Enumeration:
    return enumerate_shoe(1)


def check_invariants(e: Enumeration) -> None:
    c = e.counts
    assert set(REQUIRED_KEYS) <= set(c)
    assert all(isinstance(n, int) and n >= 0 for n in c.values())
    assert sum(e.joint.values()) == e.total
    assert c["banker_win"] + c["player_win"] + c["tie"] == e.total
    assert sum(c[f"banker_win_total_{t}"] for t in range(1, 10)) == c["banker_win"]
    assert sum(c[f"player_win_total_{t}"] for t in range(1, 10)) == c["player_win"]
    assert sum(c[f"tie_total_{t}"] for t in range(10)) == c["tie"]
    for side in ("banker", "player"):
        by_margin = sum(c[f"{side}_win_by_{m}"] for m in range(1, 10))
        assert by_margin + c[f"{side}_natural_win"] == c[f"{side}_win"]
    assert c["cards_4"] + c["cards_5"] + c["cards_6"] == e.total
    assert c["either_pair"] == c["player_pair"] + c["banker_pair"] - c["both_pairs"]
    assert c["perfect_pair_either"] <= c["either_pair"]
    assert c["banker_win_six_two_cards"] + c["banker_win_six_three_cards"] == c["banker_win_total_6"]
    assert c["natural_tie"] <= c["tie_total_8"] + c["tie_total_9"]
    # Named counts agree with the generic predicate path over the joint distribution.
    assert e.count_where(lambda f: f.winner.value == "banker") == c["banker_win"]
    assert e.count_where(lambda f: f.player_pair or f.banker_pair) == c["either_pair"]
    assert e.count_where(lambda f: f.card_count == 5) == c["cards_5"]


def test_eight_deck_invariants(eight: Enumeration) -> None:
    assert eight.total == 416 * 415 * 414 * 413 * 412 * 411 == 4_998_398_275_503_360
    assert eight.decks == 8
    check_invariants(eight)


def test_one_deck_invariants(one: Enumeration) -> None:
    assert one.total == perm(52, 6)
    check_invariants(one)


def test_published_eight_deck_main_figures(eight: Enumeration) -> None:
    """Wizard of Odds / Thorp: http://www.casinoexploit.com/baccarat.html and
    https://www.multiplayerbaccarat.com/odds.html (banker 0.458597, player 0.446247, tie 0.095156)."""
    c = eight.counts
    assert c["banker_win"] == 2_292_252_566_437_888
    assert c["player_win"] == 2_230_518_282_592_256
    assert c["tie"] == 475_627_426_473_216
    assert round(c["banker_win"] / eight.total, 6) == 0.458597
    assert round(c["player_win"] / eight.total, 6) == 0.446247
    assert round(c["tie"] / eight.total, 6) == 0.095156


def test_published_dragon_bonus_margins(eight: Enumeration) -> None:
    """Wizard of Odds, baccarat appendix 5 (http://wizardofodds.com/games/baccarat/appendix/5/)."""
    c = eight.counts
    player = [18_409_431_764_992, 34_097_645_543_424, 89_590_261_473_280, 141_238_897_317_888]
    player += [166_169_165_987_840, 186_780_352_174_080]
    banker = [15_390_342_909_952, 28_305_092_784_128, 79_517_099_278_336, 119_200_072_366_080]
    banker += [157_275_882_332_160, 201_147_167_287_296]
    assert [c[f"player_win_by_{m}"] for m in range(9, 3, -1)] == player
    assert [c[f"banker_win_by_{m}"] for m in range(9, 3, -1)] == banker
    assert c["player_natural_win"] == c["banker_natural_win"] == 812_685_054_124_032
    assert c["natural_tie"] == 89_325_908_267_520


def test_published_ez_side_bet_counts(eight: Enumeration) -> None:
    """Wizard of Odds, EZ Baccarat: Dragon 7 and Panda 8 winning combinations."""
    assert eight.counts["banker_win_three_card_seven"] == 112_633_011_329_024
    assert eight.counts["player_win_three_card_eight"] == 172_660_763_262_976


@pytest.mark.parametrize("decks", [1, 8])
def test_rank_and_suit_counts_match_closed_forms(decks: int, one: Enumeration, eight: Enumeration) -> None:
    """Pairs, perfect pairs, identical pairs and first-card odds only see the first four cards."""
    e = one if decks == 1 else eight
    c, n = e.counts, 52 * decks
    same_rank, same_card = 4 * decks - 1, decks - 1
    pair = Fraction(same_rank, n - 1)
    assert Fraction(c["player_pair"], e.total) == pair
    assert Fraction(c["banker_pair"], e.total) == pair
    # P1 P2 pair, then B1 B2 pair: same rank as the Player's pair or another rank.
    both = pair * (
        Fraction(4 * decks - 2, n - 2) * Fraction(4 * decks - 3, n - 3)
        + Fraction(n - 4 * decks, n - 2) * Fraction(same_rank, n - 3)
    )
    assert Fraction(c["both_pairs"], e.total) == both
    perfect = Fraction(same_card, n - 1)
    assert Fraction(c["perfect_pair_player"], e.total) == perfect
    # Identical: {P1, P2} == {B1, B2}. Either all four the same card, or the Player holds two
    # suits of a rank and the Banker the same two cards again.
    identical = Fraction(same_card, n - 1) * Fraction(decks - 2, n - 2) * Fraction(decks - 3, n - 3)
    if decks < 3:
        identical = Fraction(0)
    identical += Fraction(3 * decks, n - 1) * Fraction(2 * (decks - 1), n - 2) * Fraction(decks - 1, n - 3)
    assert Fraction(c["identical_pairs"], e.total) == identical
    first_tie = Fraction(4 * decks - 1, n - 1)
    assert Fraction(c["first_card_tie"], e.total) == first_tie
    assert c["first_card_dragon"] == c["first_card_tiger"]


def test_one_deck_main_game_against_an_independent_counter(one: Enumeration) -> None:
    expected = point_counts([16, 4, 4, 4, 4, 4, 4, 4, 4, 4])
    got: Counter[tuple[int, int, int, int]] = Counter()
    for facts, n in one.items():
        got[(facts.player_total, facts.banker_total, facts.player_cards, facts.banker_cards)] += n
    assert got == expected


def shoe_of(codes: str) -> dict[Card, int]:
    shoe: dict[Card, int] = {}
    for code in codes.split():
        card = Card.parse(code)
        shoe[card] = shoe.get(card, 0) + 1
    return shoe


@pytest.mark.parametrize(
    "codes",
    [
        "9c 9c 9h 9h Ks 5d 4c 3h",  # identical pairs, naturals, same-card copies
        "Kc Qc Jd Td 3s 3s 6h",  # four ranks worth 0 (pairs by rank, not points)
        "Ac 2c 3c 4c 5c 6c 7c",  # no pairs, all draws
    ],
)
def test_small_shoes_against_brute_force(codes: str) -> None:
    shoe = shoe_of(codes)
    result = enumerate_composition(shoe)
    assert result.total == perm(len(codes.split()), 6)
    assert result.joint == dict(brute_force_joint(shoe))


pool = st.sampled_from(["9c", "9h", "Kc", "Qc", "Ks", "4d", "5d", "3s", "6h", "2c", "Ac", "7h"])


@pytest.mark.slow
@settings(max_examples=8)
@given(st.lists(pool, min_size=6, max_size=7))
def test_random_small_shoes_against_brute_force(codes: list[str]) -> None:
    shoe = shoe_of(" ".join(codes))
    assert enumerate_composition(shoe).joint == dict(brute_force_joint(shoe))


def test_bad_shoes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 6"):
        enumerate_composition(shoe_of("9c 9h Ks 5d 4c"))
    with pytest.raises(ValueError, match="copies"):
        enumerate_composition({ALL_CARDS[0]: -1})
    with pytest.raises(ValueError, match="cards"):
        enumerate_composition({"9c": 8})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="decks"):
        standard_shoe(0)
    with pytest.raises(ValueError, match="too large"):
        enumerate_composition(standard_shoe(30))


def test_to_dict_shape(one: Enumeration) -> None:
    report = one.to_dict()
    assert report["decks"] == 1
    assert report["total"] == perm(52, 6)
    assert report["counts"] == one.counts


@pytest.mark.parametrize(
    ("decks", "banker", "player", "tie"),
    [
        (6, 403_095_751_234_560, 392_220_492_728_832, 83_552_962_932_288),
        (4, 34_543_624_867_840, 33_608_344_225_792, None),
    ],
)
def test_published_six_and_four_deck_main_figures(
    decks: int, banker: int, player: int, tie: int | None
) -> None:
    """http://www.casinoexploit.com/baccarat.html, "Probabilities in 6deck / 4deck Baccarat"."""
    c = enumerate_shoe(decks).counts
    assert (c["banker_win"], c["player_win"]) == (banker, player)
    if tie is not None:
        assert c["tie"] == tie
