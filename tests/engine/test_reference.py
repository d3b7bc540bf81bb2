"""The engine against the reference dealer: clean shoes under every setting combination."""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from common.inputs import CardRead, DeviceTarget, EngineInput
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from tests.engine.reference import CARD_GAP, ROUND_GAP, Dealt, deal_shoe, project, shuffled_shoe
from tests.engine.support import assert_legal, assert_restores, variant

VARIANTS = ["standard", "no-commission", "ez", "tiger", "super-98", "cow-cow", "seed-000"]

# Timing settings the reference models: the unneeded-card window is shorter than the betting
# interval between rounds (ROUND_GAP + CARD_GAP, so no clean card is unneeded; 0 disables it),
# a pull's window is longer than the spread of its reads (at most 0.04 s here) and shorter than
# the time to the next pull (CARD_GAP: a longer one cannot tell two pulls apart), a resend comes
# 0.01 s after its read (dropped while the duplicate window is open).
table_settings = st.builds(
    lambda decks, counts, ace, face, per_round, per_round_cards, policy, verdict, timing: (
        TableSettings.model_validate(
            {
                "decks": decks,
                "burn": {"indicator_counts": counts, "ace_burns": ace, "face_burns": face},
                "burn_before_each_round": per_round,
                "round_burn_cards": per_round_cards,
                "cut_card_policy": policy,
                "await_device_verdict": verdict,
                **timing,
            }
        )
    ),
    st.sampled_from([1, 2, 6, 8]),
    st.booleans(),
    st.sampled_from([1, 11]),
    st.sampled_from([10, 13]),
    st.booleans(),
    st.sampled_from([1, 2]),
    st.sampled_from(["finish_current_round", "one_more_round"]),
    st.booleans(),
    st.fixed_dictionaries(
        {
            "unneeded_card_window_s": st.sampled_from([0.0, 1.5, 5.0, ROUND_GAP]),
            "device_starts_shoe": st.booleans(),
            "pull_hold_window_s": st.sampled_from([0.05, 0.3, 0.9]),
            "duplicate_window_s": st.sampled_from([0.05, 2.0, 30.0]),
            "duplicate_memory": st.sampled_from([1, 8, 64]),
        }
    ),
)


def _deal(cfg: TableSettings, variant_name: str, seed: int) -> Dealt:
    """A clean shoe; started by the reader's first-card mark when ``device_starts_shoe``."""
    rng = random.Random(seed)
    cards = shuffled_shoe(cfg.decks, rng)
    first_round = 1 + cfg.burn_count(int(cards[0].rank)) + 1
    lo, hi = max(first_round, len(cards) - 90), len(cards) - 22
    return deal_shoe(
        cfg,
        variant(variant_name),
        cards,
        rng.randint(lo, hi),
        dies=rng,
        started_by_device=cfg.device_starts_shoe,
    )


def _with_resends(inputs: list[EngineInput], rng: random.Random) -> list[EngineInput]:
    """Some reads sent twice by the shoe (same transmission id and card, 0.01 s later)."""
    out: list[EngineInput] = []
    for x in inputs:
        out.append(x)
        if isinstance(x, CardRead) and rng.random() < 0.2:
            out.append(x._replace(at=x.at + 0.01))
    return out


@settings(max_examples=80)
@given(
    cfg=table_settings,
    variant_name=st.sampled_from(VARIANTS),
    seed=st.integers(0, 2**32),
    resends=st.booleans(),
)
def test_engine_events_equal_the_reference_dealers(
    cfg: TableSettings, variant_name: str, seed: int, resends: bool
) -> None:
    dealt = _deal(cfg, variant_name, seed)
    eng = Engine(cfg, variant(variant_name))
    inputs = _with_resends(dealt.inputs, random.Random(seed)) if resends else dealt.inputs
    events = []
    for inp in inputs:
        events.extend(eng.handle(inp))
    assert [project(e) for e in events] == dealt.expected
    assert_legal(events, cfg.decks)
    assert_restores(eng, events)


def test_a_full_eight_deck_shoe_deals_every_round_to_the_cut_card() -> None:
    cfg = TableSettings()
    dealt = _deal(cfg, "standard", 20261129)
    eng = Engine(cfg, variant("standard"))
    events = [e for inp in dealt.inputs for e in eng.handle(inp)]
    assert [project(e) for e in events] == dealt.expected
    completed = [e for e in events if e.kind == "round_completed"]
    assert len(completed) == len(dealt.rounds) > 50
    assert [e.kind for e in events[-2:]] == ["shoe_ended", "shoe_certificate"]
    assert eng.snapshot()["shoe"]["phase"] == "over"


def test_restoring_from_the_current_shoe_alone_resumes_the_same_game() -> None:
    """What the journal keeps after compacting finished shoes is enough to resume."""
    cfg = TableSettings()
    rng = random.Random(7)
    eng = Engine(cfg, variant("standard"))
    first = deal_shoe(cfg, variant("standard"), shuffled_shoe(8, rng), 380, shoe_id="S1").inputs
    second = deal_shoe(cfg, variant("standard"), shuffled_shoe(8, rng), 380, shoe_id="S2").inputs
    events = [e for inp in first + second[:40] for e in eng.handle(inp)]
    start = max(i for i, e in enumerate(events) if e.kind == "shoe_started")
    resumed = Engine.restore(cfg, variant("standard"), events[start:])
    keys = ("shoe", "hand", "round", "offered_bets", "held_rounds", "alerts")
    assert {k: resumed.snapshot()[k] for k in keys} == {k: eng.snapshot()[k] for k in keys}
    rest = second[40:]
    assert [e.to_dict() for inp in rest for e in resumed.handle(inp)] == [
        e.to_dict() for inp in rest for e in eng.handle(inp)
    ]


