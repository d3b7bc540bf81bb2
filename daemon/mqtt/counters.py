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
    server_acks: int = 0
    """Server acknowledgements that advanced the acknowledged seq."""
    server_acks_refused: int = 0
    """Acknowledgements refused (malformed, wrong table, signature, key without the role)."""
    server_acks_ignored: int = 0
    """Verified acknowledgements naming an event the journal does not hold at that seq."""
    resent: int = 0
    """Events published again for the server (after a reconnect, or on a resend command)."""

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))
