"""The irregular-shoe detectors: is this shoe's order one a fair shuffle would rarely deal?

Five detectors look at one finished shoe, given the cards in the order they came out of the
shoe (the turned first card, the burns, every round's cards, in dealt order) and the rounds'
winners, and at the same table's recent shoes:

- ``outcome_run``: the longest run of Banker wins, of Player wins, of ties.
- ``same_rank`` and ``same_suit``: the longest stretch of consecutive cards of one rank, of one suit.
- ``repeated_stretch``: the longest stretch of cards dealt in the same order in an earlier shoe
  (a slug of cards carried over from the last shoe, or a shoe not shuffled at all).
- ``factory_order``: the longest stretch in a fresh deck's factory order, forwards or
  backwards (a deck put in unshuffled); the order is defined in :mod:`daemon.audit.factory_order`.

Each detector fires when its run reaches a threshold chosen so that a fairly shuffled shoe
reaches it with probability at most ``alpha`` (the configured false-alarm rate per shoe).
The first three use the simulated null tables of :mod:`daemon.audit.null_model`
(``outcome_run`` splits ``alpha`` in three, one third per winner, so the detector as a whole
stays within ``alpha``); the last two use the exact bounds of :mod:`daemon.audit.bounds`.
A finding names its run (positions, cards), the threshold, and the probability that a fair
shoe gives a run at least as long, with how that probability was obtained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

from common.cards import Card
from daemon.audit.bounds import factory_bound, slug_bound, smallest_length
from daemon.audit.null_model import OUTCOME_STATISTIC, NullTable, Statistic
from daemon.audit.null_tables import NULL_TABLES
from daemon.audit.settings import IrregularSettings
from daemon.audit.streaks import (
    Run,
    decode,
    encode,
    longest_equal_run,
    longest_factory_run,
    longest_repeated_run,
    longest_run,
    ranks_of,
    reaches_equal_run,
    reaches_factory_run,
    suits_of,
)
from daemon.rules.outcome import Winner


class Detector(StrEnum):
    OUTCOME_RUN = "outcome_run"
    SAME_RANK = "same_rank"
    SAME_SUIT = "same_suit"
    REPEATED_STRETCH = "repeated_stretch"
    FACTORY_ORDER = "factory_order"


class ProbabilityKind(StrEnum):
    """How a finding's probability was obtained."""

    SIMULATED = "simulated"
    """The fraction of the simulated fair shoes with a run at least as long."""
    SIMULATED_NONE_REACHED = "simulated_none_reached"
    """No simulated shoe reached it; the figure is the 95 % upper bound, 3 / shoes simulated."""
    EXACT_BOUND = "exact_bound"
    """An exact upper bound (union bound) on the probability."""


@dataclass(frozen=True, slots=True)
class ShoeSequence:
    """One finished shoe: every card out of it in dealt order, and each round's winner in order.

    The cards are held encoded (:func:`daemon.audit.streaks.encode`), the form the detectors
    compare; build one with :meth:`of`. The table keeps its recent shoes in this form.
    """

    shoe_id: str
    codes: bytes
    winners: tuple[Winner, ...]

    @staticmethod
    def of(shoe_id: str, cards: Sequence[Card], winners: Sequence[Winner]) -> ShoeSequence:
        """Encode a shoe's cards once."""
        return ShoeSequence(shoe_id, encode(cards), tuple(winners))

    @property
    def cards(self) -> tuple[Card, ...]:
        return decode(self.codes)


@dataclass(frozen=True, slots=True)
class Finding:
    """One detector that fired, with its evidence.

    ``first`` is the run's first position, 1-based: the card's place in the dealt order (1 is
    the turned first card) or, for ``outcome_run``, the round's number in the shoe. ``cards``
    are the run's cards (empty for ``outcome_run``, where ``winner`` names the side).
    ``earlier_shoe_id`` and ``earlier_first`` locate a repeated stretch in the earlier shoe.
    """

    detector: Detector
    shoe_id: str
    length: int
    threshold: int
    first: int
    probability: float
    probability_kind: ProbabilityKind
    cards: tuple[Card, ...] = ()
    winner: Winner | None = None
    earlier_shoe_id: str | None = None
    earlier_first: int | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form (cards as their two-character codes)."""
        return {
            "detector": self.detector.value,
            "shoe_id": self.shoe_id,
            "length": self.length,
            "threshold": self.threshold,
            "first": self.first,
            "probability": self.probability,
            "probability_kind": self.probability_kind.value,
            "cards": [c.code for c in self.cards],
            "winner": None if self.winner is None else self.winner.value,
            "earlier_shoe_id": self.earlier_shoe_id,
            "earlier_first": self.earlier_first,
        }


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The run length at which each detector fires, for one shoe and its history."""

    outcome_run: dict[Winner, int]
    same_rank: int
    same_suit: int
    repeated_stretch: int
    factory_order: int


def thresholds(settings: IrregularSettings, earlier_shoes: int = 0) -> Thresholds:
    """Each detector's threshold for ``settings.alpha``, comparing with ``earlier_shoes`` shoes.

    The bounds count every card of this shoe and of each earlier shoe as dealt
    (``decks * 52``), which can only raise them, so the false-alarm rate stays within
    ``alpha`` wherever the cut card was.
    """
    return _thresholds(settings, earlier_shoes)


