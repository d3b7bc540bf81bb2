"""Settling a decided round: its outcome summary and the resolution of every offered bet.

Bets resolve from ``RoundFacts`` alone (see ``daemon.rules.outcome``), and a shoe
has only a few hundred distinct facts, so resolutions are computed once per
(facts, die, offered bets) and reused; the outcome summary is cached the same way
with only its card lists rebuilt. ``tests/engine/test_settle.py`` checks the result
equals ``RoundOutcome.to_dict()`` and ``resolve_bets`` computed from scratch.
"""

from __future__ import annotations

from typing import Any

from daemon.cards import ALL_CARDS, Card
from daemon.rules.bets import resolve_bets
from daemon.rules.outcome import RoundFacts, RoundOutcome
from daemon.rules.variants import Variant

_CARD_LISTS = ("player", "banker")

# RoundFacts' fields as a plain tuple, in field order: hashing and comparing it is done in C,
# while a frozen dataclass builds and hashes itself in Python (this runs for every round).
_FactsKey = tuple[int, int, int, int, bool, bool, bool, bool, bool, int]
_Summaries = dict[_FactsKey, dict[str, Any]]
_Bets = dict[tuple[_FactsKey, int | None, tuple[str, ...]], dict[str, Any]]
_SHARED: dict[int, tuple[Variant, _Summaries, _Bets, dict[int, tuple[str, ...]]]] = {}


class Settler:
    """Outcome and bet resolution for one variant, memoised by round facts."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        # Shared by every engine of the same variant object (kept alive by the cache itself,
        # so its id is never reused while the entry exists).
        shared = _SHARED.get(id(variant))
        if shared is None or shared[0] is not variant:
            shared = _SHARED[id(variant)] = (variant, {}, {}, {})
        _, self._summaries, self._bets, self._offered = shared

    def offered(self, hand: int) -> list[str]:
        """Names of the bets offered on this hand of the shoe."""
        names = self._offered.get(hand)
        if names is None:
            names = self._offered[hand] = tuple(self.variant.offered_bets(hand))
        return list(names)

    def settle(
        self, player: list[str], banker: list[str], hand: int, die: int | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The outcome summary (``RoundOutcome.to_dict()``) and the offered bets' resolutions.

        ``player`` and ``banker`` are card codes in deal order.
        """
        key = _facts_key(player, banker)
        summary = self._summaries.get(key)
        if summary is None:
            facts = _facts_of(key)
            outcome = RoundOutcome(tuple(map(Card.parse, player)), tuple(map(Card.parse, banker)))
            if outcome.facts != facts:  # pragma: no cover - guards the fast path against rule changes
                raise AssertionError(f"fast round facts differ from the rules core for {player} / {banker}")
            full = outcome.to_dict()
            summary = self._summaries[key] = {k: v for k, v in full.items() if k not in _CARD_LISTS}
        result = {"player": list(player), "banker": list(banker), **summary}
        offered = self._offered.get(hand)
        if offered is None:
            offered = self._offered[hand] = tuple(self.variant.offered_bets(hand))
        bets_key = (key, die, offered)
        bets = self._bets.get(bets_key)
        if bets is None:
            resolutions = resolve_bets(self.variant, _facts_of(key), die)
            bets = self._bets[bets_key] = {name: resolutions[name].to_dict() for name in offered}
        return result, {name: dict(res) for name, res in bets.items()}


_POINTS = {card.code: card.points for card in ALL_CARDS}
RANKS: dict[str, int] = {card.code: int(card.rank) for card in ALL_CARDS}
"""Rank order A..K = 1..13 of each card code."""
_RANK = RANKS


_FACTS: dict[_FactsKey, RoundFacts] = {}  # at most a few thousand distinct facts exist


def _facts_of(key: _FactsKey) -> RoundFacts:
    facts = _FACTS.get(key)
    if facts is None:
        facts = _FACTS[key] = RoundFacts(*key)
    return facts


def round_facts(player: list[str], banker: list[str]) -> RoundFacts:
    """``RoundOutcome(...).facts`` computed from card codes with lookup tables (the hot path)."""
    return _facts_of(_facts_key(player, banker))


def _facts_key(player: list[str], banker: list[str]) -> _FactsKey:
    """The fields of ``round_facts(player, banker)``, in ``RoundFacts`` field order."""
    points, rank = _POINTS, _RANK
    p1, p2, b1, b2 = player[0], player[1], banker[0], banker[1]
    player_pair = rank[p1] == rank[p2]
    banker_pair = rank[b1] == rank[b2]
    first = rank[b1] - rank[p1]
    return (
        sum(map(points.__getitem__, player)) % 10,
        sum(map(points.__getitem__, banker)) % 10,
        len(player),
        len(banker),
        player_pair,
        banker_pair,
        p1 == p2,
        b1 == b2,
        player_pair and banker_pair and sorted((p1, p2)) == sorted((b1, b2)),
        (first > 0) - (first < 0),
    )
