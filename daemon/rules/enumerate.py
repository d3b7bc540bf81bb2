"""Exact enumeration of every round a shoe can deal, by composition counting.

The universe is every ordered sequence of six distinct physical cards from a full
shoe (8 decks: 416*415*414*413*412*411 sequences). A round uses the first four to
six of them (P1 B1 P2 B2 [P3] [B3]); the fifth and sixth count even when unused, so
every sequence weighs the same and a count divided by the total is a probability.

How it is counted without visiting 5e15 sequences:

* The main game only sees point values (0-9). For every point-value prefix
  ``(v1, v2, v3, v4)`` of the first four cards, the tail table ``A[prefix, o]``
  counts the ways to draw cards 5 and 6 (by point value, from what the prefix left)
  that end the round in outcome class ``o`` = (totals, cards per side). That is a
  10**6-cell numpy computation with exact small integers.
* Pairs, suited pairs, identical pairs and the first-card (Dragon/Tiger) comparison
  only see the ranks and suits of the first four cards. ``W[prefix, f]`` counts the
  ordered four-card sequences of physical cards with those point values and
  rank/suit features ``f``; it loops over the 13**4 rank tuples and enumerates suits
  only once per pattern of equal ranks (cached).
* The tail depends on the first four cards only through their point values, so the
  exact joint count of (features, outcome) is the matrix product ``W.T @ A``, done
  one first-card value at a time (1000 prefixes per step) to keep memory small.
  While the shoe's total is below 2**53 (8 decks: 5.0e15) every product and partial
  sum is a non-negative integer float64 holds exactly, so BLAS computes it; bigger
  shoes take numpy's int64 path (up to 27 decks, beyond which 64 bits would not do).

The result is the exact joint distribution over :class:`RoundFacts`, from which any
bet is priced exactly (``count_where``) and the report's named counts are summed;
the sum is checked against the falling factorial before anything is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import product
from math import perm
from typing import Any

import numpy as np
import numpy.typing as npt

from common.cards import ALL_CARDS, Card, Rank
from daemon.rules.outcome import RoundFacts
from daemon.rules.tableau import banker_draws, player_draws

Shoe = Mapping[Card, int]
"""A shoe's composition: copies of each physical card (missing = 0)."""

_ROUND_CARDS = 6
_MAX_TOTAL = 2**63 - 1

# Outcome class o = ((player_total * 10 + banker_total) * 2 + player_drew) * 2 + banker_drew.
_OUTCOMES = 400
# Feature class f = ((player_state * 3 + banker_state) * 2 + identical) * 3 + first_card + 1,
# where a side's state is 0 no pair, 1 pair of different suits, 2 the same card twice.
_FEATURES = 54
_BLAS_BLOCK = 32


def standard_shoe(decks: int) -> dict[Card, int]:
    """``decks`` full 52-card decks (no jokers, seed 003)."""
    if isinstance(decks, bool) or not isinstance(decks, int) or decks < 1:
        raise ValueError(f"decks must be a whole number >= 1, got {decks!r}")
    return dict.fromkeys(ALL_CARDS, decks)


