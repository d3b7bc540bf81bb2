"""The bet catalogue: every bet kind the code implements, and how a round resolves it.

A variant file (``config/variants/*.yaml``, see ``daemon.rules.variants``) lists bets;
each names a ``kind`` from this catalogue and gives its payout figures. Payouts are
"X to 1" figures (net win per unit staked) held as exact fractions; a YAML number such
as ``0.95`` is read through its decimal text, so it is exactly 19/20.

A :class:`Resolution` is the net return per unit staked: a Banker win at 5% commission
is ``win +19/20``, a Player bet on a tie is ``push 0``, a plain loss ``lose -1``, a Cow
Cow loss on a winning 9 ``lose -9``, a Dragon bet on a first-card tie ``lose -1/2``
(half the stake refunded).

Rule sources are cited by seed file name (``shared/seeds/``) and summarised in
``shared/design/RULES.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from daemon.rules.outcome import RoundFacts, RoundOutcome, Side, Winner

if TYPE_CHECKING:
    from daemon.rules.variants import Variant

OutcomeWord = Literal["win", "lose", "push"]


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one bet settles: win / lose / push and the net return per unit staked."""

    outcome: OutcomeWord
    multiplier: Fraction

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form: the exact fraction as text (``"19/20"``) plus a float."""
        return {
            "outcome": self.outcome,
            "multiplier": fraction_text(self.multiplier),
            "multiplier_float": float(self.multiplier),
        }


def fraction_text(value: Fraction) -> str:
    """``"19/20"``, ``"-1/2"``, or ``"8"`` for a whole number."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


PUSH = Resolution("push", Fraction(0))
LOSE = Resolution("lose", Fraction(-1))


def _win(payout: Fraction) -> Resolution:
    return Resolution("win", payout)


MAX_PAYOUT = 1_000_000
"""No bet pays more than a million to one; anything above is a typo, not a setting."""


def _parse_number(value: object) -> Fraction:
    """Read a figure exactly: int, decimal number or text (``0.95``), or ``"a/b"``."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, float):
        # The decimal the operator wrote (0.95), not the binary float nearest to it.
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"must be a number, got {type(value).__name__}")
    try:
        if "/" in text:
            numerator, _, denominator = text.partition("/")
            parts = (Decimal(numerator), Decimal(denominator))
        else:
            parts = (Decimal(text), Decimal(1))
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number or a fraction like '19/20'") from None
    for part in parts:
        # Finite and of sane size before any exact conversion (1e999999999 would eat memory).
        if not part.is_finite() or abs(part.adjusted()) > 12:
            raise ValueError(f"{value!r} is not a finite number of sensible size")
    if parts[1] == 0:
        raise ValueError(f"{value!r} divides by zero")
    return Fraction(parts[0]) / Fraction(parts[1])


def _parse_payout(value: object) -> Fraction:
    result = _parse_number(value)
    if not 0 < result <= MAX_PAYOUT:
        raise ValueError(f"a payout must be greater than 0 and at most {MAX_PAYOUT}, got {value}")
    return result


def _parse_fraction_0_1(value: object) -> Fraction:
    """A share between 0 and 1 inclusive (commission, refund)."""
    result = _parse_number(value)
    if not 0 <= result <= 1:
        raise ValueError(f"must be between 0 and 1, got {value}")
    return result


Payout = Annotated[Fraction, BeforeValidator(_parse_payout)]
"""A payout figure "X to 1": the net win per unit staked, exact and > 0."""

Share = Annotated[Fraction, BeforeValidator(_parse_fraction_0_1)]
"""A share of the stake between 0 and 1 (commission, refund), exact."""

SideName = Literal["player", "banker"]


def _side(name: SideName) -> Side:
    return Side(name)


class _Bet(BaseModel):
    """Fields every bet has; subclasses add their payouts and a ``resolve``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(min_length=1, description="The operator's name for the bet, unique in the variant.")
    max_hand: PositiveInt | None = Field(
        default=None, description="Offered only on hands 1..max_hand of a shoe; absent = every hand."
    )

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a bet name must not be blank")
        return value

    @property
    def uses_super_round(self) -> bool:
        """Whether this bet pays differently in a Super 98 super round."""
        return False

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        raise NotImplementedError


