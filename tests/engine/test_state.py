"""The engine's tabulated next slot (``RoundState.next_slot``) equals the rules core's
``next_slot``, by exact enumeration."""

from __future__ import annotations

import itertools

from common.cards import Card
from daemon.engine.rounds import RoundState
from daemon.rules.outcome import next_slot

# One card per point value (suits and ranks beyond points do not matter to the draw).
BY_POINTS = [Card.parse(code) for code in ("Tc", "Ac", "2c", "3c", "4c", "5c", "6c", "7c", "8c", "9c")]
ORDER = ("P1", "B1", "P2", "B2", "P3", "B3")


def test_next_slot_matches_the_rules_core_for_every_deal_by_points() -> None:
    checked = 0
    for first4 in itertools.product(BY_POINTS, repeat=4):
        rnd = RoundState(
            hand=1, opened_at=0.0, cards=dict(zip(ORDER[:4], (c.code for c in first4), strict=True))
        )
        player, banker = [first4[0], first4[2]], [first4[1], first4[3]]
        expected = next_slot(player, banker)
        assert rnd.next_slot() == (None if expected is None else expected.value)
        checked += 1
        if expected is None:
            continue
        for third in BY_POINTS:
            slot = expected.value
            five = dict(rnd.cards) | {slot: third.code}
            p5 = [*player, third] if slot == "P3" else player
            b5 = [*banker, third] if slot == "B3" else banker
            rules5 = next_slot(p5, b5)
            assert RoundState(1, 0.0, cards=five).next_slot() == (None if rules5 is None else rules5.value)
            checked += 1
    for k in range(4):
        assert RoundState(1, 0.0, cards=dict(zip(ORDER[:k], ["9c"] * k, strict=True))).next_slot() == ORDER[k]
    assert checked > 10_000