@dataclass(frozen=True)
class Enumeration:
    """The exact joint distribution of round facts over every 6-card sequence of a shoe."""

    total: int
    joint: dict[RoundFacts, int]
    decks: int | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def count_where(self, predicate: Callable[[RoundFacts], bool]) -> int:
        """Exact number of sequences whose round satisfies ``predicate``."""
        return sum(n for facts, n in self.joint.items() if predicate(facts))

    def items(self) -> Iterator[tuple[RoundFacts, int]]:
        return iter(self.joint.items())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready report: ``decks``, ``total`` and the named ``counts``."""
        return {"decks": self.decks, "total": self.total, "counts": dict(self.counts)}


def enumerate_shoe(decks: int) -> Enumeration:
    """Exact enumeration of a full ``decks``-deck shoe."""
    result = enumerate_composition(standard_shoe(decks))
    return Enumeration(result.total, result.joint, decks, result.counts)


def enumerate_composition(shoe: Shoe) -> Enumeration:
    """Exact enumeration of any shoe composition (at least six cards)."""
    copies = _validated_copies(shoe)
    size = sum(copies.values())
    if size < _ROUND_CARDS:
        raise ValueError(f"a shoe needs at least {_ROUND_CARDS} cards, this one has {size}")
    total = perm(size, _ROUND_CARDS)
    if size**_ROUND_CARDS > _MAX_TOTAL:
        raise ValueError(f"a shoe of {size} cards is too large to count in 64-bit integers")
    points = np.zeros(10, dtype=np.int64)
    for card, n in copies.items():
        points[card.points] += n
    prefix = _prefix_table(copies)
    draw_tables = _draw_tables()
    # Below 2**53 every product and partial sum (each at most ``total``, all non-negative)
    # is an integer float64 holds exactly, whatever order BLAS adds in; that is ~50x
    # faster than numpy's integer matmul. Bigger shoes (9+ decks) take the integer path.
    # Only the feature columns some prefix has (about a third of them) enter the products.
    features = np.flatnonzero(prefix.any(axis=0))
    outcomes, dense = _reachable_outcomes(draw_tables)
    chunks = [
        # One first-card point value at a time keeps the tail table small (1000 prefixes).
        (prefix[first * 1000 : (first + 1) * 1000, features], first)
        for first in range(10)
        if points[first] > 0
    ]
    exact = np.zeros((_FEATURES, _OUTCOMES), dtype=np.int64)
    if total < 2**53:
        in_float = np.zeros((features.size, outcomes.size), dtype=np.float64)
        for rows, first in chunks:
            tail = _tail_rows(points, draw_tables, dense, first)
            left = rows.T.astype(np.float64)
            # Blocks this small stay under OpenBLAS's multithreading threshold: on a busy
            # 2-core box its thread pool made one 1000-row product 100x slower, not faster.
            for start in range(0, 1000, _BLAS_BLOCK):
                block = slice(start, start + _BLAS_BLOCK)
                in_float += left[:, block] @ tail[block]
        exact[np.ix_(features, outcomes)] = np.rint(in_float).astype(np.int64)
    else:
        in_int = np.zeros((features.size, outcomes.size), dtype=np.int64)
        for rows, first in chunks:
            in_int += rows.T @ _tail_rows(points, draw_tables, dense, first).astype(np.int64)
        exact[np.ix_(features, outcomes)] = in_int
    if int(exact.sum()) != total:
        raise RuntimeError("enumeration does not add up to the number of sequences")
    return Enumeration(total, _joint_from_matrix(exact), None, _named_counts(exact))


def _validated_copies(shoe: Shoe) -> dict[Card, int]:
    copies: dict[Card, int] = {}
    for card, n in shoe.items():
        if not isinstance(card, Card):
            raise ValueError(f"shoe keys must be cards, got {card!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"copies of {card} must be a whole number >= 0, got {n!r}")
        if n:
            copies[card] = n
    return copies


def _draw_tables() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Lookup tables from the tableau functions themselves (one rule, one place)."""
    player = np.array([[player_draws(p, b) for b in range(10)] for p in range(10)])
    # Column 10 stands for "the Player stood".
    banker = np.array(
        [
            [banker_draws(p, b, None if t == 10 else t) for t in range(11)]
            for p in range(10)
            for b in range(10)
        ]
    ).reshape(10, 10, 11)
    return player, banker


DrawTables = tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]