def _as_pulls(inputs: list[EngineInput], rng: random.Random) -> list[EngineInput]:
    """Group runs of consecutive card reads of one deal sequence into pulls of 2-3 cards that
    arrive in a random order with their positions (daemon/rules/RULES.md dealing mistake 3)."""
    out: list[EngineInput] = []
    i = 0
    while i < len(inputs):
        k = rng.choice([1, 2, 3])
        group = inputs[i : i + k]
        same_run = all(isinstance(x, CardRead) for x in group) and all(
            b.at - a.at == CARD_GAP for a, b in itertools.pairwise(group)
        )
        if k == 1 or not same_run:
            out.append(inputs[i])
            i += 1
            continue
        first = group[0].at
        pulled: list[EngineInput] = [
            x._replace(at=first, position=n + 1) for n, x in enumerate(group) if isinstance(x, CardRead)
        ]
        rng.shuffle(pulled)
        out.extend(pulled)
        i += k
    return out


def _without_timing(event: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in event["data"].items() if k != "decided_at"}
    return event | {"data": data}


@settings(max_examples=40)
@given(cfg=table_settings, seed=st.integers(0, 2**32))
def test_pulled_cards_in_any_arrival_order_give_the_reference_result(cfg: TableSettings, seed: int) -> None:
    dealt = _deal(cfg, "standard", seed)
    eng = Engine(cfg, variant("standard"))
    inputs = _as_pulls(dealt.inputs, random.Random(seed))
    events = [e for inp in inputs for e in eng.handle(inp)]
    game = [project(e) for e in events if e.kind not in ("read_held", "pull_released")]
    assert [_without_timing(e) for e in game] == [_without_timing(e) for e in dealt.expected]
    assert_legal(events, cfg.decks)
    assert_restores(eng, events)


_TARGETS = {"indicator": DeviceTarget.FIRST_CARD, "burn": DeviceTarget.BURN} | {
    s: DeviceTarget(s) for s in ("P1", "B1", "P2", "B2", "P3", "B3")
}


def _as_target_pulls(dealt: Dealt, rng: random.Random) -> list[EngineInput]:
    """Angel Eye style: every read names its slot (target/index) and no position. Runs of 2-3
    cards of one round come out together and arrive in a random order, 20 ms apart."""
    # The reference's card_dealt events are in the order of its card reads.
    slots = iter(e["data"]["slot"] for e in dealt.expected if e["kind"] == "card_dealt")
    inputs = [
        x._replace(target=_TARGETS[next(slots)]) if isinstance(x, CardRead) else x for x in dealt.inputs
    ]
    out: list[EngineInput] = []
    i = 0
    while i < len(inputs):
        k = rng.choice([1, 2, 3])
        group = inputs[i : i + k]
        reads = [x for x in group if isinstance(x, CardRead)]
        same_run = (
            len(reads) == len(group)
            and all(x.target is not None and x.target.value[0] in "PB" for x in reads)
            and all(b.at - a.at == CARD_GAP for a, b in itertools.pairwise(reads))
        )
        if k == 1 or not same_run:
            out.append(inputs[i])
            i += 1
            continue
        rng.shuffle(reads)
        out.extend(x._replace(at=group[0].at + n * 0.02) for n, x in enumerate(reads))
        i += k
    return out


@settings(max_examples=40)
@given(cfg=table_settings, seed=st.integers(0, 2**32))
def test_pulls_from_a_reader_naming_slots_are_ordered_by_target_and_give_the_reference_result(
    cfg: TableSettings, seed: int
) -> None:
    dealt = _deal(cfg, "standard", seed)
    eng = Engine(cfg, variant("standard"))
    inputs = _as_target_pulls(dealt, random.Random(seed))
    events = [e for inp in inputs for e in eng.handle(inp)]
    assert not [e for e in events if e.kind == "alert_raised"]
    game = [project(e) for e in events if e.kind not in ("read_held", "pull_released")]
    assert [_without_timing(e) for e in game] == [_without_timing(e) for e in dealt.expected]
    assert_legal(events, cfg.decks)
    assert_restores(eng, events)


def test_the_reference_settles_the_standard_variant_by_itself_and_catches_a_settlement_bug(
    monkeypatch: Any,
) -> None:
    """The reference works out outcomes and standard bets on its own: a wrong payout in the rules
    core (here Banker paid even money, no commission) makes the engine differ from it."""
    from daemon.rules.bets import resolve_bets
    from daemon.rules.resolution import Resolution
    from daemon.rules.variants import load_variant_by_name

    cfg = TableSettings()
    dealt = _deal(cfg, "standard", 7)
    real = resolve_bets

    def banker_pays_even_money(*args: Any, **kwargs: Any) -> dict[str, Resolution]:
        resolved = dict(real(*args, **kwargs))
        if resolved["Banker"].outcome == "win":
            resolved["Banker"] = real(variant("no-commission"), *args[1:], **kwargs)["Banker"]
        return resolved

    monkeypatch.setattr("daemon.engine.settle.resolve_bets", banker_pays_even_money)
    eng = Engine(cfg, load_variant_by_name("standard"))  # a fresh variant: no settlement memoised yet
    events = [e for inp in dealt.inputs for e in eng.handle(inp)]
    differing = [
        (got["data"]["bets"]["Banker"], want["data"]["bets"]["Banker"])
        for got, want in zip([project(e) for e in events], dealt.expected, strict=True)
        if got != want
    ]
    assert differing  # caught
    assert all(want["multiplier"] == "19/20" for _, want in differing)
