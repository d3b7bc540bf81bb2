"""The main bets: Player, Banker, Tie, with their commission, Super 6, EZ and Super 98 rules.

Rule sources are cited by seed number and summarised in ``daemon/rules/RULES.md``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import Field

from daemon.rules.bet_model import BetModel
from daemon.rules.outcome import RoundFacts, Side, Winner
from daemon.rules.payouts import Payout
from daemon.rules.resolution import LOSE, PUSH, Resolution, win


class PlayerBet(BetModel):
    """Player wins: pays ``payout``; pushes on a tie (seeds 000-004)."""

    kind: Literal["player"]
    payout: Payout
    super_round_payout_on_8_or_9: Payout | None = Field(
        default=None, description="Super 98 super round: a Player win on a total of 8 or 9 pays this."
    )

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout_on_8_or_9 is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return _main_bet(
            self.payout,
            None,
            self.super_round_payout_on_8_or_9,
            Side.PLAYER,
            facts=facts,
            super_round=super_round,
        )


class BankerBet(BetModel):
    """Banker wins: pays ``payout`` (0.95 with 5% commission, 1 without); pushes on a tie.

    ``six_payout`` is the no-commission / Super 6 rule: a Banker win on a total of 6
    pays this instead (0.5; seeds 000, 001, 002, 003, 004). ``push_on_three_card_seven``
    is EZ Baccarat's commission-free rule (not in the seeds; the usual EZ table rule).
    """

    kind: Literal["banker"]
    payout: Payout
    six_payout: Payout | None = None
    push_on_three_card_seven: bool = Field(
        default=False,
        description="EZ Baccarat: a Banker win with a three-card 7 pushes instead of paying.",
    )
    super_round_payout_on_8_or_9: Payout | None = Field(
        default=None, description="Super 98 super round: a Banker win on a total of 8 or 9 pays this."
    )

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout_on_8_or_9 is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if (
            self.push_on_three_card_seven
            and facts.winner is Winner.BANKER
            and facts.banker_total == 7
            and facts.banker_cards == 3
        ):
            return PUSH
        return _main_bet(
            self.payout,
            self.six_payout,
            self.super_round_payout_on_8_or_9,
            Side.BANKER,
            facts=facts,
            super_round=super_round,
        )


def _main_bet(
    payout: Fraction,
    six_payout: Fraction | None,
    super_payout: Fraction | None,
    side: Side,
    *,
    facts: RoundFacts,
    super_round: bool,
) -> Resolution:
    if facts.winner is Winner.TIE:
        return PUSH
    if not facts.won_by(side):
        return LOSE
    total = facts.total_of(side)
    if super_round and super_payout is not None and total >= 8:
        return win(super_payout)
    if six_payout is not None and total == 6:
        return win(six_payout)
    return win(payout)


class TieBet(BetModel):
    """Equal totals: pays ``payout`` (8 to 1)."""

    kind: Literal["tie"]
    payout: Payout
    super_round_payout_on_8_or_9: Payout | None = Field(
        default=None, description="Super 98 super round: a tie on 8 or 9 pays this (seed 002)."
    )

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout_on_8_or_9 is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.winner is not Winner.TIE:
            return LOSE
        if super_round and self.super_round_payout_on_8_or_9 is not None and facts.player_total >= 8:
            return win(self.super_round_payout_on_8_or_9)
        return win(self.payout)
