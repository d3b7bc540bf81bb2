"""Silences the floor must hear of (``README.md``, "Game flow"): an empty betting window (betting
closed for a round and no card of it within ``table.betting.empty_window_s``: the reader out, a
dealer who stopped), named by the server's round id, cleared by the round's first card; and a
silent shoe (a running shoe with no card for ``table.silent_shoe_s``), cleared by the next card
or the shoe's end."""

from __future__ import annotations

from common.inputs import Source
from daemon.alerts import AlertCode
from daemon.engine.emitter import Emitter
from daemon.engine.phases import FlowPhase, Phase
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState

_EMPTY = AlertCode.EMPTY_BETTING_WINDOW
_SILENT = AlertCode.SHOE_SILENT
_RUNNING = frozenset({Phase.INDICATOR, Phase.BURNING, Phase.READY, Phase.ROUND})
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

    def silent_open(self) -> bool:
        """Whether a ``shoe_silent`` alert is open."""
        return any(alert["code"] == _SILENT for alert in self.state.alerts.values())

    def check_silence(self, at: float) -> None:
        """Before an input at ``at``: has the running shoe been silent too long? (once per silence)"""
        st = self.state
        last = st.last_card_at
        limit = self.shoe.settings.silent_shoe_s
        if last is None or limit <= 0 or st.phase not in _RUNNING or at - last < limit:
            return
        if self.silent_open():
            return
        self.emitter.alert(
            _SILENT, at, Source.SYSTEM, last_card_at=last, silent_s=round(at - last, 3), phase=st.phase
        )

    def settle_silence(self, at: float) -> None:
        """After an input: a card came, or the shoe ended: the silence alert clears."""
        st = self.state
        for alert_id, alert in list(st.alerts.items()):
            if alert["code"] != _SILENT:
                continue
            if st.phase not in _RUNNING:
                self.emitter.clear_alert(alert_id, at, Source.SYSTEM, "the shoe ended")
            elif st.last_card_at != alert["details"]["last_card_at"]:
                self.emitter.clear_alert(alert_id, at, Source.SYSTEM, "a card came")