class PlayerBet(_Bet):
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
            self.payout, None, self.super_round_payout_on_8_or_9, Side.PLAYER, facts, super_round
        )


class BankerBet(_Bet):
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
            self.payout, self.six_payout, self.super_round_payout_on_8_or_9, Side.BANKER, facts, super_round
        )


def _main_bet(
    payout: Fraction,
    six_payout: Fraction | None,
    super_payout: Fraction | None,
    side: Side,
    facts: RoundFacts,
    super_round: bool,
) -> Resolution:
    if facts.winner is Winner.TIE:
        return PUSH
    if not facts.won_by(side):
        return LOSE
    total = facts.total_of(side)
    if super_round and super_payout is not None and total >= 8:
        return _win(super_payout)
    if six_payout is not None and total == 6:
        return _win(six_payout)
    return _win(payout)


class TieBet(_Bet):
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
            return _win(self.super_round_payout_on_8_or_9)
        return _win(self.payout)


class PairBet(_Bet):
    """The side's first two cards share a rank (K-K yes, K-Q no; RULES.md)."""

    kind: Literal["pair"]
    side: SideName
    payout: Payout
    super_round_payout: Payout | None = Field(default=None, description="Super 98 super round payout.")

    @property
    def uses_super_round(self) -> bool:
        return self.super_round_payout is not None

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if not facts.pair_of(_side(self.side)):
            return LOSE
        if super_round and self.super_round_payout is not None:
            return _win(self.super_round_payout)
        return _win(self.payout)


