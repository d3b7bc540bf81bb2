"""The side bets: pairs, big/small, sixes and tigers, tie totals, Dragon Bonus, naturals,
first card, Cow Cow.

Rule sources are cited by seed number and summarised in ``daemon/rules/RULES.md``
(``RULES.md`` below).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from daemon.rules.bet_model import BetModel, SideName, side_of
from daemon.rules.outcome import RoundFacts, Side, Winner
from daemon.rules.payouts import Payout, Share
from daemon.rules.resolution import LOSE, PUSH, Resolution, win


class PairBet(BetModel):
    """The side's first two cards share a rank (K-K yes, K-Q no; RULES.md)."""

    kind: Literal["pair"]
    side: SideName
    payout: Payout
    super_round_payout: Payout | None = Field(default=None, description="Super 98 super round payout.")

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if not facts.pair_of(side_of(self.side)):
            return LOSE
        if super_round and self.super_round_payout is not None:
            return win(self.super_round_payout)
        return win(self.payout)


class EitherPairBet(BetModel):
    """Either side's first two cards share a rank (seed 000 "Đôi Bất Kỳ")."""

    kind: Literal["either_pair"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return win(self.payout) if facts.player_pair or facts.banker_pair else LOSE


class PerfectPairBet(BetModel):
    """The first two cards of a side are the same card, rank and suit (seed 000 "Đôi Hoàn Hảo").

    ``side: either`` (the seed's bet) wins when either side has one; ``both_payout``,
    when set, pays instead when both sides do.
    """

    kind: Literal["perfect_pair"]
    side: Literal["player", "banker", "either"] = "either"
    payout: Payout
    both_payout: Payout | None = None

    @model_validator(mode="after")
    def _both_needs_either(self) -> PerfectPairBet:
        if self.both_payout is not None and self.side != "either":
            raise ValueError("both_payout only applies to side: either")
        return self

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        player, banker = facts.player_suited_pair, facts.banker_suited_pair
        if self.side == "player":
            return win(self.payout) if player else LOSE
        if self.side == "banker":
            return win(self.payout) if banker else LOSE
        if player and banker and self.both_payout is not None:
            return win(self.both_payout)
        return win(self.payout) if player or banker else LOSE


class BigBet(BetModel):
    """Five or six cards dealt in the round (seeds 000, 002)."""

    kind: Literal["big"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return win(self.payout) if facts.card_count >= 5 else LOSE


class SmallBet(BetModel):
    """Exactly four cards dealt (seeds 000, 002)."""

    kind: Literal["small"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return win(self.payout) if facts.card_count == 4 else LOSE


class BankerSixBet(BetModel):
    """Banker wins on a total of 6: Lucky 6 / Super 6 / Super 6+ / Tiger (seeds 000, 002-004).

    Pays ``two_card_payout`` when the Banker's 6 has two cards, ``three_card_payout`` with three.
    """

    kind: Literal["banker_six"]
    two_card_payout: Payout
    three_card_payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.winner is not Winner.BANKER or facts.banker_total != 6:
            return LOSE
        return win(self.two_card_payout if facts.banker_cards == 2 else self.three_card_payout)


class SmallTigerBet(BetModel):
    """Banker wins with a two-card 6 (Small Tiger, seeds 000, 004)."""

    kind: Literal["small_tiger"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 6 and facts.banker_cards == 2
        return win(self.payout) if won else LOSE


class BigTigerBet(BetModel):
    """Banker wins with a three-card 6 (Big Tiger; seed 004's text for it is Tiger Tie's, see RULES.md)."""

    kind: Literal["big_tiger"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 6 and facts.banker_cards == 3
        return win(self.payout) if won else LOSE


class TieOnTotalBet(BetModel):
    """A tie on one given total: Tiger Tie (6) and Super Tie 0-9 (seeds 000, 004)."""

    kind: Literal["tie_on_total"]
    total: int = Field(ge=0, le=9)
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.TIE and facts.player_total == self.total
        return win(self.payout) if won else LOSE


class TigerPairBet(BetModel):
    """Tiger Pair (seeds 000, 004): one side pairs; both sides pair; both pairs the same cards."""

    kind: Literal["tiger_pair"]
    one_pair_payout: Payout
    both_pairs_payout: Payout
    identical_pairs_payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.identical_pairs:
            return win(self.identical_pairs_payout)
        if facts.player_pair and facts.banker_pair:
            return win(self.both_pairs_payout)
        if facts.player_pair or facts.banker_pair:
            return win(self.one_pair_payout)
        return LOSE


MarginKey = Annotated[int, Field(ge=1, le=9)]


class DragonBonusBet(BetModel):
    """Dragon Bonus on one side (seed 000).

    The side wins without a natural by a margin listed in ``margin_payouts`` (9: 30,
    8: 10, ...): pays that; wins with a natural: ``natural_win_payout``; a tie of two
    naturals pushes; anything else loses (including a non-natural win by an unlisted margin).
    """

    kind: Literal["dragon_bonus"]
    side: SideName
    margin_payouts: dict[MarginKey, Payout] = Field(min_length=1)
    natural_win_payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        side = side_of(self.side)
        if facts.winner is Winner.TIE:
            return PUSH if facts.player_natural and facts.banker_natural else LOSE
        if not facts.won_by(side):
            return LOSE
        if facts.natural_of(side):
            return win(self.natural_win_payout)
        payout = self.margin_payouts.get(facts.margin)
        return LOSE if payout is None else win(payout)


class PandaEightBet(BetModel):
    """Player wins with a three-card 8 (Panda 8, seed 000)."""

    kind: Literal["panda_8"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.PLAYER and facts.player_total == 8 and facts.player_cards == 3
        return win(self.payout) if won else LOSE


class DragonSevenBet(BetModel):
    """Banker wins with a three-card 7 (Dragon 7 / Long 7, seed 000)."""

    kind: Literal["dragon_7"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 7 and facts.banker_cards == 3
        return win(self.payout) if won else LOSE


class NaturalBet(BetModel):
    """The side's first two cards total 8 or 9.

    ``must_win: true`` (seed 000 "bài chuẩn", 4 to 1) also needs the side to win (a tie
    loses); ``must_win: false`` (seed 003 "Natural") pays on the natural alone.
    """

    kind: Literal["natural"]
    side: SideName
    payout: Payout
    must_win: bool

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        side = side_of(self.side)
        won = facts.natural_of(side) and (not self.must_win or facts.won_by(side))
        return win(self.payout) if won else LOSE


class NaturalTotalBet(BetModel):
    """The side has a two-card ``total`` (8 or 9) and wins; a tie loses (seed 002)."""

    kind: Literal["natural_total"]
    side: SideName
    total: Literal[8, 9]
    payout: Payout
    super_round_payout: Payout | None = Field(default=None, description="Super 98 super round payout.")

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        side = side_of(self.side)
        if not (facts.natural_of(side) and facts.total_of(side) == self.total and facts.won_by(side)):
            return LOSE
        if super_round and self.super_round_payout is not None:
            return win(self.super_round_payout)
        return win(self.payout)


class EitherNaturalBet(BetModel):
    """The winner won with a natural (seed 000 "Bài chuẩn", 1.6 to 1); a tie loses."""

    kind: Literal["either_natural"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        winner = facts.winner
        if winner is Winner.TIE:
            return LOSE
        return win(self.payout) if facts.natural_of(Side(winner.value)) else LOSE


class FirstCardBet(BetModel):
    """Dragon / Tiger / tie on the first card of each side, A..K = 1..13 (seed 000).

    ``dragon``: Banker's first card ranks higher; ``tiger``: Player's does; ``tie``:
    equal ranks. On a first-card tie a Dragon or Tiger bet gets ``tie_refund`` of the
    stake back (the seed: half), so it settles as a loss of the rest.
    """

    kind: Literal["first_card"]
    pick: Literal["dragon", "tiger", "tie"]
    payout: Payout
    tie_refund: Share = Fraction(0)

    @model_validator(mode="after")
    def _refund_needs_a_side(self) -> FirstCardBet:
        if self.pick == "tie" and self.tie_refund != 0:
            raise ValueError("tie_refund only applies to pick: dragon or tiger")
        return self

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        comparison = facts.first_card_comparison
        wanted = {"dragon": 1, "tiger": -1, "tie": 0}[self.pick]
        if comparison == wanted:
            return win(self.payout)
        if comparison == 0:
            return PUSH if self.tie_refund == 1 else Resolution("lose", self.tie_refund - 1)
        return LOSE


class CowCowBet(BetModel):
    """Cow Cow Player or Banker (seed 003): the winner's total N multiplies the result.

    A winning bet pays N to 1, less ``commission_on_nine`` of the win when N is 9;
    a losing bet loses N times the stake; a tie pushes.
    """

    kind: Literal["cow_cow"]
    side: SideName
    commission_on_nine: Share

    @field_validator("commission_on_nine")
    @classmethod
    def _leaves_a_win(cls, value: Fraction) -> Fraction:
        if value >= 1:
            raise ValueError("a commission of the whole win leaves no win; must be below 1")
        return value

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.winner is Winner.TIE:
            return PUSH
        n = facts.winning_total
        if not facts.won_by(side_of(self.side)):
            return Resolution("lose", Fraction(-n))
        net = Fraction(n)
        if n == 9:
            net *= 1 - self.commission_on_nine
        return win(net)
