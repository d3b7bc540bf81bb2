"""An empty betting window (``README.md``, "Game flow"): betting closed for a round and no card of
it came within ``table.betting.empty_window_s`` (the reader out, a dealer who stopped): the floor
is told, naming the server's round id; the round's first card clears it."""

from __future__ import annotations

from common.inputs import Source
from daemon.alerts import AlertCode
from daemon.engine.emitter import Emitter
from daemon.engine.phases import FlowPhase, Phase
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

_EMPTY = AlertCode.EMPTY_BETTING_WINDOW
_DEALING = FlowPhase.DEALING
_READY = Phase.READY


class EmptyWindowWatch:
    """Raises ``empty_betting_window`` once per window; clears it when the window's round opens
    (or the window ends otherwise)."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter

    def _open_alerts(self) -> list[str]:
        return [a for a, alert in self.state.alerts.items() if alert["code"] == _EMPTY]

    def check(self, at: float) -> None:
        """Before an input at ``at``: has the closed window waited too long for its first card?"""
        st = self.state
        closed_at = st.flow_closed_at
        limit = self.shoe.settings.betting.empty_window_s
        if closed_at is None or limit <= 0 or st.flow_phase != _DEALING or st.phase != _READY:
            return
        if at - closed_at < limit:
            return
        for alert_id in self._open_alerts():
            if st.alerts[alert_id]["details"].get("window") == st.flow_windows:
                return  # raised for this window already
        self.emitter.alert(
            _EMPTY,
            at,
            Source.SYSTEM,
            round_id=st.flow_round_id,
            window=st.flow_windows,
            closed_at=closed_at,
            waited_s=round(at - closed_at, 3),
        )

    def settle(self, at: float) -> None:
        """After an input: a window no longer waiting for its first card clears its alert."""
        st = self.state
        if st.flow_phase == _DEALING and st.phase == _READY:
            return
        for alert_id in self._open_alerts():
            reason = "the round's first card came" if st.phase == Phase.ROUND else "the window ended"
            self.emitter.clear_alert(alert_id, at, Source.SYSTEM, reason)