class EitherPairBet(_Bet):
    """Either side's first two cards share a rank (seed 000 "Đôi Bất Kỳ")."""

    kind: Literal["either_pair"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return _win(self.payout) if facts.player_pair or facts.banker_pair else LOSE


class PerfectPairBet(_Bet):
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
            return _win(self.payout) if player else LOSE
        if self.side == "banker":
            return _win(self.payout) if banker else LOSE
        if player and banker and self.both_payout is not None:
            return _win(self.both_payout)
        return _win(self.payout) if player or banker else LOSE


class BigBet(_Bet):
    """Five or six cards dealt in the round (seeds 000, 002)."""

    kind: Literal["big"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return _win(self.payout) if facts.card_count >= 5 else LOSE


class SmallBet(_Bet):
    """Exactly four cards dealt (seeds 000, 002)."""

    kind: Literal["small"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        return _win(self.payout) if facts.card_count == 4 else LOSE


class BankerSixBet(_Bet):
    """Banker wins on a total of 6: Lucky 6 / Super 6 / Super 6+ / Tiger (seeds 000, 002-004).

    Pays ``two_card_payout`` when the Banker's 6 has two cards, ``three_card_payout`` with three.
    """

    kind: Literal["banker_six"]
    two_card_payout: Payout
    three_card_payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.winner is not Winner.BANKER or facts.banker_total != 6:
            return LOSE
        return _win(self.two_card_payout if facts.banker_cards == 2 else self.three_card_payout)


class SmallTigerBet(_Bet):
    """Banker wins with a two-card 6 (Small Tiger, seeds 000, 004)."""

    kind: Literal["small_tiger"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 6 and facts.banker_cards == 2
        return _win(self.payout) if won else LOSE


class BigTigerBet(_Bet):
    """Banker wins with a three-card 6 (Big Tiger; seed 004's text for it is Tiger Tie's, see RULES.md)."""

    kind: Literal["big_tiger"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 6 and facts.banker_cards == 3
        return _win(self.payout) if won else LOSE


class TieOnTotalBet(_Bet):
    """A tie on one given total: Tiger Tie (6) and Super Tie 0-9 (seeds 000, 004)."""

    kind: Literal["tie_on_total"]
    total: int = Field(ge=0, le=9)
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.TIE and facts.player_total == self.total
        return _win(self.payout) if won else LOSE


class TigerPairBet(_Bet):
    """Tiger Pair (seeds 000, 004): one side pairs; both sides pair; both pairs the same cards."""

    kind: Literal["tiger_pair"]
    one_pair_payout: Payout
    both_pairs_payout: Payout
    identical_pairs_payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        if facts.identical_pairs:
            return _win(self.identical_pairs_payout)
        if facts.player_pair and facts.banker_pair:
            return _win(self.both_pairs_payout)
        if facts.player_pair or facts.banker_pair:
            return _win(self.one_pair_payout)
        return LOSE


MarginKey = Annotated[int, Field(ge=1, le=9)]


class DragonBonusBet(_Bet):
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
        side = _side(self.side)
        if facts.winner is Winner.TIE:
            return PUSH if facts.player_natural and facts.banker_natural else LOSE
        if not facts.won_by(side):
            return LOSE
        if facts.natural_of(side):
            return _win(self.natural_win_payout)
        payout = self.margin_payouts.get(facts.margin)
        return LOSE if payout is None else _win(payout)


class PandaEightBet(_Bet):
    """Player wins with a three-card 8 (Panda 8, seed 000)."""

    kind: Literal["panda_8"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.PLAYER and facts.player_total == 8 and facts.player_cards == 3
        return _win(self.payout) if won else LOSE


class DragonSevenBet(_Bet):
    """Banker wins with a three-card 7 (Dragon 7 / Long 7, seed 000)."""

    kind: Literal["dragon_7"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        won = facts.winner is Winner.BANKER and facts.banker_total == 7 and facts.banker_cards == 3
        return _win(self.payout) if won else LOSE


class NaturalBet(_Bet):
    """The side's first two cards total 8 or 9.

    ``must_win: true`` (seed 000 "bài chuẩn", 4 to 1) also needs the side to win (a tie
    loses); ``must_win: false`` (seed 003 "Natural") pays on the natural alone.
    """

    kind: Literal["natural"]
    side: SideName
    payout: Payout
    must_win: bool

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        side = _side(self.side)
        won = facts.natural_of(side) and (not self.must_win or facts.won_by(side))
        return _win(self.payout) if won else LOSE


class NaturalTotalBet(_Bet):
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
        side = _side(self.side)
        if not (facts.natural_of(side) and facts.total_of(side) == self.total and facts.won_by(side)):
            return LOSE
        if super_round and self.super_round_payout is not None:
            return _win(self.super_round_payout)
        return _win(self.payout)


class EitherNaturalBet(_Bet):
    """The winner won with a natural (seed 000 "Bài chuẩn", 1.6 to 1); a tie loses."""

    kind: Literal["either_natural"]
    payout: Payout

    def resolve(self, facts: RoundFacts, super_round: bool) -> Resolution:
        winner = facts.winner
        if winner is Winner.TIE:
            return LOSE
        return _win(self.payout) if facts.natural_of(Side(winner.value)) else LOSE


class FirstCardBet(_Bet):
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
            return _win(self.payout)
        if comparison == 0:
            return PUSH if self.tie_refund == 1 else Resolution("lose", self.tie_refund - 1)
        return LOSE


class CowCowBet(_Bet):
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
        if not facts.won_by(_side(self.side)):
            return Resolution("lose", Fraction(-n))
        win = Fraction(n)
        if n == 9:
            win *= 1 - self.commission_on_nine
        return _win(win)


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


def _kind_of(cls: type[_Bet]) -> str:
    (kind,) = get_args(cls.model_fields["kind"].annotation)
    return str(kind)


BET_KINDS: Mapping[str, type[_Bet]] = {
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
