"""Settling a decided round: its outcome summary and the resolution of every offered bet.

Bets resolve from ``RoundFacts`` alone (see ``daemon.rules.outcome``), and a shoe
has only a few hundred distinct facts, so resolutions are computed once per
(facts, die, offered bets) and reused; the outcome summary is built from the facts
(no card parsing) and cached the same way, with only its card lists rebuilt.
``tests/engine/test_settle.py`` checks the result equals ``RoundOutcome.to_dict()``
(keys in the same order) and ``resolve_bets`` computed from scratch.
"""

from __future__ import annotations

from typing import cast

from common.cards import ALL_CARDS
from daemon.engine.payloads import BetResolution, OutcomeSummary, RoundOutcomeData
from daemon.rules.bets import resolve_bets
from daemon.rules.outcome import RoundFacts
from daemon.rules.resolution import Resolution
from daemon.rules.variants import Variant

# RoundFacts' fields as a plain tuple, in field order: hashing and comparing it is done in C,
# while a frozen dataclass builds and hashes itself in Python (this runs for every round).
_FactsKey = tuple[int, int, int, int, bool, bool, bool, bool, bool, int]
_Summaries = dict[_FactsKey, OutcomeSummary]
_Bets = dict[tuple[_FactsKey, int | None, tuple[str, ...]], dict[str, BetResolution]]
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
    ) -> tuple[RoundOutcomeData, dict[str, BetResolution]]:
        """The outcome summary (``RoundOutcome.to_dict()``) and the offered bets' resolutions.

        ``player`` and ``banker`` are card codes in deal order.
        """
        key = _facts_key(player, banker)
        summary = self._summaries.get(key)
        if summary is None:
            summary = self._summaries[key] = _summary(_facts_of(key))
        result: RoundOutcomeData = {"player": list(player), "banker": list(banker), **summary}
        offered = self._offered.get(hand)
        if offered is None:
            offered = self._offered[hand] = tuple(self.variant.offered_bets(hand))
        bets_key = (key, die, offered)
        bets = self._bets.get(bets_key)
        if bets is None:
            resolutions = resolve_bets(self.variant, _facts_of(key), die)
            bets = self._bets[bets_key] = {name: _resolution_dict(resolutions[name]) for name in offered}
        return result, {name: res.copy() for name, res in bets.items()}


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


# Few distinct resolutions exist (lose, push, each payout): their JSON forms are built once.
# These dicts are only ever copied out (``settle`` returns copies), never handed over.
_RESOLUTION_DICTS: dict[Resolution, BetResolution] = {}


def _resolution_dict(resolution: Resolution) -> BetResolution:
    found = _RESOLUTION_DICTS.get(resolution)
    if found is None:
        found = _RESOLUTION_DICTS[resolution] = cast(BetResolution, resolution.to_dict())
    return found


_FIRST_CARD = {1: "dragon", -1: "tiger", 0: "tie"}


def _summary(facts: RoundFacts) -> OutcomeSummary:
    """``RoundOutcome.to_dict()`` without its card lists, from the round's facts alone: the
    same keys in the same order (a first sight of some facts then costs no card parsing)."""
    return {
        "player_total": facts.player_total,
        "banker_total": facts.banker_total,
        "winner": facts.winner.value,
        "margin": facts.margin,
        "player_natural": facts.player_natural,
        "banker_natural": facts.banker_natural,
        "player_pair": facts.player_pair,
        "banker_pair": facts.banker_pair,
        "player_suited_pair": facts.player_suited_pair,
        "banker_suited_pair": facts.banker_suited_pair,
        "cards": facts.card_count,
        "first_card": _FIRST_CARD[facts.first_card_comparison],
    }


_VERDICT_FACTS: dict[_FactsKey, tuple[str, bool, bool]] = {}


def verdict_facts(player: list[str], banker: list[str]) -> tuple[str, bool, bool]:
    """``(winner value, player_pair, banker_pair)`` of ``round_facts(player, banker)``: what a
    reader's verdict is checked against (once per round, so memoised past the facts' properties)."""
    key = _facts_key(player, banker)
    found = _VERDICT_FACTS.get(key)
    if found is None:
        facts = _facts_of(key)
        found = _VERDICT_FACTS[key] = (facts.winner.value, facts.player_pair, facts.banker_pair)
    return found


def _facts_key(player: list[str], banker: list[str]) -> _FactsKey:
    """The fields of ``round_facts(player, banker)``, in ``RoundFacts`` field order.

    Straight-line for two or three cards a side (a round has no more): it runs twice a round.
    """
    points, rank = _POINTS, _RANK
    p1, p2, b1, b2 = player[0], player[1], banker[0], banker[1]
    rp1, rp2, rb1, rb2 = rank[p1], rank[p2], rank[b1], rank[b2]
    player_points = points[p1] + points[p2]
    if len(player) > 2:
        player_points += points[player[2]]
    banker_points = points[b1] + points[b2]
    if len(banker) > 2:
        banker_points += points[banker[2]]
    player_pair = rp1 == rp2
    banker_pair = rb1 == rb2
    return (
        player_points % 10,
        banker_points % 10,
        len(player),
        len(banker),
        player_pair,
        banker_pair,
        p1 == p2,
        b1 == b2,
        player_pair and banker_pair and sorted((p1, p2)) == sorted((b1, b2)),
        (rb1 > rp1) - (rb1 < rp1),
    )
