"""How long each run gets in a fairly shuffled shoe: the detectors' null distributions.

For the statistics without a usable closed form (the longest run of one outcome, of one
rank, of one suit) the distribution of the per-shoe maximum is simulated: ``shoes`` shoes
shuffled with ``random.Random(seed)``, each dealt as a table deals it (the first card turned
and burned with as many cards as its value says, ace 1 and tens and faces 10, then rounds by
the third-card rule until the round in which the cut card, ``cut_card_from_end`` cards from
the end, comes out). The histogram of each statistic's per-shoe maximum is kept; the tail
``P(max >= t)`` is the fraction of simulated shoes that reached ``t``.

The tables the daemon uses are computed once with this module and committed in
:mod:`daemon.audit.null_tables`; a test checks them against a fresh simulation with another
seed. Regenerate with (then ``ruff format`` the file)::

    python -m daemon.audit.null_model --decks 6 8 --shoes 20000 --seed 20261202
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from common.cards import ALL_CARDS, Card
from daemon.audit.streaks import encode, longest_same_rank, longest_same_suit
from daemon.rules.outcome import Winner, play_round


class Statistic(StrEnum):
    """A per-shoe maximum whose null distribution is simulated."""

    BANKER_RUN = "banker_run"
    PLAYER_RUN = "player_run"
    TIE_RUN = "tie_run"
    SAME_RANK = "same_rank"
    SAME_SUIT = "same_suit"


OUTCOME_STATISTIC = {
    Winner.BANKER: Statistic.BANKER_RUN,
    Winner.PLAYER: Statistic.PLAYER_RUN,
    Winner.TIE: Statistic.TIE_RUN,
}


@dataclass(frozen=True, slots=True)
class NullTable:
    """Simulated per-shoe maxima: ``histograms[stat][v]`` shoes had a longest run of ``v``."""

    decks: int
    cut_card_from_end: int
    shoes: int
    seed: int
    histograms: dict[Statistic, tuple[int, ...]]

    def tail(self, stat: Statistic, length: int) -> float:
        """The simulated ``P(longest run >= length)`` in one fair shoe."""
        counts = self.histograms[stat]
        return sum(counts[max(0, length) :]) / self.shoes

    def threshold(self, stat: Statistic, alpha: float) -> int:
        """The shortest run length whose simulated tail is at most ``alpha``.

        The statistic is discrete, so the false-alarm rate is the tail at that length: at
        most ``alpha``, often below it.
        """
        length = 1
        while self.tail(stat, length) > alpha:
            length += 1
        return length


@dataclass(frozen=True, slots=True)
class DealtShoe:
    """One shoe as dealt: every card out of the shoe in order, and the rounds' winners."""

    cards: tuple[Card, ...]
    winners: tuple[Winner, ...]


def burn_count(first: Card) -> int:
    """Cards burned after the turned first card: its point value, ace 1, tens and faces 10."""
    return 10 if first.rank >= 10 else int(first.rank)


def deal_shoe(shoe: Sequence[Card], *, cut_card_from_end: int) -> DealtShoe:
    """Deal a shuffled shoe as a table does (turn, burn, rounds to the cut card's round)."""
    cut_index = len(shoe) - cut_card_from_end
    pos = 1 + burn_count(shoe[0])
    winners: list[Winner] = []
    while pos <= cut_index and len(shoe) - pos >= 6:  # at the cut index: the cut card, then one more round
        outcome, used = play_round(shoe[pos : pos + 6])
        winners.append(outcome.winner)
        pos += used
    return DealtShoe(tuple(shoe[:pos]), tuple(winners))


def statistics_of(dealt: DealtShoe) -> dict[Statistic, int]:
    """Each simulated statistic's value for one dealt shoe."""
    values = {s: 0 for s in Statistic}
    start = 0
    for i in range(1, len(dealt.winners) + 1):
        if i == len(dealt.winners) or dealt.winners[i] != dealt.winners[start]:
            stat = OUTCOME_STATISTIC[dealt.winners[start]]
            values[stat] = max(values[stat], i - start)
            start = i
    codes = encode(dealt.cards)
    values[Statistic.SAME_RANK] = longest_same_rank(codes).length
    values[Statistic.SAME_SUIT] = longest_same_suit(codes).length
    return values


def simulate(*, decks: int, cut_card_from_end: int, shoes: int, seed: int) -> NullTable:
    """Simulate ``shoes`` fair shoes and histogram each statistic's per-shoe maximum."""
    rng = random.Random(seed)
    counts: dict[Statistic, list[int]] = {s: [] for s in Statistic}
    deck = list(ALL_CARDS) * decks
    for _ in range(shoes):
        rng.shuffle(deck)
        for stat, value in statistics_of(deal_shoe(deck, cut_card_from_end=cut_card_from_end)).items():
            hist = counts[stat]
            hist.extend([0] * (value + 1 - len(hist)))
            hist[value] += 1
    return NullTable(
        decks=decks,
        cut_card_from_end=cut_card_from_end,
        shoes=shoes,
        seed=seed,
        histograms={s: tuple(h) for s, h in counts.items()},
    )


def _literal(table: NullTable) -> str:
    hist = "".join(f"            Statistic.{s.name}: {table.histograms[s]!r},\n" for s in Statistic)
    return (
        f"    {table.decks}: NullTable(\n"
        f"        decks={table.decks},\n        cut_card_from_end={table.cut_card_from_end},\n"
        f"        shoes={table.shoes},\n        seed={table.seed},\n"
        f"        histograms={{\n{hist}        }},\n    ),\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the committed null tables' source.")
    parser.add_argument("--decks", type=int, nargs="+", default=[6, 8])
    parser.add_argument("--shoes", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--cut-card-from-end", type=int, default=16)
    args = parser.parse_args(argv)
    body = "".join(
        _literal(
            simulate(decks=d, cut_card_from_end=args.cut_card_from_end, shoes=args.shoes, seed=args.seed)
        )
        for d in args.decks
    )
    print(body, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
