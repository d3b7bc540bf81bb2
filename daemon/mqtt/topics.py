"""The fixed per-table topic tree: ``baccarat/v1/{table_id}/...``.

The ``v1`` is the contract's major version: a breaking change to the topic tree or the
payloads gets a new prefix, so old and new consumers can run side by side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "baccarat/v1"

_TABLE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class TopicError(ValueError):
    """A table id that cannot be used inside a topic."""


def validate_table_id(table_id: str) -> str:
    """Return ``table_id`` if it is safe as one topic level, else raise TopicError.

    MQTT wildcards (``+``, ``#``), ``/`` and empty ids would let one table's topics overlap
    another's, which the ACL could then not separate.
    """
    if not isinstance(table_id, str) or not _TABLE_ID.match(table_id):
        raise TopicError(
            f"table id {table_id!r} is not usable in a topic: 1-64 characters, letters, digits, "
            "'_', '.', '-', starting with a letter or digit"
        )
    return table_id


@dataclass(frozen=True, slots=True)
class TableTopics:
    """Every topic of one table."""

    table_id: str

    def __post_init__(self) -> None:
        validate_table_id(self.table_id)

    @property
    def base(self) -> str:
        return f"{PREFIX}/{self.table_id}"

    @property
    def events(self) -> str:
        """Ordered game event stream (QoS 1, not retained)."""
        return f"{self.base}/events"

    @property
    def state(self) -> str:
        """Retained snapshot of the table state (QoS 1)."""
        return f"{self.base}/state"

    @property
    def status(self) -> str:
        """Retained ``online``/``offline``; also the Last Will (QoS 1)."""
        return f"{self.base}/status"

    @property
    def health(self) -> str:
        """Retained periodic health report (QoS 1)."""
        return f"{self.base}/health"

    @property
    def alerts(self) -> str:
        """Alerts only (QoS 1); every alert is also in ``events``."""
        return f"{self.base}/alerts"

    @property
    def audit(self) -> str:
        """A squeeze table's voided rounds' unrevealed cards, for the auditors (QoS 1); never on
        ``events``."""
        return f"{self.base}/audit"

    @property
    def shoe_certificate(self) -> str:
        """Retained copy of the last ``shoe_certificate`` event (QoS 1): the last shoe's accounting."""
        return f"{self.base}/shoe_certificate"

    @property
    def cmd(self) -> str:
        """Inbound supervisor commands."""
        return f"{self.base}/cmd"

    @property
    def cmd_reply(self) -> str:
        """Replies to commands (besides an MQTT 5 response topic when the request names one)."""
        return f"{self.base}/cmd/reply"

    @property
    def ack(self) -> str:
        """The game server's signed acknowledgement (inbound, retained, QoS 1)."""
        return f"{self.base}/ack"

    @property
    def all(self) -> str:
        """Wildcard subscription to every topic of the table."""
        return f"{self.base}/#"
