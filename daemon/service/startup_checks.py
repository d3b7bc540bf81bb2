"""The start-up self-checks and the gate that holds card events from the broker.

No event is published before the start-up self-checks have run, in this order:

1. ``config``: the config file validated (done before the daemon is built);
2. ``journal_tail``: the journal opened, its continuity checked and its events folded;
3. ``attestation``: the installed files checked against the signed manifest
   (:mod:`daemon.service.attestation`), *before* any device starts, so no card can be read,
   let alone journaled, before the verdict;
4. ``device_probe``: every reader and the camera built and started.

Until then the publisher holds every event (the birth ``status`` and ``health`` go out: health
says ``startup: {stage, passed}``). After them, it holds the events journaled after an open
``integrity_failed`` alert (:meth:`PublishGate.hold_integrity`): journaled, so nothing read is
lost, and published in ``seq`` order once a supervisor's ``attest`` finds the files intact.
"""

from __future__ import annotations

import threading
from typing import TypedDict

STAGES = ("config", "journal_tail", "attestation", "device_probe")
"""The start-up self-checks, in the order they run."""


class StartupHealth(TypedDict):
    """Health ``startup``: the check running (``done`` once all ran) and those passed."""

    stage: str
    passed: list[str]
    failed: list[str]


class PublishGate:
    """Which events the publisher may send (any thread; the drain thread asks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage = STAGES[0]
        self._passed: list[str] = []
        self._failed: list[str] = []
        self._integrity_hold: int | None = None

    def begin(self, stage: str) -> None:
        """The check ``stage`` starts (the ones before it passed, or failed by :meth:`fail`)."""
        with self._lock:
            self._stage = stage

    def passed(self, stage: str) -> None:
        with self._lock:
            self._passed.append(stage)

    def fail(self, stage: str) -> None:
        with self._lock:
            self._failed.append(stage)

    def startup_done(self) -> None:
        """Every start-up check ran: events may go out (but those an integrity hold keeps)."""
        with self._lock:
            self._stage = "done"

    def hold_integrity(self, after_seq: int | None) -> None:
        """Hold every event with a ``seq`` above ``after_seq`` (an ``integrity_failed`` alert's
        own seq); None releases the hold."""
        with self._lock:
            self._integrity_hold = after_seq

    def held_after(self) -> int | None:
        """The highest ``seq`` the publisher may send now; None: no limit."""
        with self._lock:
            if self._integrity_hold is not None:
                return self._integrity_hold
            return None if self._stage == "done" else 0

    def health(self) -> StartupHealth:
        with self._lock:
            return StartupHealth(stage=self._stage, passed=list(self._passed), failed=list(self._failed))
