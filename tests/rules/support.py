"""Helpers shared by the rules tests."""

from __future__ import annotations

from daemon.cards import Card
from daemon.rules.outcome import RoundOutcome, play_round


def deal(codes: str) -> RoundOutcome:
    """Deal a round from card codes in shoe order; every card given must be used."""
    cards = [Card.parse(code) for code in codes.split()]
    outcome, used = play_round(cards)
    assert used == len(cards), f"round {codes!r} used {used} of {len(cards)} cards"
    return outcome
