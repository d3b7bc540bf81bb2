"""The delivery side's alert codes and the ``alert_raised``/``alert_cleared`` events it
journals (the publisher's, and the service's journal housekeeping).

These events travel in the table's event stream like the engine's, with their own ``seq``;
the codes and payloads are part of the MQTT contract (see ``README.md``)."""

from __future__ import annotations

import uuid
from typing import Any

from daemon.journal.records import DeliveryEvent

DEAD_LETTER_ALERT = "mqtt_dead_letter"
"""An event the broker refused for good (or too often): it will never be delivered."""
DELIVERY_FAILING_ALERT = "mqtt_delivery_failing"
"""The broker refuses events transiently; open until an acknowledgement with none waiting."""
JOURNAL_FULL_ALERT = "journal_full"
"""The journal reached one of its limits (size, undelivered count, oldest undelivered age)."""
JOURNAL_NEARLY_FULL_ALERT = "journal_nearly_full"
"""The early warning: a journal limit is ``journal.warn_fraction`` reached (dealing goes on)."""
ALERT_KIND_PREFIX = "alert"
"""Events whose kind starts with this are also copied to the ``alerts`` topic."""
COMMAND_REFUSED_KIND = "command_refused"
"""The event journaled for a command refused before the engine."""


def alert_raised(
    code: str, severity: str, message: str, extra: dict[str, Any], at: float
) -> tuple[str, DeliveryEvent]:
    """A new delivery-side alert: its id and the ``alert_raised`` event to journal."""
    alert_id = f"delivery-{uuid.uuid4().hex[:12]}"
    event = DeliveryEvent(
        kind="alert_raised",
        at=at,
        data={"alert_id": alert_id, "code": code, "severity": severity, "message": message, **extra},
    )
    return alert_id, event


def alert_cleared(alert_id: str, code: str, message: str, at: float) -> DeliveryEvent:
    """The ``alert_cleared`` event closing the alert ``alert_id``."""
    return DeliveryEvent(
        kind="alert_cleared", at=at, data={"alert_id": alert_id, "code": code, "message": message}
    )
