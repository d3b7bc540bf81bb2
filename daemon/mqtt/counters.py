"""The publisher's monotonic counters, reported in ``health``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counters:
    """Monotonic counters reported in ``health``."""

    published: int = 0
    acknowledged: int = 0
    dead_lettered: int = 0
    connects: int = 0
    connection_failures: int = 0
    delivery_retries: int = 0
    commands_accepted: int = 0
    commands_refused: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))
