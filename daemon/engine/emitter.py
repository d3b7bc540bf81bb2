"""The one way the engine says anything: an event decided from the state, applied to it at once
(``TableState.apply``) and collected for ``Engine.handle`` to return. Alerts are numbered within
the shoe and worded from the alert catalogue (``daemon/alerts.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.inputs import SupervisorCommand
from daemon.alerts import ALERTS, AlertCode, engine_alert_id
from daemon.engine.events import Event, EventKind
from daemon.engine.payloads import ReadFields
from daemon.engine.settings import RevealMode
from daemon.engine.squeeze import seal, shown_cards, with_audit
from daemon.engine.state import TableState

_SHOE_ENDED = EventKind.SHOE_ENDED
_NO_ROUND_ID = frozenset({EventKind.ALERT_RAISED, EventKind.ALERT_CLEARED})
"""Event kinds whose data is fixed by a catalogue (alerts): no ``round_id`` added."""


class Emitter:
    """Emits events into the one table state and collects them for the caller."""

    state: TableState
    out: list[Event]
    """Where the events emitted are collected: the caller gives a fresh list for each input and
    takes it back (``Engine.handle``)."""
    now: float
    """The time of the last input or event (what an event no input caused is stamped with)."""
    squeeze: bool
    """A squeeze table (``table.reveal.mode``): every card an event names is sealed (``squeeze.py``)."""
    after_shoe_end: Callable[[Event], None] | None
    """Called with each ``shoe_ended`` once it is applied, before anything else is emitted (the
    shoe's audit: ``shoe_audit.py``): the ended shoe's state is still there."""

    def __init__(self, state: TableState) -> None:
        self.state = state
        self.out = []
        self.now = 0.0
        self.squeeze = state.settings.reveal.mode is RevealMode.SQUEEZE
        self.after_shoe_end = None

    def emit(
        self,
        kind: EventKind,
        at: float,
        source: str,
        data: dict[str, Any],
        *,
        hand: int | None = None,
        shoe_id: str | None = None,
    ) -> Event:
        """Decide one event: apply it to the state and collect it."""
        state = self.state
        round_ids = state.round_ids
        if round_ids and hand is not None and hand in round_ids and kind not in _NO_ROUND_ID:
            # game_flow betting_window: every event of a round carries the server's round id
            data = {**data, "round_id": round_ids[hand]}
        if self.squeeze:
            data = seal(kind, data, self._shown(hand))
            if kind is EventKind.ROUND_VOIDED:
                data = with_audit(state, data)
        event = Event(kind, at, shoe_id or state.shoe_id, hand, source, data)
        state.apply(event)
        self.out.append(event)
        if kind is _SHOE_ENDED and self.after_shoe_end is not None:
            self.after_shoe_end(event)
        return event

    def _shown(self, hand: int | None) -> dict[str, str | None] | None:
        rnd = None if hand is None else self.state.round_for(hand)
        return None if rnd is None else shown_cards(self.state, rnd)

    def alert(
        self,
        code: AlertCode,
        at: float,
        source: str,
        *,
        hand: int | None = None,
        holds: int | str | None = None,
        device: str | None = None,
        read: ReadFields | None = None,
        **details: Any,
    ) -> str:
        """Raise an alert from the catalogue; its id (numbered within the shoe)."""
        alert_id = engine_alert_id(self.state.shoe_id, self.state.alert_counter + 1)
        data: dict[str, Any] = {
            "alert_id": alert_id,
            "code": code,
            "message": ALERTS[code].summary,
            "hand": hand,
            "holds": holds,
            "device": device,
            "details": details,
        }
        if read is not None:
            data["read"] = read
        self.emit(EventKind.ALERT_RAISED, at, source, data, hand=hand)
        return alert_id

    def clear_alert(
        self,
        alert_id: str,
        at: float,
        source: str,
        reason: str,
        *,
        cmd: SupervisorCommand | None = None,
        **extra: Any,
    ) -> None:
        """Clear an open alert, saying why (and which command, if one did)."""
        alert = self.state.alerts[alert_id]
        data: dict[str, Any] = {"alert_id": alert_id, "code": alert["code"], "reason": reason, **extra}
        if cmd is not None:
            data.update(actor=cmd.actor, command_id=cmd.command_id)
        self.emit(EventKind.ALERT_CLEARED, at, source, data, hand=alert.get("hand"))
