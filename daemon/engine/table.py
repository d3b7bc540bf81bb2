"""The table engine: a deterministic state machine from inputs to validated events.

``Engine.handle(input)`` decides the events an input causes and applies each to the
state as it is emitted (``TableState.apply``); nothing else changes the state, so
``Engine.restore(settings, variant, events)`` rebuilds an identical engine. The
engine does no I/O and reads no clock. See ``daemon/engine/README.md`` for the
state machine, every event kind, command and alert.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from common.inputs import (
    BettingClosed,
    BettingOpened,
    CardRead,
    CutCardDrawn,
    DeviceConnection,
    EngineInput,
    OutsideGameCard,
    ReaderSignal,
    ReadFailed,
    ShoeSignal,
    ShoeVerdict,
    Source,
    StorageState,
    SupervisorCommand,
    Tick,
)
from daemon.alerts import AlertCode
from daemon.engine.checkpoint import CheckpointError, EngineCheckpoint, fold_key
from daemon.engine.core import VariantResolver
from daemon.engine.events import Event, EventKind
from daemon.engine.sequencer import ReadSequencer
from daemon.engine.settings import TableSettings
from daemon.engine.snapshot import snapshot
from daemon.engine.supervisor import SupervisorCommands
from daemon.rules.variants import Variant

__all__ = ["Engine", "VariantResolver"]


class Engine(ReadSequencer, SupervisorCommands):
    """One table's engine. Feed inputs to ``handle``; publish the events it returns."""

    _settings_notice = False  # restored under another configuration: alert on the next input

    @classmethod
    def restore(
        cls,
        settings: TableSettings,
        variant: Variant,
        events: Iterable[Event],
        resolve_variant: VariantResolver | None = None,
        start: EngineCheckpoint | None = None,
    ) -> Engine:
        """An engine whose state is the fold of ``events`` (its own earlier output).

        ``settings``/``variant`` are the configured ones; a shoe still being dealt goes on with
        the decks and variant its ``shoe_started`` recorded (``resolve_variant`` loads that
        variant by name when it is not ``variant``; without it, or if it cannot, the shoe's
        rounds are held, never settled under another pay table). The configuration takes
        effect at the next shoe. If they differ, the first input handled raises
        ``shoe_settings_differ`` (once per shoe).

        ``start``: a checkpoint (:mod:`daemon.engine.checkpoint`) taken under these settings;
        ``events`` are then the ones after the last event it covers.
        """
        engine = cls(settings, variant, resolve_variant)
        if start is not None:
            if start.key != fold_key(settings):
                raise CheckpointError(f"taken under other fold code or settings: {start.key}")
            engine.state = start.table_state(settings)
            if start.shoe is not None:
                engine._use_shoe(start.shoe)
            engine._now = start.at
        for event in events:
            engine.apply(event)
        engine._note_restart()
        if engine._shoe_differs() is not None and engine.state.settings_notice_shoe != engine.state.shoe_id:
            engine._settings_notice = True
        return engine

    def _first_after_restart(self, inp: EngineInput) -> bool:
        """Whether ``inp`` is a reader card the restart check looks at (``game_flow._check_restart``)."""
        if not isinstance(inp, CardRead | OutsideGameCard):
            return False
        if isinstance(inp, CardRead) and self._is_camera(inp):
            return False
        marks = self._restart_marks
        return self._restart_round is not None or (marks is not None and inp.device in marks)

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready current state (the publisher retains it)."""
        return snapshot(self.state, self.settings.decks, self.variant.name, self._blockers)

    def apply(self, event: Event) -> None:
        """Fold one event into the state."""
        self.state.apply(event)
        if event.kind == EventKind.SHOE_STARTED:
            self._use_shoe(event.data)
        self._now = event.at

    def handle(self, inp: EngineInput) -> list[Event]:
        """Decide, apply and return the events caused by one input."""
        out: list[Event] = []
        self._out = out
        unusable = _unusable_time(inp)
        if unusable is not None:
            # A driver bug: a time that can be neither ordered by nor journaled (JSON has no
            # NaN or infinity). Say so (at the last good time), use nothing.
            self._alert(
                AlertCode.INVALID_INPUT,
                self._now,
                Source.SYSTEM,
                device=getattr(inp, "device", None),
                input=type(inp).__name__,
                reason=unusable,
            )
            self._out = []
            return out
        self._now = inp.at
        self._settle_refusals(inp)  # an absorbed refusals' summary before anything else happens
        if self._settings_notice:
            self._settings_notice = False
            differs = self._shoe_differs()
            if differs is not None:
                self._alert(AlertCode.SHOE_SETTINGS_DIFFER, inp.at, Source.SYSTEM, **differs)
        st = self.state
        rescan_before = st.rescan_alert
        self._pull_gap_raised = False
        if st.held_reads:
            self._expire_pulls(inp.at)
        if (self._restart_marks is not None or self._restart_round is not None) and self._first_after_restart(
            inp
        ):
            assert isinstance(inp, CardRead | OutsideGameCard)
            self._check_restart(inp)
        if isinstance(inp, CardRead):
            self._on_card_read(inp)
        elif isinstance(inp, ReadFailed):
            self._on_read_failed(inp)
        elif isinstance(inp, SupervisorCommand):
            for device in self._held_devices():
                self._release_all(device, "command")  # the command acts on a settled table
            self._on_command(inp)
        elif isinstance(inp, CutCardDrawn):
            self._release_all(inp.device, "interleaved")
            self._on_cut_card(inp)
        elif isinstance(inp, ShoeVerdict):
            self._release_all(inp.device, "interleaved")
            self._on_verdict(inp)
        elif isinstance(inp, OutsideGameCard):
            self._release_all(inp.device, "interleaved")
            self._on_outside_game_card(inp)
        elif isinstance(inp, ReaderSignal):
            self._release_all(inp.device, "interleaved")
            if self._is_lock_answer(inp):
                self._on_lock_answer(inp)
            else:
                self._on_reader_signal(inp)
        elif isinstance(inp, DeviceConnection):
            self._on_connection(inp)
        elif isinstance(inp, StorageState):
            self._on_storage(inp)
        elif isinstance(inp, BettingOpened):
            self._on_betting_opened(inp)
        elif isinstance(inp, BettingClosed):
            self._on_betting_closed(inp)
        elif isinstance(inp, ShoeSignal):
            self._release_all(inp.device, "interleaved")
            self._on_shoe_signal(inp)
        elif isinstance(inp, Tick):
            pass  # expiry above is all a tick does
        # A rescan open before this input, or raised by it for a pull's gap, and now closed:
        # the cards held below the missing one follow.
        if (rescan_before is not None or self._pull_gap_raised) and st.rescan_alert is None and st.held_reads:
            for device in self._held_devices():
                self._release_by_target(device)
                self._release_all(device, "rescanned")
        self._out = []
        return out


def _unusable_time(inp: EngineInput) -> str | None:
    """Why a time an input carries is not a finite number, None when all of them are."""
    if not math.isfinite(inp.at):
        return f"time {inp.at!r} is not a finite number"
    if isinstance(inp, BettingOpened) and inp.closes_at is not None and not math.isfinite(inp.closes_at):
        return f"closes_at {inp.closes_at!r} is not a finite number"
    return None
