"""The ``alert_raised``/``alert_cleared`` events the delivery side journals (the publisher's,
and the service's journal housekeeping); their codes are in the catalogue,
:mod:`daemon.alerts`.

These events travel in the table's event stream like the engine's, with their own ``seq``;
the codes and payloads are part of the MQTT contract (see ``README.md``)."""

from __future__ import annotations

import uuid
from typing import Any

from daemon.alerts import ALERTS, AlertCode
from daemon.journal.records import DeliveryEvent

ALERT_KIND_PREFIX = "alert"
"""Events whose kind starts with this are also copied to the ``alerts`` topic."""
COMMAND_REFUSED_KIND = "command_refused"
"""The event journaled for a command refused before the engine."""


def alert_raised(
    code: AlertCode, message: str, extra: dict[str, Any], at: float
) -> tuple[str, DeliveryEvent]:
    """A new delivery-side alert: its id (``IdScheme.DELIVERY``) and the ``alert_raised``
    event to journal, with the catalogue's severity for ``code``."""
    alert_id = f"delivery-{uuid.uuid4().hex[:12]}"
    event = DeliveryEvent(
        kind="alert_raised",
        at=at,
        data={
            "alert_id": alert_id,
            "code": code,
            "severity": ALERTS[code].severity,
            "message": message,
            **extra,
        },
    )
    return alert_id, event


def alert_cleared(alert_id: str, code: AlertCode, message: str, at: float) -> DeliveryEvent:
    """The ``alert_cleared`` event closing the alert ``alert_id``."""
    return DeliveryEvent(
        kind="alert_cleared", at=at, data={"alert_id": alert_id, "code": code, "message": message}
    )
