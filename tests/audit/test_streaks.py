"""The run statistics, each checked against a brute-force oracle written from its definition on cards."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from daemon.audit.factory_order import FACTORY_ORDER, NEXT_IN_FACTORY_ORDER
from daemon.audit.streaks import (
    Run,
    decode,
    encode,
    longest_equal_run,
    longest_factory_run,
    longest_repeated_run,
    longest_same_rank,
    longest_same_suit,
    ranks_of,
    reaches_equal_run,
    reaches_factory_run,
)

cards = st.lists(st.sampled_from(ALL_CARDS), max_size=40)
small_cards = st.lists(st.sampled_from(ALL_CARDS[:3]), max_size=30)
near_factory = st.lists(st.sampled_from(FACTORY_ORDER[10:16]), max_size=30)


def brute_longest(items: list[Card], linked: object) -> int:
    """Longest i..j in which every neighbouring pair is linked (checked pair by pair)."""
    assert callable(linked)
    best = 0
    for i in range(len(items)):
        for j in range(i, len(items)):
            if all(linked(items[n], items[n + 1]) for n in range(i, j)):
                best = max(best, j - i + 1)
    return best


def c(text: str) -> Card:
    return Card.parse(text)


def test_factory_order_is_the_documented_new_deck_order() -> None:
    codes = [card.code for card in FACTORY_ORDER]
    assert len(set(codes)) == 52
    assert codes[:3] == ["As", "2s", "3s"]
    assert (codes[12], codes[13], codes[25]) == ("Ks", "Ad", "Kd")
    assert (codes[26], codes[38], codes[39], codes[51]) == ("Kc", "Ac", "Kh", "Ah")


@given(cards)
def test_encode_decode_round_trip(dealt: list[Card]) -> None:
    assert decode(encode(dealt)) == tuple(dealt)


def test_decode_names_a_byte_that_is_no_card() -> None:
    with pytest.raises(ValueError, match="byte 52"):
        decode(b"\x00\x34")


def test_longest_same_rank_and_suit_name_where_the_run_starts() -> None:
    dealt = encode([c(x) for x in ("2c", "7h", "7s", "7d", "Kd", "3d", "9d", "9c")])
    assert longest_same_rank(dealt) == Run(3, 1)
    assert longest_same_suit(dealt) == Run(4, 3)
    assert longest_same_rank(b"") == Run(0, 0)


@given(cards)
def test_same_rank_and_suit_match_brute_force(dealt: list[Card]) -> None:
    rank = longest_same_rank(encode(dealt))
    suit = longest_same_suit(encode(dealt))
    assert rank.length == brute_longest(dealt, lambda a, b: a.rank == b.rank)
    assert suit.length == brute_longest(dealt, lambda a, b: a.suit == b.suit)
    assert len({x.rank for x in dealt[rank.start : rank.stop]}) <= 1
    assert len({x.suit for x in dealt[suit.start : suit.stop]}) <= 1


@given(near_factory)
def test_factory_run_matches_brute_force(dealt: list[Card]) -> None:
    forward = brute_longest(dealt, lambda a, b: NEXT_IN_FACTORY_ORDER.get(a) == b)
    backward = brute_longest(dealt, lambda a, b: NEXT_IN_FACTORY_ORDER.get(b) == a)
    assert longest_factory_run(encode(dealt)).length == max(forward, backward)


def test_factory_run_forward_and_backward() -> None:
    forward = [c("9h"), *FACTORY_ORDER[10:17], c("2c")]
    assert longest_factory_run(encode(forward)) == Run(7, 1)
    backward = [c("9h"), c("9h"), *reversed(FACTORY_ORDER[30:35])]
    assert longest_factory_run(encode(backward)) == Run(5, 2)
    # the suit boundaries of the order link too: Kd is followed by Kc
    assert longest_factory_run(encode([c("Qd"), c("Kd"), c("Kc")])).length == 3
    # the last card of the order is followed by nothing
    assert longest_factory_run(encode([c("Ah"), c("As")])).length == 1


def brute_repeat(now: list[Card], history: list[list[Card]], k: int) -> int:
    best = 0
    for earlier in history:
        for i in range(len(now)):
            for j in range(len(earlier)):
                n = 0
                while i + n < len(now) and j + n < len(earlier) and now[i + n] == earlier[j + n]:
                    n += 1
                best = max(best, n)
    return best if best >= k else 0


@given(small_cards, st.lists(small_cards, max_size=3), st.integers(min_value=1, max_value=4))
def test_longest_repeated_run_matches_brute_force(now: list[Card], history: list[list[Card]], k: int) -> None:
    found = longest_repeated_run(encode(now), [encode(h) for h in history], k=k)
    expected = brute_repeat(now, history, k)
    if expected == 0:
        assert found is None
        return
    assert found is not None
    assert found.length == expected
    earlier = history[found.earlier_shoe]
    stretch = now[found.start : found.start + found.length]
    assert stretch == earlier[found.earlier_start : found.earlier_start + found.length]


def test_repeated_run_locates_a_copied_slug() -> None:
    earlier = list(ALL_CARDS)
    now = [c("Ah")] * 5 + earlier[20:32] + [c("Ah")] * 3
    found = longest_repeated_run(encode(now), [encode(FACTORY_ORDER), encode(earlier)], k=4)
    assert found is not None
    assert (found.length, found.start, found.earlier_shoe, found.earlier_start) == (12, 5, 1, 20)


@given(near_factory, st.integers(min_value=0, max_value=8))
def test_factory_threshold_check_agrees_with_the_longest_run(dealt: list[Card], length: int) -> None:
    codes = encode(dealt)
    assert reaches_factory_run(codes, length) == (longest_factory_run(codes).length >= length)


@given(cards, st.integers(min_value=0, max_value=6))
def test_equal_run_check_agrees_with_the_longest_run(dealt: list[Card], length: int) -> None:
    ranks = ranks_of(encode(dealt))
    assert reaches_equal_run(ranks, length) == (longest_equal_run(ranks).length >= length)
