"""The ``alert_raised``/``alert_cleared`` events the delivery side journals (the publisher's,
and the service's): the catalogue's alerts (:func:`daemon.alerts.raised_alert`,
:func:`daemon.alerts.cleared_alert`) as journal delivery events.

These events travel in the table's event stream like the engine's, with their own ``seq``;
the codes and payloads are part of the MQTT contract (see ``README.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemon.alerts import AlertCode, AlertEventKind, cleared_alert, raised_alert
from daemon.journal.records import DeliveryEvent

COMMAND_REFUSED_KIND = "command_refused"
"""The event journaled for a command refused before the engine."""


def alert_raised(
    code: AlertCode, message: str, extra: Mapping[str, Any], at: float
) -> tuple[str, DeliveryEvent]:
    """A new delivery-side alert: its id and the ``alert_raised`` event to journal
    (:func:`daemon.alerts.raised_alert`)."""
    data = raised_alert(code, message, extra)
    return data["alert_id"], DeliveryEvent(kind=AlertEventKind.RAISED, at=at, data=data)


def alert_cleared(alert_id: str, code: AlertCode, message: str, at: float) -> DeliveryEvent:
    """The ``alert_cleared`` event closing the alert ``alert_id``."""
    return DeliveryEvent(kind=AlertEventKind.CLEARED, at=at, data=cleared_alert(alert_id, code, message))
