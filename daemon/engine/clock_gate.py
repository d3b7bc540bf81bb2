"""The clock gate (``README.md``, "Game flow": "The clock gate"): betting does not open while the
table's clock cannot be trusted against the game server's.

The service reads the system clock's synchronisation state and passes it in (``ClockStatus``); the
engine reads no clock. A change of state is a ``clock_status`` event; losing synchronisation raises
``clock_unsynchronised``, getting it back clears it. ``open_betting`` is refused (``Refused`` with
``clock_gate_closed``) while the clock is reported unsynchronised, or when the command's own time
(its signed ``ts``) is further than ``table.betting.max_skew_s`` from the table's receive time.
"""

from __future__ import annotations

from common.inputs import ClockStatus, Source, SupervisorCommand
from daemon.alerts import AlertCode
from daemon.engine.commands import Refused
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

_UNSYNC = AlertCode.CLOCK_UNSYNCHRONISED
_GATE = AlertCode.CLOCK_GATE_CLOSED


class ClockGate:
    """The table's clock status (an input) and the gate it puts on ``open_betting``."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter

    def on_clock_status(self, inp: ClockStatus) -> None:
        """A clock status from the service: recorded when synchronisation is lost or regained."""
        st = self.state
        if st.clock_synchronised is inp.synchronised:
            return
        self.emitter.emit(
            EventKind.CLOCK_STATUS,
            inp.at,
            Source.SYSTEM,
            {"synchronised": inp.synchronised, "source": inp.source, "detail": inp.detail},
        )
        open_ids = st.open_alert_ids(_UNSYNC)
        if not inp.synchronised and not open_ids:
            self.emitter.alert(_UNSYNC, inp.at, Source.SYSTEM, clock_source=inp.source, detail=inp.detail)
        elif inp.synchronised:
            for alert_id in open_ids:
                self.emitter.clear_alert(alert_id, inp.at, Source.SYSTEM, "the clock is synchronised again")

    def refusal(self, cmd: SupervisorCommand, round_id: str) -> Refused | None:
        """Why the gate refuses this ``open_betting`` (None: it lets it through)."""
        betting = self.shoe.settings.betting
        if not betting.clock_gate:
            return None
        st = self.state
        skew = None if cmd.issued_at is None else round(cmd.at - cmd.issued_at, 3)
        bound = betting.max_skew_s
        if st.clock_synchronised is False:
            reason = "the table's clock is not synchronised" + (
                f" ({st.clock_detail})" if st.clock_detail else ""
            )
        elif skew is not None and bound > 0 and abs(skew) > bound:
            reason = (
                f"the command's time is {skew:+.3f} s from the table's clock "
                f"(table.betting.max_skew_s {bound:g} s)"
            )
        else:
            return None
        reason = f"betting cannot open: {reason}"
        if st.open_alert_ids(_GATE):
            return Refused(reason)  # the floor knows already: one alert while the gate stays closed
        synchronised = st.clock_synchronised

        def alert() -> None:
            self.emitter.alert(
                _GATE, cmd.at, Source.SYSTEM, round_id=round_id, reason=reason, synchronised=synchronised,
                skew_s=skew, max_skew_s=bound,
            )  # fmt: skip

        return Refused(reason, alert=alert)

    def opened(self, at: float) -> None:
        """Betting opened: a closed gate's alert is cleared."""
        for alert_id in self.state.open_alert_ids(_GATE):
            self.emitter.clear_alert(alert_id, at, Source.SYSTEM, "betting opened")