@lru_cache(maxsize=64)
def _thresholds(settings: IrregularSettings, earlier_shoes: int) -> Thresholds:
    # the same few inputs come back shoe after shoe: search each threshold once
    table = NULL_TABLES[settings.decks]
    shoe_cards = settings.decks * 52
    per_winner = settings.alpha / len(Winner)
    return Thresholds(
        outcome_run={w: table.threshold(OUTCOME_STATISTIC[w], per_winner) for w in Winner},
        same_rank=table.threshold(Statistic.SAME_RANK, settings.alpha),
        same_suit=table.threshold(Statistic.SAME_SUIT, settings.alpha),
        repeated_stretch=smallest_length(
            lambda n: slug_bound(
                decks=settings.decks, dealt=shoe_cards, history_lengths=[shoe_cards] * earlier_shoes, length=n
            ),
            settings.alpha,
            longest=shoe_cards,
        ),
        factory_order=smallest_length(
            lambda n: factory_bound(decks=settings.decks, dealt=shoe_cards, length=n),
            settings.alpha,
            longest=shoe_cards,
        ),
    )


def detect(
    shoe: ShoeSequence, history: Sequence[ShoeSequence], settings: IrregularSettings
) -> tuple[Finding, ...]:
    """Every detector that fires on ``shoe``; ``history`` is the table's earlier shoes, oldest first.

    Only the last ``settings.recent_shoes`` of ``history`` are compared.
    """
    if not settings.enabled:
        return ()
    recent = list(history[len(history) - settings.recent_shoes :]) if settings.recent_shoes else []
    limits = thresholds(settings, len(recent))
    table = NULL_TABLES[settings.decks]
    shoe_cards = settings.decks * 52
    findings: list[Finding] = []
    # Each check first asks, cheaply, whether the threshold is reached; the exact run (and
    # its evidence) is worked out only for the rare shoe where it is.
    outcomes = "".join([w.value[0] for w in shoe.winners]).encode("ascii")
    for winner in Winner:
        limit = limits.outcome_run[winner]
        if winner.value[0].encode("ascii") * limit in outcomes:
            run = _longest_winner_run(shoe.winners, winner)
            p, kind = _simulated(table, OUTCOME_STATISTIC[winner], run.length)
            findings.append(
                Finding(
                    detector=Detector.OUTCOME_RUN,
                    shoe_id=shoe.shoe_id,
                    length=run.length,
                    threshold=limit,
                    first=run.start + 1,
                    probability=p,
                    probability_kind=kind,
                    winner=winner,
                )
            )
    for detector, stat, keys, limit in (
        (Detector.SAME_RANK, Statistic.SAME_RANK, ranks_of(shoe.codes), limits.same_rank),
        (Detector.SAME_SUIT, Statistic.SAME_SUIT, suits_of(shoe.codes), limits.same_suit),
    ):
        if reaches_equal_run(keys, limit):
            run = longest_equal_run(keys)
            p, kind = _simulated(table, stat, run.length)
            findings.append(_card_finding(detector, shoe, run, limit=limit, p=p, kind=kind))
    if reaches_factory_run(shoe.codes, limits.factory_order):
        factory = longest_factory_run(shoe.codes)
        p = factory_bound(decks=settings.decks, dealt=shoe_cards, length=factory.length)
        findings.append(
            _card_finding(
                Detector.FACTORY_ORDER,
                shoe,
                factory,
                limit=limits.factory_order,
                p=p,
                kind=ProbabilityKind.EXACT_BOUND,
            )
        )
    if recent and limits.repeated_stretch <= shoe_cards:
        repeat = longest_repeated_run(shoe.codes, [h.codes for h in recent], k=limits.repeated_stretch)
        if repeat is not None:
            p = slug_bound(
                decks=settings.decks,
                dealt=shoe_cards,
                history_lengths=[shoe_cards] * len(recent),
                length=repeat.length,
            )
            run = Run(repeat.length, repeat.start)
            found = _card_finding(
                Detector.REPEATED_STRETCH,
                shoe,
                run,
                limit=limits.repeated_stretch,
                p=p,
                kind=ProbabilityKind.EXACT_BOUND,
            )
            earlier = recent[repeat.earlier_shoe].shoe_id
            findings.append(replace(found, earlier_shoe_id=earlier, earlier_first=repeat.earlier_start + 1))
    return tuple(findings)


def _longest_winner_run(winners: Sequence[Winner], winner: Winner) -> Run:
    return longest_run(winners, linked=lambda a, b: a is winner and b is winner, counts=lambda w: w is winner)


def _simulated(table: NullTable, stat: Statistic, length: int) -> tuple[float, ProbabilityKind]:
    p = table.tail(stat, length)
    if p == 0.0:
        return 3 / table.shoes, ProbabilityKind.SIMULATED_NONE_REACHED
    return p, ProbabilityKind.SIMULATED


def _card_finding(
    detector: Detector, shoe: ShoeSequence, run: Run, *, limit: int, p: float, kind: ProbabilityKind
) -> Finding:
    return Finding(
        detector=detector,
        shoe_id=shoe.shoe_id,
        length=run.length,
        threshold=limit,
        first=run.start + 1,
        probability=p,
        probability_kind=kind,
        cards=decode(shoe.codes[run.start : run.stop]),
    )
