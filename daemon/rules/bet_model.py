"""What every bet of the catalogue has: a name, an optional hand limit, a ``resolve``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator

from daemon.rules.outcome import RoundFacts, Side
from daemon.rules.resolution import Resolution

SideName = Literal["player", "banker"]


def side_of(name: SideName) -> Side:
    """The outcome side a bet's ``side`` field names."""
    return Side(name)


class BetModel(BaseModel):
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
