"""The check of a reader's first card after a restart (``README.md``, "Restarts"): do its frames
follow on from the last one journaled, and can a round in progress when the edge went down go on?"""

from __future__ import annotations

from typing import Any

from common.inputs import CardRead, EngineInput, OutsideGameCard, Source
from daemon.alerts import AlertCode
from daemon.engine.emitter import Emitter
from daemon.engine.phases import NEXT_ROUND, OUTSIDE_SHOE, Phase
from daemon.engine.settings import GameFlow
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState


class RestartCheck:
    """Remembers, after a restore, what the first reader card is checked against."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    restart_marks: dict[str, str] | None
    """After a restart: the last transmission id journaled per device, until each one's next read."""
    restart_round: int | None
    """After a restart in the middle of a round: its hand, until the first reader card."""

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.restart_marks = None
        self.restart_round = None

    def applies_to(self, inp: EngineInput) -> CardRead | OutsideGameCard | None:
        """``inp`` when it is a reader card the restart check looks at, else None."""
        if self.restart_marks is None and self.restart_round is None:
            return None
        if not isinstance(inp, CardRead | OutsideGameCard):
            return None
        if isinstance(inp, CardRead) and self.shoe.is_camera(inp.source, inp.device):
            return None
        marks = self.restart_marks
        return inp if self.restart_round is not None or (marks is not None and inp.device in marks) else None

    def check(self, inp: CardRead | OutsideGameCard) -> None:
        """A reader's first card after a restart (``README.md``, "Restarts"): do its frames follow on
        from the last one journaled (Angel Eye sequence marks, ``table.restart_check``)? And if a
        round was in progress when the edge went down, can the reader show that no card of it was
        dealt meanwhile? If not, the round is held: never continued on a guess."""
        st = self.state
        marks = self.restart_marks or {}
        last = marks.pop(inp.device, None)
        if not marks:
            self.restart_marks = None
        open_round = self.restart_round
        self.restart_round = None
        if st.phase in OUTSIDE_SHOE:
            return
        tid = inp.transmission_id
        cycle = self.shoe.settings.restart_check.sequence_marks
        step: int | None = None
        if last is not None and tid is not None and last in cycle and tid in cycle:
            step = (cycle.index(tid) - cycle.index(last)) % len(cycle)
        hand = st.round.hand if st.round is not None else None
        details: dict[str, Any] = {"last_transmission_id": last, "transmission_id": tid}
        if step is not None and step > self.shoe.settings.restart_check.max_mark_step:
            reason = f"{step - 1} sequence mark(s) skipped since the last frame journaled"
            details["marks_skipped"] = step - 1
        elif open_round is not None and hand == open_round and step is None:
            reason = (
                f"round {hand} was in progress when the edge went down, and the reader cannot show that "
                "no card of it was dealt meanwhile (no sequence marks)"
            )
        else:
            return
        self.emitter.alert(
            AlertCode.RESTART_GAP,
            inp.at,
            Source.READER,
            hand=hand,
            holds=hand if hand is not None else NEXT_ROUND,
            device=inp.device,
            reason=reason,
            **details,
        )

    def note(self) -> None:
        """Remember what the first reader card after a restore is checked against (called once,
        after a restore): each device's last journaled transmission id, the round in progress."""
        st = self.state
        last: dict[str, str] = {}
        for device, tid, _card in st.recent:
            last[device] = tid  # (oldest first: the last one wins)
        self.restart_marks = last or None
        in_round = st.phase == Phase.ROUND and st.round is not None
        if in_round and st.round is not None and self.shoe.settings.game_flow is GameFlow.BETTING_WINDOW:
            # (cards_only keeps trusting a slotless reader across a restart: README "Weak spots")
            self.restart_round = st.round.hand
