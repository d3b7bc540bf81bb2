"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.broker import MosquittoBroker

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile("default")

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A fresh anonymous mosquitto on its own port, stopped after the test."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
