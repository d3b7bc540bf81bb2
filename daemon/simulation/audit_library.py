"""The committed shoe-certificate fixtures: a short shoe dealt to its cut card, then the remainder
count.

Each is a one-deck Angel Eye shoe from the virtual dealer (``daemon.simulation.dealer``), dealt to
the round the cut card makes the last; after it the shoe's end certificate follows at once. With
a remainder count the supervisor then sends ``remainder_count`` ``step: start``, the dealer runs
the cards left in the shoe through the reader (burn-card frames), possibly one short or with one
card too many, and ``step: finish``: the certificate is issued again, balanced or naming the
missing or extra card (``shoe_count_mismatch``). ``baccarat-edge simulate --library DIR`` writes
them with the rest of ``hw-fixtures/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from common.cards import Card
from common.inputs import DeviceTarget
from daemon.simulation.dealer import DealSettings, FaultSpec, make_fixture
from drivers.fixtures import Fixture
from drivers.simulate import Action, ShoePlan

REMAINDER_CARD_GAP = 0.4
"""Seconds between two cards of the remainder count."""


class Count(StrEnum):
    """The remainder count a fixture ends with."""

    NONE = "none"  # no count: the end certificate only
    WHOLE = "whole"  # every card left in the shoe
    ONE_SHORT = "one_short"  # every card left but one (lost, or kept back)
    ONE_FOREIGN = "one_foreign"  # every card left and, among them, a copy of the shoe's first card


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One certificate fixture: the shoe (a one-deck shoe dealt to its cut card), its faults, the count."""

    name: str
    description: str
    covers: tuple[str, ...]
    count: Count
    deal: DealSettings = field(default_factory=lambda: DealSettings(seed=23, decks=1, cut_card_from_end=16))
    faults: tuple[FaultSpec, ...] = ()
    protocol: str = "angel_eye"

    def fixture(self) -> Fixture:
        return make_fixture(
            self.name,
            self.protocol,
            self.deal,
            self.faults,
            description=self.description,
            covers=self.covers,
            extend=self._count,
        )

    def _count(self, plan: ShoePlan) -> None:
        """Append the remainder count after the shoe's last action."""
        if self.count is Count.NONE:
            return
        cards: list[Card] = list(plan.remaining)
        if self.count is Count.ONE_SHORT:
            del cards[len(cards) // 2]
        elif self.count is Count.ONE_FOREIGN:
            first = next(a.card for a in plan.actions if a.kind == "draw" and a.card is not None)
            cards.insert(len(cards) // 2, first)  # one copy more than the one deck holds
        t = max(a.t for a in plan.actions) + 5.0
        start = {"action": "remainder_count", "args": {"step": "start"}}
        plan.actions.append(Action(t, "supervisor", supervisor=start))
        for k, card in enumerate(cards, start=1):
            plan.actions.append(
                Action(t + k * REMAINDER_CARD_GAP, "draw", card=card, target=DeviceTarget.BURN)
            )
        finish = {"action": "remainder_count", "args": {"step": "finish"}}
        plan.actions.append(
            Action(t + (len(cards) + 2) * REMAINDER_CARD_GAP, "supervisor", supervisor=finish)
        )


AUDIT_LIBRARY: tuple[AuditEntry, ...] = (
    AuditEntry("angel_eye-cert-clean", "One-deck shoe dealt to the cut card: its certificate, no count.",
               ("shoe certificate at the shoe's end",), Count.NONE),
    AuditEntry("angel_eye-cert-remainder", "As cert-clean, then every card left is counted: balanced.",
               ("remainder count: every card of the deck accounted for",), Count.WHOLE),
    AuditEntry("angel_eye-cert-missing-card",
               "As cert-clean, then the remainder count is one card short: that card is named missing.",
               ("remainder count: a missing card", "shoe_count_mismatch"), Count.ONE_SHORT),
    AuditEntry("angel_eye-cert-foreign-card",
               "As cert-clean; the remainder count finds a second copy of the shoe's first card among the "
               "cards left: that card is named extra.",
               ("remainder count: a foreign card", "shoe_count_mismatch"), Count.ONE_FOREIGN),
)  # fmt: skip
