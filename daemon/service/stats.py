"""The service's counters: reported in health (``devices.engine``) and in the demo's summary."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RunnerStats:
    """Counters of the engine thread and the journal writer (written by the engine thread only)."""

    inputs: int = 0
    processed: int = 0
    events: int = 0
    commands: int = 0
    journal_errors: int = 0
    engine_errors: int = 0
    storage_transitions: int = 0
    inputs_not_stored: int = 0  # only at shutdown with a failing journal, each one logged
    queue_depth_warnings: int = 0
    started_at: float = 0.0
    events_by_kind: dict[str, int] = field(default_factory=dict)
