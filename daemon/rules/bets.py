"""The bet catalogue: every bet kind the code implements, and how a round resolves it.

A variant file (``config/variants/*.yaml``, see ``daemon.rules.variants``) lists bets;
each names a ``kind`` from this catalogue and gives its payout figures (exact
fractions, :mod:`daemon.rules.payouts`). The kinds are the models of
:mod:`daemon.rules.main_bets` and :mod:`daemon.rules.side_bets`; each resolves a round to
a :class:`daemon.rules.resolution.Resolution`.

Rule sources are cited by seed number and summarised in ``daemon/rules/RULES.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, get_args

from pydantic import Field

from daemon.rules.bet_model import BetModel
from daemon.rules.main_bets import BankerBet, PlayerBet, TieBet
from daemon.rules.outcome import RoundFacts, RoundOutcome
from daemon.rules.resolution import Resolution
from daemon.rules.side_bets import (
    BankerSixBet,
    BigBet,
    BigTigerBet,
    CowCowBet,
    DragonBonusBet,
    DragonSevenBet,
    EitherNaturalBet,
    EitherPairBet,
    FirstCardBet,
    NaturalBet,
    NaturalTotalBet,
    PairBet,
    PandaEightBet,
    PerfectPairBet,
    SmallBet,
    SmallTigerBet,
    TieOnTotalBet,
    TigerPairBet,
)

if TYPE_CHECKING:
    from daemon.rules.variants import Variant


Bet = Annotated[
    PlayerBet
    | BankerBet
    | TieBet
    | PairBet
    | EitherPairBet
    | PerfectPairBet
    | BigBet
    | SmallBet
    | BankerSixBet
    | SmallTigerBet
    | BigTigerBet
    | TieOnTotalBet
    | TigerPairBet
    | DragonBonusBet
    | PandaEightBet
    | DragonSevenBet
    | NaturalBet
    | NaturalTotalBet
    | EitherNaturalBet
    | FirstCardBet
    | CowCowBet,
    Field(discriminator="kind"),
]
"""Any bet of the catalogue, chosen by its ``kind``."""


def _kind_of(cls: type[BetModel]) -> str:
    (kind,) = get_args(cls.model_fields["kind"].annotation)
    return str(kind)


BET_KINDS: Mapping[str, type[BetModel]] = {
    _kind_of(cls): cls
    for cls in (
        PlayerBet,
        BankerBet,
        TieBet,
        PairBet,
        EitherPairBet,
        PerfectPairBet,
        BigBet,
        SmallBet,
        BankerSixBet,
        SmallTigerBet,
        BigTigerBet,
        TieOnTotalBet,
        TigerPairBet,
        DragonBonusBet,
        PandaEightBet,
        DragonSevenBet,
        NaturalBet,
        NaturalTotalBet,
        EitherNaturalBet,
        FirstCardBet,
        CowCowBet,
    )
}
"""The catalogue: kind name -> model class."""


def resolve_bets(
    variant: Variant, outcome: RoundOutcome | RoundFacts, super_round_die: int | None = None
) -> dict[str, Resolution]:
    """Resolve every bet of ``variant`` for a finished round, by bet name.

    ``super_round_die`` is the Super 98 die result (1..faces); it is required when the
    variant has super-round payouts (ValueError when missing or out of range, never
    guessed) and ignored otherwise.
    """
    facts = outcome.facts if isinstance(outcome, RoundOutcome) else outcome
    super_round = variant.is_super_round(super_round_die)
    return {bet.name: bet.resolve(facts, super_round) for bet in variant.bets}
