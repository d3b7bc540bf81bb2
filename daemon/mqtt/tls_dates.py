"""TLS certificate dates watched while the daemon runs.

A certificate "not valid before" tomorrow is usually a table PC that booted with a wrong
clock (no RTC battery, NTP not yet synchronised); one expired is one to renew. Neither is a
configuration error that should keep the table down for good (``run`` exits 78 only for
problems no restart can mend: a missing file, not PEM, a key that is not the certificate's).
So ``run`` starts, deals and journals; the broker connection keeps retrying with its backoff
(the handshake fails while the dates are wrong); and :class:`TlsDateWatch`:

* logs ``tls_certificate_dates`` (error) with every problem at start;
* journals one critical ``tls_certificate_dates`` alert, published once a connection is up
  (e.g. after the clock was corrected);
* re-checks every ``RECHECK_S`` and clears the alert when every certificate is within its dates.

``check-config`` still reports the date problems as errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from daemon.alerts import AlertCode
from daemon.journal.records import DeliveryEvent
from daemon.mqtt.alerts import alert_cleared, alert_raised
from daemon.mqtt.settings import TlsSettings
from daemon.mqtt.tls import check_tls_dates

log = logging.getLogger(__name__)

RECHECK_S = 60.0
"""How often the dates are checked again (reading two or three small files)."""


class TlsDateWatch:
    """The ``tls_certificate_dates`` alert of one daemon (main thread)."""

    def __init__(
        self,
        tls: TlsSettings,
        journal_event: Callable[[DeliveryEvent], None],
        clock: Callable[[], float],
        recheck_s: float = RECHECK_S,
        *,
        open_alert: str | None = None,
    ) -> None:
        """``open_alert``: the id of the alert a previous run left open (from the journal)."""
        self.tls = tls
        """The settings watched (replaced on a reload that changes ``broker.tls``)."""
        self._journal_event = journal_event
        self._clock = clock
        self._recheck_s = recheck_s
        self._next_check = 0.0
        self.alert_id = open_alert
        """The id of the open ``tls_certificate_dates`` alert."""

    def check(self, *, force: bool = False) -> None:
        """Raise or clear the alert (at most every ``recheck_s`` unless ``force``)."""
        now = time.monotonic()
        if not force and now < self._next_check:
            return
        self._next_check = now + self._recheck_s
        problems = [str(p) for p in check_tls_dates(self.tls)]
        if problems and self.alert_id is None:
            log.error(
                "tls_certificate_dates: %s; the broker connection is retried with backoff and events "
                "wait in the journal; check this PC's clock (timedatectl) or renew the certificate",
                "; ".join(problems),
            )
            self.alert_id, event = alert_raised(
                AlertCode.TLS_CERTIFICATE_DATES,
                "; ".join(problems),
                {"problems": problems},
                self._clock(),
            )
            self._journal_event(event)
        elif not problems and self.alert_id is not None:
            log.info("tls_certificate_dates cleared: every broker.tls certificate is within its dates")
            self._journal_event(
                alert_cleared(
                    self.alert_id,
                    AlertCode.TLS_CERTIFICATE_DATES,
                    "every broker.tls certificate is within its dates",
                    self._clock(),
                )
            )
            self.alert_id = None