def _outcome_codes(
    draw_tables: DrawTables, p2: npt.NDArray[np.int32], b2: npt.NDArray[np.int32], v5: Any, *, v6: Any
) -> npt.NDArray[np.int32]:
    """Outcome class of rounds with two-card totals p2/b2 and cards 5 and 6 worth v5/v6."""
    player_draw_table, banker_draw_table = draw_tables
    shape = np.broadcast_shapes(p2.shape, b2.shape, np.shape(v5), np.shape(v6))
    p_draws = np.broadcast_to(player_draw_table[p2, b2], shape)
    third = np.where(p_draws, v5, 10)
    b_draws = banker_draw_table[np.broadcast_to(p2, shape), np.broadcast_to(b2, shape), third]
    banker_third = np.where(p_draws, v6, v5)
    player_total = (p2 + np.where(p_draws, v5, 0)) % 10
    banker_total = (b2 + np.where(b_draws, banker_third, 0)) % 10
    codes: npt.NDArray[np.int32] = ((player_total * 10 + banker_total) * 2 + p_draws) * 2 + b_draws
    return codes


def _reachable_outcomes(draw_tables: DrawTables) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The outcome classes the rules can produce, and a map from class to dense column."""
    v = np.arange(10, dtype=np.int32)
    p2, b2, v5, v6 = (v.reshape([10 if i == j else 1 for j in range(4)]) for i in range(4))
    reachable = np.unique(_outcome_codes(draw_tables, p2, b2, v5, v6=v6))
    dense = np.full(_OUTCOMES, -1, dtype=np.intp)
    dense[reachable] = np.arange(reachable.size)
    return reachable.astype(np.intp), dense


def _tail_rows(
    points: npt.NDArray[np.int64], draw_tables: DrawTables, dense: npt.NDArray[np.intp], first: int
) -> npt.NDArray[np.float64]:
    """Rows of ``A[prefix, o]`` for the prefixes whose first card is worth ``first`` points.

    ``A[prefix, o]`` counts the ways to draw cards 5 and 6 (by point value) after the
    point prefix (v1, v2, v3, v4) that end the round in outcome class ``o`` (as a dense
    column number). Returned as float64 holding exact integers (each cell is at most
    (size-4)*(size-5)).
    """
    v = np.arange(10, dtype=np.int32)
    v2, v3, v4, v5, v6 = (v.reshape([10 if i == j else 1 for j in range(5)]) for i in range(5))
    shape = (10,) * 5
    columns = int(dense.max()) + 1
    outcome = dense[_outcome_codes(draw_tables, (first + v3) % 10, (v2 + v4) % 10, v5, v6=v6)]
    # Copies left of card 5's and card 6's point value once the earlier cards are out.
    before5 = (v5 == first).astype(np.int64) + (v2 == v5) + (v3 == v5) + (v4 == v5)
    before6 = (v6 == first).astype(np.int64) + (v2 == v6) + (v3 == v6) + (v4 == v6) + (v5 == v6)
    ways = np.maximum(points[v5] - before5, 0) * np.maximum(points[v6] - before6, 0)
    prefix_index = (v2 * 10 + v3) * 10 + v4
    flat = np.bincount(
        np.broadcast_to(prefix_index * columns + outcome, shape).ravel(),
        weights=np.broadcast_to(ways, shape).ravel().astype(np.float64),
        minlength=1000 * columns,
    )
    return np.asarray(flat, dtype=np.float64).reshape(1000, columns)


def _prefix_table(copies: dict[Card, int]) -> npt.NDArray[np.int64]:
    """``W[prefix, f]``: ordered sequences of four physical cards by point prefix and features."""
    # (rank order, points, copies per suit, copies of the rank) for every rank in the shoe.
    ranks: list[tuple[int, int, tuple[int, ...], int]] = []
    for rank in Rank:
        suits = tuple(copies.get(card, 0) for card in ALL_CARDS if card.rank is rank)
        if any(suits):
            ranks.append((int(rank), rank.points, suits, sum(suits)))
    flat = [0] * (10**4 * _FEATURES)
    cache: dict[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], list[tuple[int, int]]] = {}
    for r1, pt1, s1, n1 in ranks:
        for r2, pt2, s2, n2 in ranks:
            first = (r2 > r1) - (r2 < r1) + 1
            for r3, pt3, s3, n3 in ranks:
                for r4, pt4, s4, n4 in ranks:
                    prefix = ((pt1 * 10 + pt2) * 10 + pt3) * 10 + pt4
                    if r1 != r2 and r1 != r3 and r1 != r4 and r2 != r3 and r2 != r4 and r3 != r4:
                        # Four different ranks: no pair, no suit question (most tuples).
                        flat[prefix * _FEATURES + first] += n1 * n2 * n3 * n4
                        continue
                    seq = (r1, r2, r3, r4)
                    distinct = list(dict.fromkeys(seq))
                    pattern = tuple(distinct.index(r) for r in seq)
                    by_rank = {r1: s1, r2: s2, r3: s3, r4: s4}
                    key = (pattern, tuple(by_rank[r] for r in distinct))
                    split = cache.get(key)
                    if split is None:
                        split = cache[key] = _feature_split(pattern, key[1])
                    for offset, ways in split:
                        flat[prefix * _FEATURES + offset + first] += ways
    return np.array(flat, dtype=np.int64).reshape(10**4, _FEATURES)


def _feature_split(
    pattern: tuple[int, ...], suit_copies: tuple[tuple[int, ...], ...]
) -> list[tuple[int, int]]:
    """(feature offset without the first-card part, ways) for one pattern of equal ranks."""
    p_pair, b_pair = pattern[0] == pattern[2], pattern[1] == pattern[3]
    result = []
    for (p_suited, b_suited, identical), ways in _suit_split(pattern, suit_copies).items():
        p_state = 2 if p_suited else int(p_pair)
        b_state = 2 if b_suited else int(b_pair)
        result.append((((p_state * 3 + b_state) * 2 + identical) * 3, ways))
    return result


def _suit_split(
    pattern: tuple[int, ...], suit_copies: tuple[tuple[int, ...], ...]
) -> dict[tuple[int, int, int], int]:
    """For four positions with these equal-rank groups, count suit choices by suited/identical flags."""
    split: dict[tuple[int, int, int], int] = {}
    for suits in product(range(4), repeat=4):
        cards = tuple(zip(pattern, suits, strict=True))
        ways = 1
        for i, card in enumerate(cards):
            ways *= suit_copies[card[0]][card[1]] - cards[:i].count(card)
            if ways <= 0:
                break
        if ways <= 0:
            continue
        p_suited = cards[0] == cards[2]
        b_suited = cards[1] == cards[3]
        both_pairs = pattern[0] == pattern[2] and pattern[1] == pattern[3]
        identical = both_pairs and sorted((cards[0], cards[2])) == sorted((cards[1], cards[3]))
        flags = (int(p_suited), int(b_suited), int(identical))
        split[flags] = split.get(flags, 0) + ways
    return split


def _decode_axes() -> dict[str, npt.NDArray[np.int64]]:
    """Per-cell field values of the (features, outcomes) matrix, as broadcastable arrays."""
    f = np.arange(_FEATURES, dtype=np.int64).reshape(-1, 1)
    o = np.arange(_OUTCOMES, dtype=np.int64).reshape(1, -1)
    return {
        "player_total": o // 40,
        "banker_total": (o // 4) % 10,
        "player_cards": 2 + (o // 2) % 2,
        "banker_cards": 2 + o % 2,
        "player_state": f // 18,
        "banker_state": (f // 6) % 3,
        "identical": (f // 3) % 2,
        "first_card": f % 3 - 1,
    }


def _joint_from_matrix(matrix: npt.NDArray[np.int64]) -> dict[RoundFacts, int]:
    axes = {name: np.broadcast_to(a, matrix.shape) for name, a in _decode_axes().items()}
    joint: dict[RoundFacts, int] = {}
    for fi, oi in zip(*np.nonzero(matrix), strict=True):
        at = (fi, oi)
        p_state, b_state = int(axes["player_state"][at]), int(axes["banker_state"][at])
        facts = RoundFacts(
            player_total=int(axes["player_total"][at]),
            banker_total=int(axes["banker_total"][at]),
            player_cards=int(axes["player_cards"][at]),
            banker_cards=int(axes["banker_cards"][at]),
            player_pair=p_state > 0,
            banker_pair=b_state > 0,
            player_suited_pair=p_state == 2,
            banker_suited_pair=b_state == 2,
            identical_pairs=bool(axes["identical"][at]),
            first_card_comparison=int(axes["first_card"][at]),
        )
        joint[facts] = int(matrix[at])
    return joint


def _named_counts(matrix: npt.NDArray[np.int64]) -> dict[str, int]:
    """The report's named counts, summed exactly from the joint matrix."""
    a = _decode_axes()
    pt, bt = a["player_total"], a["banker_total"]
    pn, bn = a["player_cards"], a["banker_cards"]
    p_nat = (pn == 2) & (pt >= 8)
    b_nat = (bn == 2) & (bt >= 8)
    p_win, b_win, tie = pt > bt, bt > pt, pt == bt
    p_pair, b_pair = a["player_state"] > 0, a["banker_state"] > 0
    p_perfect, b_perfect = a["player_state"] == 2, a["banker_state"] == 2
    cards = pn + bn
    margin = np.abs(pt - bt)

    def count(mask: npt.NDArray[np.bool_]) -> int:
        return int(
            np.broadcast_to(matrix, np.broadcast_shapes(matrix.shape, mask.shape))[
                np.broadcast_to(mask, matrix.shape)
            ].sum()
        )

    counts: dict[str, int] = {
        "banker_win": count(b_win),
        "player_win": count(p_win),
        "tie": count(tie),
    }
    for t in range(1, 10):
        counts[f"banker_win_total_{t}"] = count(b_win & (bt == t))
    for t in range(1, 10):
        counts[f"player_win_total_{t}"] = count(p_win & (pt == t))
    for t in range(10):
        counts[f"tie_total_{t}"] = count(tie & (pt == t))
    for m in range(1, 10):
        counts[f"banker_win_by_{m}"] = count(b_win & ~b_nat & (margin == m))
    for m in range(1, 10):
        counts[f"player_win_by_{m}"] = count(p_win & ~p_nat & (margin == m))
    counts |= {
        "banker_natural_win": count(b_win & b_nat),
        "player_natural_win": count(p_win & p_nat),
        "natural_tie": count(tie & p_nat & b_nat),
        "banker_win_six_two_cards": count(b_win & (bt == 6) & (bn == 2)),
        "banker_win_six_three_cards": count(b_win & (bt == 6) & (bn == 3)),
        "banker_win_three_card_seven": count(b_win & (bt == 7) & (bn == 3)),
        "player_win_three_card_eight": count(p_win & (pt == 8) & (pn == 3)),
        "cards_4": count(cards == 4),
        "cards_5": count(cards == 5),
        "cards_6": count(cards == 6),
        "player_pair": count(p_pair),
        "banker_pair": count(b_pair),
        "either_pair": count(p_pair | b_pair),
        "both_pairs": count(p_pair & b_pair),
        "perfect_pair_either": count(p_perfect | b_perfect),
        "perfect_pair_player": count(p_perfect),
        "perfect_pair_banker": count(b_perfect),
        "perfect_pair_both": count(p_perfect & b_perfect),
        "identical_pairs": count(a["identical"] == 1),
        "player_natural": count(p_nat),
        "banker_natural": count(b_nat),
        "first_card_dragon": count(a["first_card"] == 1),
        "first_card_tiger": count(a["first_card"] == -1),
        "first_card_tie": count(a["first_card"] == 0),
    }
    return counts
