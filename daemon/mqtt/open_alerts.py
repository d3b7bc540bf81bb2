"""The delivery side's open episode alerts, recovered from the journal.

``mqtt_delivery_failing`` and ``server_ack_lagging`` are episodes: one ``alert_raised`` when
it starts, one ``alert_cleared`` (same ``alert_id``) when it ends. The publisher holds the
open id in memory, so a restart or a SIGHUP that swaps the publisher would forget it: the
new publisher would raise a second alert for the same episode, or never clear the first.
The journal is the record: every raise and clear is journaled before it is published, so a
publisher starting reads the open ids back from it (:func:`open_episode_alerts`, one look-up
of the journal's table of open delivery alerts) and goes on with them.
"""

from __future__ import annotations

from daemon.alerts import AlertCode
from daemon.journal.store import Journal

EPISODE_CODES = (
    AlertCode.MQTT_DELIVERY_FAILING,
    AlertCode.SERVER_ACK_LAGGING,
    AlertCode.TLS_CERTIFICATE_DATES,
)
"""The delivery alerts raised once per episode and cleared when it ends."""


def open_episode_alerts(journal: Journal) -> dict[AlertCode, str]:
    """The id of each episode alert raised and not cleared in ``journal``, by code.

    One look-up of the journal's table of open delivery-side alerts, kept as the raises and
    clears are journaled (:meth:`Journal.open_delivery_alerts`): the start does not walk the
    journal's history. An alert stays open there until it is cleared, even once compaction
    removed its raise, so the next publisher clears it rather than raise a second one."""
    wanted = {code.value: code for code in EPISODE_CODES}
    return {
        wanted[code]: alert_id for code, alert_id in journal.open_delivery_alerts().items() if code in wanted
    }
