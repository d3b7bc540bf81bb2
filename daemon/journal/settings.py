"""Journal settings (the ``journal:`` section of the daemon config)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class FullPolicy(Enum):
    """What happens when the journal reaches a limit.

    Validated events are never dropped under either policy.

    * ``refuse_new_rounds`` (default): the journal reports it no longer admits a new round
      (:meth:`Journal.admits_new_round`); the round in progress still completes and is
      journaled; an alert is raised. Dealing resumes once delivery and compaction free space.
    * ``alert_only``: keep journaling and raise the alert; the disk itself is the limit.
    """

    REFUSE_NEW_ROUNDS = "refuse_new_rounds"
    ALERT_ONLY = "alert_only"


class JournalSettings(BaseModel):
    """Where the journal lives and how big it may grow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path = Field(
        default=Path("/var/lib/baccarat-edge/journal.sqlite3"),
        description="SQLite file (WAL mode; the -wal and -shm files sit beside it).",
    )
    max_bytes: int = Field(
        default=4 * 1024 * 1024 * 1024,
        ge=64 * 1024,
        description="Size limit of the database file (4 GiB: 90 days of a table dealing 120 "
        "rounds an hour around the clock take about 1.9 GB; daemon/journal/README.md has the arithmetic).",
    )
    max_undelivered_events: int = Field(
        default=500_000, ge=10, description="Limit on events journaled but not yet acknowledged."
    )
    max_undelivered_age_s: float = Field(
        default=6 * 3600.0,
        ge=60.0,
        le=30 * 86400.0,
        description="Limit on how long ago the oldest event not yet acknowledged was journaled "
        "(seconds, 60 s to 30 days). Well above an hour's broker outage, which must not stop "
        "dealing; it bounds how far settlement may lag when delivery is stuck but the journal "
        "is far from its count and size limits.",
    )
    warn_fraction: float = Field(
        default=0.8,
        gt=0,
        lt=1,
        description="An early-warning alert (journal_nearly_full) is raised when any limit (size, "
        "undelivered count, undelivered age) is this fraction reached, well before dealing stops.",
    )
    on_full: FullPolicy = FullPolicy.REFUSE_NEW_ROUNDS
    audit_retention_days: float = Field(
        default=90.0,
        ge=0,
        description="Delivered events of finished shoes are kept this long for audit, then compacted.",
    )
    busy_timeout_ms: int = Field(default=5000, ge=0)
    size_check_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="The file size is measured at most this often for the full check "
        "(it is asked for every card).",
    )
