"""Helpers shared by the rules tests."""

from __future__ import annotations

from common.cards import Card
from daemon.rules.outcome import RoundOutcome, play_round


def deal(codes: str) -> RoundOutcome:
    """Deal a round from card codes in shoe order; every card given must be used."""
    cards = [Card.parse(code) for code in codes.split()]
    outcome, used = play_round(cards)
    assert used == len(cards), f"round {codes!r} used {used} of {len(cards)} cards"
    return outcome


# The counts issue 2 requires in `rules enumerate --json`.
REQUIRED_KEYS = (
    ["banker_win", "player_win", "tie"]
    + [f"banker_win_total_{t}" for t in range(1, 10)]
    + [f"player_win_total_{t}" for t in range(1, 10)]
    + [f"tie_total_{t}" for t in range(10)]
    + [f"banker_win_by_{m}" for m in range(1, 10)]
    + [f"player_win_by_{m}" for m in range(1, 10)]
    + ["banker_natural_win", "player_natural_win", "natural_tie"]
    + ["banker_win_six_two_cards", "banker_win_six_three_cards"]
    + ["banker_win_three_card_seven", "player_win_three_card_eight"]
    + ["cards_4", "cards_5", "cards_6"]
    + ["player_pair", "banker_pair", "either_pair", "both_pairs", "perfect_pair_either"]
)
