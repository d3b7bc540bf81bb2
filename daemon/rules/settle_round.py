"""Settle one round given its cards: validate them as a legal round, then resolve every bet.

For ``baccarat-edge rules settle`` (auditors and game-server developers checking their
own settlement). The cards are external input, so every problem is refused with a
:class:`RoundError` saying what is wrong, and an illegal draw names the third-card rule
it breaks. The settlement itself is the engine's: ``RoundOutcome.to_dict()`` (what
``daemon.engine.settle`` reproduces from the round facts) and :func:`resolve_bets`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from common.cards import Card, CardParseError, hand_total
from daemon.rules.bets import resolve_bets
from daemon.rules.outcome import RoundOutcome
from daemon.rules.resolution import Resolution
from daemon.rules.tableau import banker_draws, player_draws
from daemon.rules.variants import Variant


class RoundError(ValueError):
    """The cards given are not a legal round (the message says why)."""


@dataclass(frozen=True, slots=True)
class SettledRound:
    """A legal round and how every bet of the variant settles on it."""

    outcome: RoundOutcome
    super_round: bool
    bets: dict[str, Resolution]

    def to_dict(self) -> dict[str, object]:
        """The outcome summary, the super-round flag and every bet's resolution, JSON-ready."""
        return {
            **self.outcome.to_dict(),
            "super_round": self.super_round,
            "bets": {name: resolution.to_dict() for name, resolution in self.bets.items()},
        }


_LONGEST_CODE = 8  # "10h" with some spaces; longer text is not parsed (nor echoed whole)
_SHOWN = 40


def shown(value: object) -> str:
    """``repr(value)`` cut to a readable length: input is echoed in errors, never at any size."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def parse_cards(side: str, codes: Sequence[object]) -> tuple[Card, ...]:
    """Parse one side's card codes; a side holds two or three cards."""
    if not 2 <= len(codes) <= 3:
        raise RoundError(f"{side} has {len(codes)} card(s): a side holds 2 or 3")
    cards = []
    for code in codes:
        if not isinstance(code, str) or len(code) > _LONGEST_CODE:
            raise RoundError(f"{side} card {shown(code)} is not a card code (a string such as '8s')")
        try:
            cards.append(Card.parse(code))
        except CardParseError as exc:
            raise RoundError(f"{side}: {exc}") from None
    return tuple(cards)


def check_tableau(player: Sequence[Card], banker: Sequence[Card]) -> None:
    """Refuse a round the third-card rule does not produce, naming the rule broken."""
    p2, b2 = hand_total(player[:2]), hand_total(banker[:2])
    if p2 >= 8 or b2 >= 8:
        if len(player) == 3 or len(banker) == 3:
            raise RoundError(f"player has {p2} and banker has {b2}: a natural, neither side draws")
        return
    if player_draws(p2, b2) != (len(player) == 3):
        rule = "player must draw" if p2 <= 5 else "player stands"
        raise RoundError(f"player has {p2}: {rule}")
    third = player[2].points if len(player) == 3 else None
    draws = banker_draws(p2, b2, third)
    if draws != (len(banker) == 3):
        rule = "banker must draw" if draws else "banker stands"
        if third is None:
            raise RoundError(f"player stood and banker has {b2}: {rule}")
        raise RoundError(f"banker has {b2} and player's third card is {third}: {rule}")


def check_shoe(player: Sequence[Card], banker: Sequence[Card], decks: int) -> None:
    """Refuse a card dealt more often than a shoe of ``decks`` decks holds it."""
    for card, n in Counter([*player, *banker]).items():
        if n > decks:
            raise RoundError(f"{card.code} is dealt {n} times but a {decks}-deck shoe holds {decks}")


def super_round_die(variant: Variant, super_round: bool) -> int | None:
    """A die result making the round a super round or not, for variants that have them."""
    die = variant.super_round
    if not variant.needs_super_round_die or die is None:
        if super_round:
            raise RoundError(f"variant {variant.name!r} has no super rounds")
        return None
    if super_round:
        return die.super_faces[0]
    normal = [face for face in range(1, die.die_faces + 1) if face not in die.super_faces]
    if not normal:
        raise RoundError(f"variant {variant.name!r}: every face of its die makes a super round")
    return normal[0]


def settle_round(
    variant: Variant,
    player: Sequence[object],
    banker: Sequence[object],
    *,
    super_round: bool = False,
    decks: int | None = None,
) -> SettledRound:
    """Validate a round's card codes and resolve every bet of ``variant`` on it.

    ``decks``, when given, also refuses a card dealt more often than such a shoe holds.
    Raises :class:`RoundError` on any problem.
    """
    player_cards, banker_cards = parse_cards("player", player), parse_cards("banker", banker)
    check_tableau(player_cards, banker_cards)
    if decks is not None:
        check_shoe(player_cards, banker_cards, decks)
    outcome = RoundOutcome(player_cards, banker_cards)
    bets = resolve_bets(variant, outcome, super_round_die(variant, super_round))
    return SettledRound(outcome, super_round, bets)
