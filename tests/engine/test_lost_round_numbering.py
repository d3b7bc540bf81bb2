"""Hand numbering after lost rounds (issue 21, item 8): a side bet offered only on the first N
hands of a shoe ends on the physical round count, the rounds dealt unseen (server round ids
skipped while the edge was down) included; the edge's own hand numbers are never renumbered."""

from __future__ import annotations

from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.rules.variants import Variant
from tests.engine.support import assert_restores, cmd, feed, of_kind, read, roundtrip, start_shoe

LIMITED = Variant.model_validate(
    {
        "name": "limited",
        "bets": [
            {"name": "Player", "kind": "player", "payout": 1},
            {"name": "Banker", "kind": "banker", "payout": 0.95},
            {"name": "Big", "kind": "big", "payout": 0.5, "max_hand": 3},
        ],
    }
)
SETTINGS = TableSettings.model_validate({"game_flow": "betting_window"})
NATURAL = ("8c", "2d", "Kh", "3s")  # Player 8, Banker 5: decided on four cards


def _round(eng: Engine, round_id: str, at: float) -> list[Event]:
    out = feed(eng, [cmd("open_betting", at, f"o{round_id}", round_id=round_id)])
    out += feed(eng, [cmd("close_betting", at + 5, f"c{round_id}", round_id=round_id)])
    out += feed(eng, [read(c, at + 10 + k) for k, c in enumerate(NATURAL)])
    return out


def _opened(out: list[Event]) -> list[tuple[int, str | None, bool]]:
    return [
        (e.data["hand"], e.data.get("round_id"), "Big" in e.data["bets"])
        for e in of_kind(out, "round_opened")
    ]


def test_a_first_n_hands_bet_ends_on_the_physical_round_count() -> None:
    eng = Engine(SETTINGS, LIMITED)
    out = start_shoe(eng)
    out += _round(eng, "T-1", 10)
    # the edge is down while round T-2 is dealt: it comes back to the server opening T-3
    out += _round(eng, "T-3", 100)
    out += _round(eng, "T-4", 200)
    # hand 2 is physical round 3 (the last with Big); hand 3 is round 4: Big no longer offered
    assert _opened(out) == [(1, "T-1", True), (2, "T-3", True), (3, "T-4", False)]
    completed = {e.data["hand"]: e.data["bets"] for e in of_kind(out, "round_completed")}
    assert "Big" in completed[1]
    assert "Big" not in completed[3]  # settled by what was offered on it
    assert of_kind(out, "bets_offered")[-1].data == {"hand": 4, "bets": ["Player", "Banker"]}
    assert eng.state.rounds_lost == 1
    assert_restores(eng, out)
    again = Engine.restore(SETTINGS, LIMITED, roundtrip(out))
    assert again.state.rounds_lost == 1


def test_without_lost_rounds_the_limit_counts_the_edge_hands_and_a_new_shoe_starts_at_zero() -> None:
    eng = Engine(SETTINGS, LIMITED)
    out = start_shoe(eng)
    for k, round_id in enumerate(("T-1", "T-2", "T-3", "T-4")):
        out += _round(eng, round_id, 10 + 100 * k)
    assert [big for _h, _r, big in _opened(out)] == [True, True, True, False]
    # a held round opened after a skip is settled by its own physical number, even if resolved later
    eng2 = Engine(SETTINGS, LIMITED)
    out2 = start_shoe(eng2)
    out2 += _round(eng2, "T-1", 10)
    out2 += _round(eng2, "T-5", 100)  # three rounds lost: hand 2 is round 5
    assert _opened(out2)[-1] == (2, "T-5", False)
    (skip,) = [e for e in out2 if e.kind == "alert_raised" and e.data["code"] == "round_id_out_of_sequence"]
    held = eng2.state.held[2]
    assert held.physical == 5
    out2 += feed(eng2, [cmd("resolve_hold", 200, "ok", hand=2)])
    (done,) = [e for e in of_kind(out2, "round_completed") if e.data["hand"] == 2]
    assert "Big" not in done.data["bets"]
    assert skip.data["holds"] == "next_round"
    out2 += feed(eng2, [cmd("new_shoe", 300, "next", shoe_id="S2")])
    assert eng2.state.rounds_lost == 0


def test_a_skip_before_the_shoes_first_round_is_not_counted() -> None:
    """The server's ids run on across shoes: ids skipped before a shoe's first round may be the last
    shoe's rounds, so they do not end this shoe's offers early."""
    eng = Engine(SETTINGS, LIMITED)
    out = start_shoe(eng)
    out += _round(eng, "T-1", 10)
    out += feed(eng, [cmd("new_shoe", 50, "S2", shoe_id="S2")])
    out += feed(eng, [read(c, 51 + k) for k, c in enumerate(("2c", "Kd", "Kh"))])  # indicator, burns
    out += _round(eng, "T-9", 100)
    assert eng.state.rounds_lost == 0
    assert _opened(out)[-1] == (1, "T-9", True)
