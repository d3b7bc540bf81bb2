"""Capacity: the early warning speaks at ``warn_fraction`` of each limit, before full."""

from __future__ import annotations

import pytest

from daemon.journal import Capacity


def capacity(size: int = 0, undelivered: int = 0, oldest_at: float | None = None) -> Capacity:
    return Capacity(
        size_bytes=size,
        max_bytes=1000,
        undelivered=undelivered,
        max_undelivered=100,
        oldest_undelivered_at=oldest_at,
        max_undelivered_age_s=3600.0,
        now=10_000.0,
        warn_fraction=0.8,
    )


def test_no_warning_below_every_fraction() -> None:
    c = capacity(size=799, undelivered=79, oldest_at=10_000.0 - 2879.0)
    assert c.warning is None
    assert not c.full


@pytest.mark.parametrize(
    ("c", "words"),
    [
        (capacity(size=800), "journal size 800 bytes is 80% of the limit of 1000"),
        (capacity(undelivered=85), "85 undelivered events are 85% of the limit of 100"),
        (
            capacity(oldest_at=10_000.0 - 2880.0),
            "oldest undelivered event is 2880 s old, 80% of the age limit",
        ),
    ],
)
def test_warning_names_the_limit_before_it_is_full(c: Capacity, words: str) -> None:
    assert c.warning is not None
    assert c.warning.startswith(words)
    assert not c.full


def test_a_full_journal_still_warns() -> None:
    c = capacity(size=1000)
    assert c.full
    assert c.warning is not None
