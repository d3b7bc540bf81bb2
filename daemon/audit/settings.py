"""The irregular-shoe detectors' settings (the ``audit.irregular:`` section of the table config)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from daemon.audit.null_tables import NULL_TABLES
from daemon.rules.outcome import Winner

MIN_SIMULATED_TAIL_SHOES = 10
"""A simulated threshold needs at least this many simulated shoes expected beyond it."""


class IrregularSettings(BaseModel):
    """How sensitive the irregular-shoe detectors are, and how far back they look."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Run the detectors at the end of each shoe.")
    alpha: float = Field(
        default=0.002,
        gt=0.0,
        lt=0.5,
        description="False-alarm rate per fair shoe allowed to each detector (0 < alpha < 0.5).",
    )
    decks: int = Field(default=8, ge=1, le=12, description="Decks in the shoe (must match the table).")
    cut_card_from_end: int = Field(
        default=16, ge=0, le=104, description="Where the cut card is placed, in cards from the end."
    )
    recent_shoes: int = Field(
        default=5, ge=0, le=50, description="Earlier shoes of this table compared for repeated stretches."
    )

    @model_validator(mode="after")
    def _simulated_tables_cover(self) -> IrregularSettings:
        table = NULL_TABLES.get(self.decks)
        if table is None:
            known = ", ".join(str(d) for d in sorted(NULL_TABLES))
            raise ValueError(
                f"decks: no simulated null table for {self.decks} decks (tables exist for {known})"
            )
        if self.cut_card_from_end < table.cut_card_from_end:
            raise ValueError(
                f"cut_card_from_end: {self.cut_card_from_end} deals more cards than the simulated "
                f"table assumes (cut card {table.cut_card_from_end} from the end); "
                "place it at least that far from the end"
            )
        # the outcome-run detector spends a third of alpha on each winner's run
        floor = MIN_SIMULATED_TAIL_SHOES * len(Winner) / table.shoes
        if self.alpha < floor:
            raise ValueError(
                f"alpha: {self.alpha} is below {floor:g}, the smallest rate the {table.shoes:,} "
                f"simulated shoes of the {self.decks}-deck table resolve "
                f"(at least {MIN_SIMULATED_TAIL_SHOES} beyond a third of it)"
            )
        return self


class IrregularSection(BaseModel):
    """The table config's ``audit.irregular:`` section: :class:`IrregularSettings` without
    ``decks``, which the engine takes from each shoe (:meth:`for_decks`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Run the detectors at the end of each shoe.")
    alpha: float = Field(
        default=0.002,
        gt=0.0,
        lt=0.5,
        description="False-alarm rate per fair shoe allowed to each detector (0.0015 <= alpha < 0.5).",
    )
    cut_card_from_end: int = Field(
        default=16,
        ge=0,
        le=104,
        description="Where the dealer places the cut card, in cards from the end (at least 16).",
    )
    recent_shoes: int = Field(
        default=5, ge=0, le=50, description="Earlier shoes of this table compared for repeated stretches."
    )

    @model_validator(mode="after")
    def _valid_for_a_full_table(self) -> IrregularSection:
        # the same checks as the detectors' settings, with the committed 8-deck table (every
        # committed table has as many simulated shoes, so alpha's floor is the same)
        IrregularSettings(**self.model_dump(), decks=8)
        return self

    def for_decks(self, decks: int) -> IrregularSettings | None:
        """The detectors' settings for a shoe of ``decks`` decks; None when no simulated null
        table exists for that many decks (the detectors then do not run)."""
        return _for_decks(self, decks)


@lru_cache(maxsize=16)
def _for_decks(section: IrregularSection, decks: int) -> IrregularSettings | None:
    # every shoe's end asks again: validate each (section, decks) once
    if decks not in NULL_TABLES:
        return None
    return IrregularSettings(**section.model_dump(), decks=decks)


class AuditSettings(BaseModel):
    """The table config's ``audit:`` section: the shoe's audit at its end."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    irregular: IrregularSection = IrregularSection()
