"""The delivery side's open episode alerts, recovered from the journal.

``mqtt_delivery_failing`` and ``server_ack_lagging`` are episodes: one ``alert_raised`` when
it starts, one ``alert_cleared`` (same ``alert_id``) when it ends. The publisher holds the
open id in memory, so a restart or a SIGHUP that swaps the publisher would forget it: the
new publisher would raise a second alert for the same episode, or never clear the first.
The journal is the record: every raise and clear is journaled before it is published, so a
publisher starting reads the open ids back from it (:func:`open_episode_alerts`) and goes on
with them.
"""

from __future__ import annotations

from daemon.alerts import AlertCode
from daemon.journal.records import ORIGIN_DELIVERY
from daemon.journal.store import Journal

EPISODE_CODES = (
    AlertCode.MQTT_DELIVERY_FAILING,
    AlertCode.SERVER_ACK_LAGGING,
    AlertCode.TLS_CERTIFICATE_DATES,
)
"""The delivery alerts raised once per episode and cleared when it ends."""


def open_episode_alerts(journal: Journal) -> dict[AlertCode, str]:
    """The id of each episode alert raised and not cleared in ``journal``, by code.

    Reads the delivery side's events only (``origin = delivery``). An alert whose raise was
    compacted away is not found: the next episode raises a new one."""
    open_ids: dict[AlertCode, str] = {}
    for event in journal.events(origin=ORIGIN_DELIVERY):
        if event.kind not in ("alert_raised", "alert_cleared"):
            continue
        code, alert_id = event.data.get("code"), event.data.get("alert_id")
        if code not in EPISODE_CODES or not isinstance(alert_id, str):
            continue
        episode = AlertCode(code)
        if event.kind == "alert_raised":
            open_ids[episode] = alert_id
        elif open_ids.get(episode) == alert_id:
            del open_ids[episode]
    return open_ids
