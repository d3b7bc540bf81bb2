"""The table engine: a deterministic state machine from inputs to validated events.

``Engine.handle(input)`` decides the events an input causes and applies each to the
state as it is emitted (``TableState.apply``); nothing else changes the state, so
``Engine.restore(settings, variant, events)`` rebuilds an identical engine. The
engine does no I/O and reads no clock. See ``daemon/engine/README.md`` for the
state machine, every event kind, command and alert.

``Engine`` composes the parts, each a small class with its job: one :class:`TableState`, one
:class:`Emitter` (the only way an event is made), the shoe's setup, then the dealing, the
device signals, the betting window, the read sequencer and camera, the restart check, the
refusal episodes and the supervisor commands. Each part is given the parts it uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from common.inputs import (
    BettingClosed,
    BettingOpened,
    CardRead,
    ClockStatus,
    CutCardDrawn,
    DeviceConnection,
    EngineInput,
    OutsideGameCard,
    ReaderSignal,
    ReadFailed,
    RevealSignal,
    ShoeSignal,
    ShoeVerdict,
    Source,
    StorageState,
    SupervisorCommand,
    Tick,
)
from daemon.alerts import AlertCode
from daemon.engine.aggregate import RefusalEpisodes
from daemon.engine.camera import CameraArbiter
from daemon.engine.checkpoint import CheckpointError, EngineCheckpoint, fold_key
from daemon.engine.clock_gate import ClockGate
from daemon.engine.corrections import RoundCorrections
from daemon.engine.dealing import Dealing
from daemon.engine.emitter import Emitter
from daemon.engine.events import Event, EventKind
from daemon.engine.game_flow import BettingWindow
from daemon.engine.restart import RestartCheck
from daemon.engine.reveal import Reveals
from daemon.engine.sequencer import ReadSequencer, ReleaseReason
from daemon.engine.settings import TableSettings
from daemon.engine.shoe import ShoeSetup, VariantResolver
from daemon.engine.shoe_audit import ShoeAudit
from daemon.engine.shoe_commands import ShoeCommands
from daemon.engine.signals import DeviceSignals
from daemon.engine.snapshot import snapshot
from daemon.engine.state import TableState
from daemon.engine.supervisor import SupervisorCommands
from daemon.engine.window_watch import EmptyWindowWatch
from daemon.rules.variants import Variant

__all__ = ["Engine", "VariantResolver"]

_INTERLEAVED = ReleaseReason.INTERLEAVED


class Engine:
    """One table's engine. Feed inputs to ``handle``; publish the events it returns."""

    state: TableState
    """The table's state: changed only by folding events (``TableState.apply``)."""
    shoe: ShoeSetup
    emitter: Emitter
    refusals: RefusalEpisodes
    dealing: Dealing
    signals: DeviceSignals
    clock: ClockGate
    flow: BettingWindow
    restart: RestartCheck
    window_watch: EmptyWindowWatch
    camera: CameraArbiter
    sequencer: ReadSequencer
    corrections: RoundCorrections
    reveals: Reveals
    commands: SupervisorCommands
    audit: ShoeAudit
    settings_notice: bool
    """Restored under another configuration: ``shoe_settings_differ`` on the next input."""

    def __init__(
        self,
        settings: TableSettings,
        variant: Variant,
        resolve_variant: VariantResolver | None = None,
        *,
        state: TableState | None = None,
        table_id: str = "",
    ) -> None:
        """An engine for a table configured with ``settings`` and ``variant`` (``resolve_variant``:
        see :meth:`restore`); ``state``: start from this state (a checkpoint's) instead of none;
        ``table_id``: what a squeeze table's card commitments are bound to."""
        self.state = state = TableState(settings) if state is None else state
        self.shoe = shoe = ShoeSetup(settings, variant, resolve_variant)
        self.emitter = emitter = Emitter(state)
        self.refusals = refusals = RefusalEpisodes(state=state, shoe=shoe, emitter=emitter)
        self.dealing = dealing = Dealing(
            state=state, shoe=shoe, emitter=emitter, refusals=refusals, table_id=table_id
        )
        self.reveals = reveals = Reveals(state=state, shoe=shoe, emitter=emitter, dealing=dealing)
        self.signals = signals = DeviceSignals(state=state, shoe=shoe, emitter=emitter, dealing=dealing)
        self.clock = clock = ClockGate(state=state, shoe=shoe, emitter=emitter)
        self.flow = flow = BettingWindow(
            state=state, shoe=shoe, emitter=emitter, dealing=dealing, signals=signals, clock=clock
        )
        self.restart = RestartCheck(state=state, shoe=shoe, emitter=emitter)
        self.window_watch = EmptyWindowWatch(state=state, shoe=shoe, emitter=emitter)
        self.camera = camera = CameraArbiter(state=state, shoe=shoe, emitter=emitter, dealing=dealing)
        self.sequencer = ReadSequencer(
            state=state,
            shoe=shoe,
            emitter=emitter,
            refusals=refusals,
            dealing=dealing,
            flow=flow,
            camera=camera,
            reveals=reveals,
        )
        self.corrections = corrections = RoundCorrections(
            state=state, shoe=shoe, emitter=emitter, dealing=dealing
        )
        self.audit = audit = ShoeAudit(state=state, shoe=shoe, emitter=emitter)
        emitter.after_shoe_end = audit.on_shoe_ended
        shoe_commands = ShoeCommands(
            state=state, shoe=shoe, emitter=emitter, dealing=dealing, corrections=corrections
        )
        self.commands = SupervisorCommands(
            emitter=emitter,
            shoe=shoe_commands,
            corrections=corrections,
            flow=flow,
            reveals=reveals,
            audit=audit,
        )
        self.settings_notice = False

    # ------------------------------------------------------------------ the shoe's setup
    @property
    def settings(self) -> TableSettings:
        """The table settings of the shoe being dealt (its own decks)."""
        return self.shoe.settings

    @property
    def variant(self) -> Variant:
        """The variant of the shoe being dealt."""
        return self.shoe.variant

    @property
    def configured_settings(self) -> TableSettings:
        """The settings the engine was configured with (they start the next shoe)."""
        return self.shoe.configured_settings

    @property
    def configured_variant(self) -> Variant:
        """The variant the engine was configured with (it starts the next shoe)."""
        return self.shoe.configured_variant

    @property
    def absorbed(self) -> bool:
        """True when the last input handled was absorbed (no event): the service does not journal it."""
        return self.refusals.absorbed

    # ------------------------------------------------------------------ restore
    @classmethod
    def restore(
        cls,
        settings: TableSettings,
        variant: Variant,
        events: Iterable[Event],
        resolve_variant: VariantResolver | None = None,
        *,
        start: EngineCheckpoint | None = None,
        table_id: str = "",
    ) -> Engine:
        """An engine whose state is the fold of ``events`` (its own earlier output).

        ``settings``/``variant`` are the configured ones; a shoe still being dealt goes on with
        the decks and variant its ``shoe_started`` recorded (``resolve_variant`` loads that
        variant by name when it is not ``variant``; without it, or if it cannot, the shoe's
        rounds are held, never settled under another pay table). The configuration takes
        effect at the next shoe. If they differ, the first input handled raises
        ``shoe_settings_differ`` (once per shoe).

        ``start``: a checkpoint (:mod:`daemon.engine.checkpoint`) taken under these settings;
        ``events`` are then the ones after the last event it covers. ``table_id``: as for the
        constructor.
        """
        if start is None:
            engine = cls(settings, variant, resolve_variant, table_id=table_id)
        else:
            if start.key != fold_key(settings):
                raise CheckpointError(f"taken under other fold code or settings: {start.key}")
            engine = cls(
                settings, variant, resolve_variant, state=start.table_state(settings), table_id=table_id
            )
            if start.shoe is not None:
                engine.shoe.use(start.shoe)
            engine.emitter.now = start.at
        for event in events:
            engine.apply(event)
        engine.restart.note()
        state = engine.state
        if engine.shoe.differs(state) is not None and state.settings_notice_shoe != state.shoe_id:
            engine.settings_notice = True
        return engine

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready current state (the publisher retains it)."""
        shoe = self.shoe
        return snapshot(self.state, shoe.settings.decks, shoe.variant.name, shoe.blockers)

    def apply(self, event: Event) -> None:
        """Fold one event into the state."""
        self.state.apply(event)
        if event.kind == EventKind.SHOE_STARTED:
            self.shoe.use(event.data)
        self.emitter.now = event.at

    def summarise_refusals(self) -> list[Event]:
        """The pending ``cards_refused`` summary now (empty when none): the service asks before
        a clean stop, so no absorbed card is left out of the journal."""
        out: list[Event] = []
        self.emitter.out = out
        self.refusals.flush()
        self.emitter.out = []
        return out

    # ------------------------------------------------------------------ inputs
    def handle(self, inp: EngineInput) -> list[Event]:
        """Decide, apply and return the events caused by one input."""
        emitter = self.emitter
        out: list[Event] = []
        emitter.out = out
        unusable = _unusable_time(inp)
        if unusable is not None:
            # A driver bug: a time that can be neither ordered by nor journaled (JSON has no
            # NaN or infinity). Say so (at the last good time), use nothing.
            emitter.alert(
                AlertCode.INVALID_INPUT,
                emitter.now,
                Source.SYSTEM,
                device=getattr(inp, "device", None),
                input=type(inp).__name__,
                reason=unusable,
            )
            emitter.out = []
            return out
        emitter.now = inp.at
        self.refusals.settle(inp)  # an absorbed refusals' summary before anything else happens
        if self.settings_notice:
            self._notice_settings(inp.at)
        st = self.state
        rescan_before = st.rescan_alert
        sequencer = self.sequencer
        sequencer.pull_gap_raised = False
        if st.held_reads:
            sequencer.expire_pulls(inp.at)
        restart = self.restart
        if restart.restart_marks is not None or restart.restart_round is not None:
            first = restart.applies_to(inp)
            if first is not None:
                restart.check(first)
        watch = st.flow_closed_at is not None
        if watch:
            self.window_watch.check(inp.at)
        if st.last_card_at is not None:
            self.window_watch.check_silence(inp.at)
        silent_before = bool(st.alerts) and self.window_watch.silent_open()
        self._route(inp)
        if watch:
            self.window_watch.settle(inp.at)
        if silent_before:
            self.window_watch.settle_silence(inp.at)
        # A rescan open before this input, or raised by it for a pull's gap, and now closed:
        # the cards held below the missing one follow.
        if (
            (rescan_before is not None or sequencer.pull_gap_raised)
            and st.rescan_alert is None
            and st.held_reads
        ):
            for device in sequencer.held_devices():
                sequencer.release_by_target(device)
                sequencer.release_all(device, ReleaseReason.RESCANNED)
        emitter.out = []
        return out

    def _notice_settings(self, at: float) -> None:
        """The first input after a restore under another configuration: say how the shoe differs."""
        self.settings_notice = False
        differs = self.shoe.differs(self.state)
        if differs is not None:
            self.emitter.alert(AlertCode.SHOE_SETTINGS_DIFFER, at, Source.SYSTEM, **differs)

    def _route(self, inp: EngineInput) -> None:
        """The part that handles ``inp``; a device's other input first releases its held pull."""
        sequencer = self.sequencer
        match inp:
            case CardRead() if self.audit.counting(inp):
                self.audit.on_remainder_read(inp)
            case CardRead():
                sequencer.on_read(inp)
            case ReadFailed() if self.audit.counting_misread(inp):
                self.audit.on_remainder_misread(inp)
            case ReadFailed():
                sequencer.on_read_failed(inp)
            case SupervisorCommand():
                for device in sequencer.held_devices():
                    sequencer.release_all(
                        device, ReleaseReason.COMMAND
                    )  # the command acts on a settled table
                self.commands.on_command(inp)
            case CutCardDrawn() | ShoeVerdict() | OutsideGameCard() | ReaderSignal() | ShoeSignal():
                sequencer.release_all(inp.device, _INTERLEAVED)
                self._route_device_signal(inp)
            case DeviceConnection():
                self.signals.on_connection(inp)
            case StorageState():
                self.signals.on_storage(inp)
            case ClockStatus():
                self.clock.on_clock_status(inp)
            case BettingOpened():
                self.flow.on_betting_opened(inp)
            case BettingClosed():
                self.flow.on_betting_closed(inp)
            case RevealSignal():
                self.reveals.on_signal(inp)
            case Tick():
                pass  # expiry (in ``handle``) is all a tick does

    def _route_device_signal(
        self, inp: CutCardDrawn | ShoeVerdict | OutsideGameCard | ReaderSignal | ShoeSignal
    ) -> None:
        signals = self.signals
        match inp:
            case CutCardDrawn():
                signals.on_cut_card(inp)
            case ShoeVerdict():
                signals.on_verdict(inp)
            case OutsideGameCard():
                signals.on_outside_game_card(inp)
            case ReaderSignal():
                if self.flow.is_lock_answer(inp):
                    self.flow.on_lock_answer(inp)
                else:
                    signals.on_reader_signal(inp)
            case ShoeSignal():
                self.flow.on_shoe_signal(inp)


def _unusable_time(inp: EngineInput) -> str | None:
    """Why a time an input carries is not a finite number, None when all of them are."""
    if not math.isfinite(inp.at):
        return f"time {inp.at!r} is not a finite number"
    if isinstance(inp, BettingOpened) and inp.closes_at is not None and not math.isfinite(inp.closes_at):
        return f"closes_at {inp.closes_at!r} is not a finite number"
    return None
