"""Engine checkpoints: a checkpoint (through JSON) plus the events after it restores exactly the
engine that folding every event gives, whatever happened before it (held rounds, open alerts,
held pull reads, duplicate memory, a full journal, other decks and variant)."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.inputs import EngineInput, SupervisorCommand
from daemon.engine.checkpoint import CheckpointError, EngineCheckpoint, capture, fold_key
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from tests.engine.reference import deal_shoe, shuffled_shoe
from tests.engine.support import read, roundtrip, start_shoe, variant
from tests.engine.test_properties import FAULTS, _any_input, _inject


def _resume(live: Engine, before: list[Event], after: list[Event]) -> Engine:
    """The engine from a checkpoint of ``live`` taken after ``before``, plus ``after``."""
    at = before[-1].at if before else 0.0
    checkpoint = EngineCheckpoint.from_json(json.loads(json.dumps(capture(live, at).to_json())))
    return Engine.restore(
        live.configured_settings, live.configured_variant, roundtrip(after), variant, start=checkpoint
    )


def _check_split(cfg: TableSettings, variant_name: str, inputs: list[EngineInput], split: int) -> None:
    live = Engine(cfg, variant(variant_name))
    before = [e for inp in inputs[:split] for e in live.handle(inp)]
    at_split = Engine.restore(cfg, variant(variant_name), roundtrip(before), variant)
    resumed_empty = _resume(live, before, [])
    assert resumed_empty.state.comparable() == at_split.state.comparable()
    after = [e for inp in inputs[split:] for e in live.handle(inp)]
    full = Engine.restore(cfg, variant(variant_name), roundtrip(before + after), variant)
    resumed = Engine.restore(
        cfg,
        variant(variant_name),
        roundtrip(after),
        variant,
        start=capture(at_split, before[-1].at if before else 0.0),
    )
    assert resumed.state.comparable() == full.state.comparable() == live.state.comparable()
    assert resumed.snapshot() == full.snapshot() == live.snapshot()
    # and both deal on alike
    probe = read("9h", 10_000.0)
    assert resumed.handle(probe) == full.handle(probe)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    decks=st.sampled_from([1, 8]),
    start=st.booleans(),
    inputs=st.lists(_any_input, max_size=60),
    split=st.floats(0, 1),
)
def test_a_checkpoint_and_the_events_after_it_give_the_full_fold(
    decks: int, start: bool, inputs: list[EngineInput], split: float
) -> None:
    cfg = TableSettings(decks=decks, unneeded_card_window_s=2.0, device_starts_shoe=True)
    prefix: list[EngineInput] = [SupervisorCommand("new_shoe", 0.0, "t", "start", {})] if start else []
    ordered = prefix + sorted(inputs, key=lambda x: x.at if math.isfinite(x.at) else 25.0)
    _check_split(cfg, "standard", ordered, round(split * len(ordered)))


@settings(max_examples=40, deadline=None)
@given(
    variant_name=st.sampled_from(["standard", "super-98"]),
    per_round_burn=st.booleans(),
    seed=st.integers(0, 2**32),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=15),
    split=st.floats(0, 1),
)
def test_a_checkpoint_mid_shoe_with_faults_gives_the_full_fold(
    variant_name: str, per_round_burn: bool, seed: int, faults: list[str], split: float
) -> None:
    cfg = TableSettings(decks=2, burn_before_each_round=per_round_burn, await_device_verdict=True)
    rng = random.Random(seed)
    cards = shuffled_shoe(2, rng)
    clean = deal_shoe(cfg, variant(variant_name), cards, len(cards) - 30, dies=rng).inputs
    inputs, _ = _inject(clean, rng, faults)
    _check_split(cfg, variant_name, inputs, round(split * len(inputs)))


def test_a_checkpoint_is_refused_under_other_settings_and_when_a_field_cannot_be_carried() -> None:
    eng = Engine(TableSettings(), variant())
    events = start_shoe(eng)
    checkpoint = capture(eng, events[-1].at)
    assert checkpoint.key == fold_key(TableSettings())
    with pytest.raises(CheckpointError, match="other fold code or settings"):
        Engine.restore(TableSettings(decks=6), variant(), [], start=checkpoint)
    eng.state.offered_bets = {"Player"}  # type: ignore[assignment]  # a set: not plain data
    with pytest.raises(CheckpointError, match="not plain data"):
        capture(eng, 0.0)


def test_a_malformed_checkpoint_text_is_a_checkpoint_error() -> None:
    for text in ("", "[]", '{"format": 99}', '{"format": 1, "key": "k"}'):
        with pytest.raises(CheckpointError):
            EngineCheckpoint.from_json(text)
    eng = Engine(TableSettings(), variant())
    start_shoe(eng)
    data = json.loads(capture(eng, 1.0).to_json())
    del data["state"]["cards_out"]
    with pytest.raises(CheckpointError, match="missing"):
        EngineCheckpoint.from_json(json.dumps(data)).table_state(TableSettings())


def test_dicts_keyed_by_numbers_or_tuples_keep_their_keys_and_order() -> None:
    eng = Engine(TableSettings(), variant())
    start_shoe(eng)
    eng.handle(read("9s", 50, transmission_id="3"))
    eng.handle(read("8h", 51, transmission_id="4"))
    eng.state.dies = {3: 5, 1: 2}  # a field keyed by hand numbers, in this order
    restored = EngineCheckpoint.from_json(capture(eng, 51.0).to_json()).table_state(TableSettings())
    assert list(restored.recent) == [("reader", "3", "9s"), ("reader", "4", "8h")]
    assert list(restored.dies.items()) == [(3, 5), (1, 2)]
