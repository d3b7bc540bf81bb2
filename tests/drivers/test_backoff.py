"""The shared retry backoff (``common/backoff.py``): growth, cap, jitter, reset, no overflow."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.backoff import Backoff
from drivers.settings import ReconnectSettings


def test_equal_jitter_stays_between_half_the_ceiling_and_the_ceiling() -> None:
    backoff = Backoff(0.5, 8.0, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(8)]
    for delay, ceiling in zip(delays, [0.5, 1, 2, 4, 8, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert len({round(d, 6) for d in delays[4:]}) == 4  # jittered, not a fixed 8 s
    backoff.reset()
    assert 0.25 <= backoff.next_delay() <= 0.5


def test_symmetric_jitter_spreads_around_the_ceiling_like_the_reader_settings_say() -> None:
    backoff = ReconnectSettings(initial_delay=1, max_delay=8, factor=3, jitter=0.25).backoff(random.Random(3))
    delays = [backoff.next_delay() for _ in range(5)]
    for delay, ceiling in zip(delays, [1, 3, 8, 8, 8], strict=True):
        assert ceiling * 0.75 <= delay <= ceiling * 1.25
    assert len(set(delays)) == 5


def test_a_device_away_for_days_never_overflows() -> None:
    reconnect = ReconnectSettings(initial_delay=0.5, max_delay=600, factor=10, jitter=1.0)
    backoff = reconnect.backoff(random.Random(5))
    delays = [backoff.next_delay() for _ in range(5000)]  # 10**5000 would overflow a float
    assert all(0 <= d <= 1200 for d in delays)


def test_a_first_delay_above_the_cap_is_the_cap() -> None:
    backoff = Backoff(60.0, 10.0, low=1.0, high=1.0)
    assert [backoff.next_delay() for _ in range(3)] == [10.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial": 0.0, "maximum": 1.0}, "initial must be a positive number"),
        ({"initial": 1.0, "maximum": float("nan")}, "maximum must be a positive number"),
        ({"initial": 1.0, "maximum": 2.0, "factor": 0.5}, "factor must be at least 1"),
        ({"initial": 1.0, "maximum": 2.0, "low": 0.9, "high": 0.5}, "0 <= low <= high"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=60)
@given(
    initial=st.floats(0.01, 60),
    maximum=st.floats(0.01, 600),
    factor=st.floats(1, 10),
    jitter=st.floats(0, 1),
    seed=st.integers(0, 1000),
)
def test_every_delay_lies_within_the_jitter_of_a_ceiling_that_never_shrinks(
    initial: float, maximum: float, factor: float, jitter: float, seed: int
) -> None:
    backoff = Backoff.symmetric(initial, maximum, factor=factor, jitter=jitter, rng=random.Random(seed))
    ceiling = min(initial, maximum)
    for _ in range(40):
        delay = backoff.next_delay()
        assert ceiling * (1 - jitter) - 1e-9 <= delay <= ceiling * (1 + jitter) + 1e-9
        ceiling = min(maximum, ceiling * factor)
