"""What the table does with the game server's acknowledgements (drain thread).

Each drain turn hands over the ``ack`` payloads received (:mod:`daemon.mqtt.server_ack`
verifies them). Of the verified ones, the highest is judged against the journal's event chain
(:meth:`daemon.journal.store.Journal.check_acknowledged`):

* on the chain (the journal holds that ``event_id`` and ``hash`` at that ``seq``) and above what
  the table holds: stored in the journal's meta (durable), and nothing at or below it is sent
  again;
* off the chain (ahead of the journal, or another event at that ``seq``): the journal was rolled
  back. The rollback is recorded in the journal and the critical ``journal_rolled_back`` alert
  (restore point, first lost seq, lost epoch) is journaled, once; nothing is accepted;
* off the chain above the restore point of a rollback already signalled (the server's retained
  acknowledgement, or its backlog of the lost history, until it follows the table): recognised
  and ignored (``server_acks_ignored``), after any number of restarts.

It also keeps the ``server_ack_lagging`` alert (:class:`daemon.mqtt.server_ack.LagRule`) and
reports ``delivery.server_ack`` in ``health``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from daemon.alerts import AlertCode
from daemon.journal.continuity_alert import continuity_alert
from daemon.journal.records import DeliveryEvent
from daemon.journal.rollbacks import AckStatus
from daemon.journal.store import Journal
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.mqtt.counters import Counters
from daemon.mqtt.keyring import Keyring
from daemon.mqtt.resend import ResendQueue
from daemon.mqtt.server_ack import AckClaim, Lag, LagRule, check_ack
from daemon.mqtt.settings import ServerAckSettings

log = logging.getLogger(__name__)

LAG_CHECK_INTERVAL_S = 0.5


class ServerAcknowledgement:
    """The server's acknowledgement as the table holds it (drain thread only)."""

    def __init__(
        self,
        settings: ServerAckSettings,
        journal: Journal,
        keyring: Keyring,
        table_id: str,
        resend: ResendQueue,
        counters: Counters,
        clock: Callable[[], float],
        journal_event: Callable[[DeliveryEvent], None],
    ) -> None:
        self.enabled = settings.enabled
        self._journal = journal
        self._keyring = keyring
        self._table_id = table_id
        self._resend = resend
        self._counters = counters
        self._clock = clock
        self._journal_event = journal_event
        self._rule = LagRule(settings)
        journal.require_server_ack(settings.enabled)
        stored = journal.server_ack()
        self.seq = stored.seq
        """The highest ``seq`` the server acknowledged (0: none)."""
        self.event_id = stored.event_id
        self.lagging_alert: str | None = None
        """The id of the open ``server_ack_lagging`` alert (taken over from the journal at
        start: :meth:`daemon.mqtt.delivery.Delivery.resume_open_alerts`)."""
        self._oldest: tuple[int, float | None] | None = None  # (for ack seq, journaled_at of seq + 1)
        self._next_check = 0.0

    def receive(self, payloads: list[bytes]) -> None:
        """Verify the acknowledgements received and apply the highest."""
        best: AckClaim | None = None
        for payload in payloads:
            outcome = check_ack(payload, self._table_id, self._keyring)
            if isinstance(outcome, str):
                self._counters.server_acks_refused += 1
                log.warning("server acknowledgement refused: %s", outcome)
                continue
            if best is None or outcome.seq > best.seq:
                best = outcome
        if best is not None:
            self._judge(best)

    def _judge(self, claim: AckClaim) -> None:
        if claim.seq < self.seq or (claim.seq == self.seq and claim.event_id == self.event_id):
            return  # says less than the table holds (a retained copy, an old message)
        status, rolled_back = self._journal.check_acknowledged(
            claim.seq, claim.event_id, claim.hash, claim.epoch
        )
        if status is AckStatus.ROLLBACK:
            if rolled_back is not None:
                log.error(
                    "journal rolled back, shown by the server's acknowledgement: %s", rolled_back.detail
                )
                alert = continuity_alert(rolled_back, self._clock())
                if alert is not None:
                    self._journal_event(alert)
            return
        if status is AckStatus.RECOGNISED:
            self._counters.server_acks_ignored += 1
            log.warning(
                "server acknowledgement of seq %d (%s) ignored: it speaks of history this journal "
                "lost in the rollback already signalled (or of a compacted event)",
                claim.seq,
                claim.event_id,
            )
            return
        self._journal.record_server_ack(claim.seq, claim.event_id)
        self.seq, self.event_id = claim.seq, claim.event_id
        self._counters.server_acks += 1
        self._resend.drop_through(claim.seq)

    # -- lag ----------------------------------------------------------------------------------

    def lag(self) -> Lag:
        """Events journaled and not acknowledged by the server, and the oldest one's age."""
        if not self.enabled:
            return Lag(0, None)
        events = max(0, self._journal.last_seq() - self.seq)
        if events == 0:
            return Lag(0, None)
        cached = self._oldest
        if cached is None or cached[0] != self.seq or cached[1] is None:
            oldest = self._journal.get(self.seq + 1)
            if oldest is None:  # compacted before the acknowledgement was required
                oldest = next(self._journal.events(after_seq=self.seq, origin=None), None)
            cached = self._oldest = (self.seq, None if oldest is None else oldest.journaled_at)
        at = cached[1]
        return Lag(events, None if at is None else max(0.0, self._clock() - at))

    def check_lag(self) -> None:
        """Raise or clear ``server_ack_lagging`` (at most every half second)."""
        now = time.monotonic()
        if not self.enabled:
            if self.lagging_alert is not None:  # left open before a reload turned the ack off
                self._clear_lagging("the server acknowledgement is turned off")
            return
        if now < self._next_check:
            return
        self._next_check = now + LAG_CHECK_INTERVAL_S
        lag = self.lag()
        if self.lagging_alert is None:
            why = self._rule.exceeded(lag)
            if why is None:
                return
            log.warning("server acknowledgement lagging: %s", why)
            alert_id, event = alert_raised(
                AlertCode.SERVER_ACK_LAGGING,
                f"{why}; every such event is kept and sent again after a reconnect",
                {
                    "acknowledged_seq": self.seq,
                    "last_seq": self.seq + lag.events,
                    "lag_events": lag.events,
                    "lag_s": lag.seconds,
                },
                self._clock(),
            )
            self.lagging_alert = alert_id
            self._journal_event(event)
        elif self._rule.caught_up(lag):
            self._clear_lagging(f"the game server acknowledged through seq {self.seq}")

    def _clear_lagging(self, message: str) -> None:
        if self.lagging_alert is None:
            return
        self._journal_event(
            alert_cleared(self.lagging_alert, AlertCode.SERVER_ACK_LAGGING, message, self._clock())
        )
        self.lagging_alert = None

    def report(self) -> dict[str, Any]:
        """The ``delivery.server_ack`` block of ``health``."""
        lag = self.lag()
        return {
            "enabled": self.enabled,
            "seq": self.seq if self.enabled and self.seq > 0 else None,
            "lag_events": lag.events,
            "lag_s": lag.seconds,
        }
