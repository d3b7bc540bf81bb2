"""Card reads before they reach the table: duplicate transmissions, multi-card pulls
ordered by position (or, for a reader that names each card's slot, by its targets),
misreads that wait for a rescan, and camera arbitration."""

from __future__ import annotations

from enum import StrEnum

from common.inputs import (
    CardRead,
    DeviceTarget,
    ReadFailed,
    Source,
)
from common.slots import ROUND_SLOTS, SLOT_NAMED, Slot
from daemon.alerts import AlertCode
from daemon.engine.aggregate import RefusalEpisodes
from daemon.engine.camera import CameraArbiter
from daemon.engine.dealing import AWAITING_REVEAL, EXPOSED, Dealing, Placement
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.game_flow import BettingWindow
from daemon.engine.payloads import ReadFields
from daemon.engine.phases import DEALING, NEXT_ROUND, OUTSIDE_SHOE
from daemon.engine.reads import read_fields, read_from_fields
from daemon.engine.reveal import Reveals
from daemon.engine.settings import GameFlow
from daemon.engine.shoe import ShoeSetup
from daemon.engine.squeeze import NONCE
from daemon.engine.state import TableState


class ReleaseReason(StrEnum):
    """Why held reads are released (``pull_released`` data ``reason``)."""

    IN_ORDER = "in_order"  # the cards above them arrived
    BY_TARGET = "by_target"  # their targets became the expected slots
    WINDOW = "window"  # the hold window ended
    INTERLEAVED = "interleaved"  # another input from the device came first
    COMMAND = "command"  # a supervisor command acts on a settled table
    RESCANNED = "rescanned"  # the missing or unread card above them was supplied


_DRAW_ORDER: dict[str, int] = {slot: i for i, slot in enumerate(ROUND_SLOTS)}
# Bound once: ``ReleaseReason.X`` goes through the enum metaclass's ``__getattr__`` (~0.1 µs in
# Python 3.11), and every read is checked.
_INTERLEAVED = ReleaseReason.INTERLEAVED
_BETTING_WINDOW = GameFlow.BETTING_WINDOW


def _round_slot(plan: Placement) -> Slot | None:
    """The round slot a placement names (None: a card of no round)."""
    slot = plan.slot
    return slot if isinstance(slot, Slot) else None


def _hold_order(held: ReadFields) -> tuple[int, float, int]:
    """Release order of held reads: by pull position; reads held for their target by arrival."""
    position = held["position"]
    return (0 if position is None else position, held["read_at"], held["hold_id"])


class ReadSequencer:
    """Turns reader and camera reads into placed cards, in dealing order."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    refusals: RefusalEpisodes
    dealing: Dealing
    flow: BettingWindow
    camera: CameraArbiter
    reveals: Reveals
    pull_gap_raised: bool
    """Within one input: a pull's gap opened a rescan (the cards held below it follow its close)."""

    def __init__(
        self,
        *,
        state: TableState,
        shoe: ShoeSetup,
        emitter: Emitter,
        refusals: RefusalEpisodes,
        dealing: Dealing,
        flow: BettingWindow,
        camera: CameraArbiter,
        reveals: Reveals,
    ) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.refusals = refusals
        self.dealing = dealing
        self.flow = flow
        self.camera = camera
        self.reveals = reveals
        self.pull_gap_raised = False

    def held_devices(self) -> list[str]:
        seen: list[str] = []
        for r in self.state.held_reads:
            if r["device"] not in seen:
                seen.append(r["device"])
        return seen

    def expire_pulls(self, at: float) -> None:
        st = self.state
        if not st.held_reads or st.rescan_alert is not None:
            return
        window = self.shoe.settings.pull_hold_window_s
        for device in self.held_devices():
            first = min(r["read_at"] for r in st.held_reads if r["device"] == device)
            if at - first >= window:
                self.release_all(device, ReleaseReason.WINDOW)

    def release_all(self, device: str, reason: ReleaseReason) -> None:
        """Release every read held for ``device`` in position order, stopping after a misread.

        A pull with a gap in its positions (a card above the held ones never arrived) is not
        released as if complete: see ``_missing_in_pull``. After that card's rescan (reason
        ``rescanned``, or ``rescan_ack``: no card) the held reads follow as they are.
        """
        st = self.state
        if not st.held_reads or st.rescan_alert is not None:
            return
        held = sorted((r for r in st.held_reads if r["device"] == device), key=_hold_order)
        if held:
            if reason is not ReleaseReason.RESCANNED and st.phase not in OUTSIDE_SHOE:
                missing = self._pull_gap(device, held)
                if missing is not None:
                    self._missing_in_pull(device, held, missing)
                    return
            self._release(self._upto_failure(held), reason)

    def _pull_gap(self, device: str, held: list[ReadFields]) -> int | None:
        """The first pull position missing above the held reads of ``device``, if any."""
        positions = sorted(r["position"] for r in held if r["position"] is not None)
        if not positions:
            return None
        expect = 1
        if positions[0] != 1:
            st = self.state
            last_at = st.pull_last_at.get(device)
            first_at = min(r["read_at"] for r in held if r["position"] is not None)
            if last_at is not None and first_at - last_at <= self.shoe.settings.pull_hold_window_s:
                expect = st.pull_next.get(device, 1)  # the pull started with cards already placed
        for position in positions:
            if position > expect:
                return expect
            expect = max(expect, position + 1)
        return None

    def _missing_in_pull(self, device: str, held: list[ReadFields], missing: int) -> None:
        """A card above the held ones never arrived (daemon/rules/RULES.md mistakes 3 and 5: never guessed).

        Its slot waits like a misread's (``rescan_needed``: the reader's rescan, the camera,
        ``assign_card`` or a correction fills it; ``rescan_ack`` says there is none), the held
        cards wait below it, and ``missing_card`` holds the round (or the next one).
        """
        st = self.state
        self.pull_gap_raised = True
        hand = st.round.hand if st.round is not None else None
        source = held[0]["source"]
        waiting = [{"position": r["position"], "card": r["card"]} for r in held]
        self.emitter.alert(
            AlertCode.MISSING_CARD,
            self.emitter.now,
            source,
            hand=hand,
            holds=hand if hand is not None else NEXT_ROUND,
            device=device,
            reason="pull_gap",
            missing_position=missing,
            waiting=waiting,
        )
        self.emitter.alert(
            AlertCode.RESCAN_NEEDED,
            self.emitter.now,
            source,
            hand=hand,
            device=device,
            reason="pull_gap",
            reader_code=None,
            missing_position=missing,
        )

    @staticmethod
    def _upto_failure(reads: list[ReadFields]) -> list[ReadFields]:
        for i, r in enumerate(reads):
            if r["card"] is None:
                return reads[: i + 1]
        return reads

    def _release(self, reads: list[ReadFields], reason: ReleaseReason) -> None:
        first = reads[0]
        self.emitter.emit(
            EventKind.PULL_RELEASED,
            self.emitter.now,
            first["source"],
            {"device": first["device"], "hold_ids": [r["hold_id"] for r in reads], "reason": reason},
        )
        st = self.state
        pending_before = st.rescan_alert
        for k, fields in enumerate(reads):
            if pending_before is None and st.rescan_alert is not None:
                # A released card was refused into a pending slot (over the composition): the
                # cards below it wait for its rescan again, as under a misread card.
                for rest in reads[k:]:
                    held = rest | {"hold_id": st.hold_counter + 1}
                    self.emitter.emit(EventKind.READ_HELD, self.emitter.now, rest["source"], {"read": held})
                return
            read = read_from_fields(fields)
            if isinstance(read, ReadFailed):
                self._misread(read)
            else:
                self._take_read(read)

    def _sequence(self, read: CardRead | ReadFailed) -> None:
        """Order a read carrying a pull position: process it now or hold it for the cards above it."""
        st = self.state
        device = read.device
        position = read.position
        assert position is not None
        held = [r for r in st.held_reads if r["device"] == device]
        last_at = st.pull_last_at.get(device)
        active = last_at is not None and read.at - last_at <= self.shoe.settings.pull_hold_window_s
        if active and position < st.pull_next.get(device, 1):
            # A card of the pull just placed, arriving after cards below it: its place is gone.
            self._pull_order_conflict(read, "late_pull_card")
        base = 1 if position == 1 or not active else st.pull_next.get(device, 1)
        if not held and position == base:
            if isinstance(read, ReadFailed):
                self._misread(read)
            else:
                self._take_read(read)
            return
        fields = read_fields(read) | {"hold_id": st.hold_counter + 1}
        self.emitter.emit(EventKind.READ_HELD, read.at, read.source, {"read": fields})
        held = sorted((r for r in st.held_reads if r["device"] == device), key=_hold_order)
        run: list[ReadFields] = []
        expect = base
        for r in held:
            if r["position"] != expect:
                break
            run.append(r)
            expect += 1
        if run:
            self._release(self._upto_failure(run), ReleaseReason.IN_ORDER)

    def on_read(self, read: CardRead) -> None:
        """A card read from a device (on a squeeze table only with its nonce)."""
        if not (self.emitter.squeeze and self._without_nonce(read)):
            self.on_card_read(read)

    def _without_nonce(self, read: CardRead) -> bool:
        """A squeeze table's card read without a valid nonce: refused with ``invalid_input``. The
        service gives every card a fresh one: without it, its commitment could be guessed from the
        52 faces, so the read is not used."""
        if read.nonce is not None and NONCE.match(read.nonce) is not None:
            return False
        self.emitter.alert(
            AlertCode.INVALID_INPUT,
            read.at,
            Source.SYSTEM,
            device=read.device,
            input="CardRead",
            reason="a squeeze table's card read without a 32-hex-character nonce",
        )
        return True

    def on_card_read(self, read: CardRead) -> None:
        device = read.device
        if self.shoe.is_camera(read.source, read.device):
            self.camera.on_read(read)
            return
        st = self.state
        # Built once: the duplicate check reads its card code, and the placed card carries it.
        fields = read_fields(read)
        tid = read.transmission_id
        if tid is not None:
            code = fields["card"]
            assert code is not None  # (a card read's fields name its card)
            seen_at = st.recent.get((device, tid, code))
            if seen_at is not None and read.at - seen_at <= self.shoe.settings.duplicate_window_s:
                return  # the same card of the same transmission again, within the window
        if st.rescan_alert is not None:
            failed = st.alerts[st.rescan_alert].get("read")
            same_pull = (
                failed is not None
                and failed.get("device") == read.device
                and read.at - failed["read_at"] <= self.shoe.settings.pull_hold_window_s
            )
            below = None if failed is None else failed.get("position")
            if read.position is not None and below is not None and read.position > below and same_pull:
                # A card from under the misread one in the same pull: it waits for the rescan.
                fields = read_fields(read) | {"hold_id": st.hold_counter + 1}
                self.emitter.emit(EventKind.READ_HELD, read.at, read.source, {"read": fields})
                return
            expected = self._expected_round_slot(read.at, during_rescan=True)
            if (
                read.position is None
                and expected is not None
                and self._names_later_slot(read, expected)
                and same_pull
            ):
                self._hold_for_target(read, expected)  # the same, for a reader that names slots
                return
            # Nothing moves on after a misread: the next valid read is the dealer's rescan of it.
            self._take_read(read)
            return
        if read.position is None:
            if device in st.pull_last_at:
                self._unpositioned_in_pull(read)
            in_pull = False
            plan: Placement | None = None
            if read.target is not None:  # (no look-ahead at all for readers that name no slot)
                plan = self._expected_plan(read.at)
                expected = plan.slot if plan is not None and isinstance(plan.slot, Slot) else None
                if expected is not None and self._names_later_slot(read, expected):
                    self._hold_for_target(read, expected)
                    return
                in_pull = expected is not None and SLOT_NAMED.get(read.target) is expected
                in_pull = in_pull and self._target_held(device)
            if st.held_reads:
                plan = None  # (a release below, or a held pull, may move the table on first)
                if not in_pull:
                    self.release_all(device, _INTERLEAVED)
            self._take_read(read, fields, plan)
            if in_pull:
                self.release_by_target(device)
        else:
            if self._target_held(read.device):
                self.release_all(read.device, _INTERLEAVED)
            self._sequence(read)

    def _unpositioned_in_pull(self, read: CardRead) -> None:
        """A read without a position from a device in the middle of a positioned pull.

        Its place among the pull's cards is unknown (the pull's later cards may still come):
        it is taken in arrival order, but the round it lands in is held, never settled on a guess.
        """
        last_at = self.state.pull_last_at[read.device]
        if abs(read.at - last_at) <= self.shoe.settings.pull_hold_window_s:
            self._pull_order_conflict(read, "unpositioned_read_in_pull")

    def _pull_order_conflict(self, read: CardRead | ReadFailed, reason: str) -> None:
        """Hold the round the read lands in (``device_disagreement`` with ``reason``): the
        pull's order cannot be told from what the device reported."""
        st = self.state
        hand = st.round.hand if st.round is not None else None
        self.emitter.alert(
            AlertCode.DEVICE_DISAGREEMENT,
            read.at,
            read.source,
            hand=hand,
            holds=hand if hand is not None else NEXT_ROUND,
            device=read.device,
            card=read.card.code if isinstance(read, CardRead) else None,
            position=read.position,
            reason=reason,
            pull_next_position=st.pull_next.get(read.device),
        )

    # -- a pull from a reader that names each card's slot (Angel Eye target/index) -------------
    # Such a reader reports no position, but its target IS where the card sits in the draw
    # order (daemon/rules/RULES.md dealing mistake 3). A card naming a slot after the one the engine
    # expects waits, at most ``pull_hold_window_s``, for the cards above it; when those come
    # naming exactly the expected slots, the pull is placed in draw order of the targets.
    # Anything else (a read without a target, another slot, the window ending) releases the
    # waiting cards in arrival order, so a real disagreement still raises
    # ``device_disagreement`` and holds the round.

    def _expected_round_slot(self, at: float, *, during_rescan: bool = False) -> Slot | None:
        """The Player/Banker slot the next reader card goes to, when a target may reorder a pull
        (while a rescan is open, only ``during_rescan``: that slot is the unread card's)."""
        plan = self._expected_plan(at, during_rescan=during_rescan)
        return None if plan is None else _round_slot(plan)

    def _expected_plan(self, at: float, *, during_rescan: bool = False) -> Placement | None:
        """``_plan(at)`` when a target may reorder a pull (see ``_expected_round_slot``), else None."""
        st = self.state
        if st.phase not in DEALING or (st.rescan_alert is not None and not during_rescan):
            return None
        return self.dealing.plan(at)

    @staticmethod
    def _names_later_slot(read: CardRead, expected: str) -> bool:
        target = read.target
        return target is not None and target in _DRAW_ORDER and _DRAW_ORDER[target] > _DRAW_ORDER[expected]

    def _target_held(self, device: str) -> bool:
        held = self.state.held_reads
        return bool(held) and any(r["device"] == device and r["position"] is None for r in held)

    def _hold_for_target(self, read: CardRead, expected: str) -> None:
        st = self.state
        if any(r["device"] == read.device and r["position"] is not None for r in st.held_reads):
            self.release_all(read.device, _INTERLEAVED)  # never mix a positioned pull with this one
        fields = read_fields(read) | {"hold_id": st.hold_counter + 1}
        self.emitter.emit(
            EventKind.READ_HELD, read.at, read.source, {"read": fields, "expected_slot": expected}
        )

    def release_by_target(self, device: str) -> None:
        """Place held cards whose target is now the expected slot, one by one in draw order."""
        while True:
            expected = self._expected_round_slot(self.emitter.now)
            match = next(
                (
                    r
                    for r in self.state.held_reads
                    if r["device"] == device and r["position"] is None and r["target"] == expected
                ),
                None,
            )
            if expected is None or match is None:
                return
            self._release([match], ReleaseReason.BY_TARGET)

    def on_read_failed(self, read: ReadFailed) -> None:
        if self.shoe.is_camera(read.source, read.device):
            return  # the camera abstains; only the reader's misread asks for a rescan
        if read.position is not None and self.state.rescan_alert is None:
            self._sequence(read)
            return
        if not self._target_held(read.device):
            self.release_all(read.device, _INTERLEAVED)
        # else: cards naming a later slot than the unread one wait for its rescan, like the
        # cards under a misread card in a positioned pull (released when the rescan is placed)
        self._misread(read)

    def _misread(self, read: ReadFailed) -> None:
        st = self.state
        fields = read_fields(read)
        if st.phase in OUTSIDE_SHOE:
            self.dealing.refuse_outside_shoe(read.at, read.source, fields)
        elif st.rescan_alert is None:
            hand = st.round.hand if st.round is not None else None
            self.emitter.alert(
                AlertCode.RESCAN_NEEDED,
                read.at,
                read.source,
                hand=hand,
                device=read.device,
                read=fields,
                reason=read.reason,
                reader_code=read.code,
            )

    def _take_read(
        self, read: CardRead, fields: ReadFields | None = None, plan: Placement | None = None
    ) -> None:
        """A reader's card, in dealing order: check it and place it.

        ``fields``: ``read_fields(read)`` when the caller has built it already. ``plan``:
        ``_plan(read.at)`` when the caller has just computed it and nothing has changed the
        table since (checking the camera fill changes nothing).
        """
        st = self.state
        if fields is None:
            fields = read_fields(read)
        source = fields["source"]
        code = fields["card"]
        assert code is not None  # (a card read's fields name its card; ``Card.code`` is a property)
        if st.phase in OUTSIDE_SHOE:
            if (
                self.shoe.settings.device_starts_shoe
                and read.target is DeviceTarget.FIRST_CARD
                and not st.held
            ):
                # (held rounds of the old shoe await a supervisor: never dropped by a new shoe)
                self.dealing.start_shoe(read.at, None, None, source)
            else:
                self.dealing.refuse_outside_shoe(read.at, source, fields)
                return
        fill = st.camera_fill
        if (
            fill is not None
            and fill["card"] == code
            and read.at - fill["at"] <= self.shoe.settings.camera.fill_confirm_window_s
        ):
            if read.target is not None and read.target == fill["slot"]:
                self.emitter.emit(
                    EventKind.CARD_CONFIRMED,
                    read.at,
                    source,
                    {"hand": fill["hand"], "slot": fill["slot"], "card": fill["card"], "read": fields},
                    hand=fill["hand"],
                )
                return
            if read.target is None:
                self.emitter.alert(
                    AlertCode.AMBIGUOUS_RESCAN,
                    read.at,
                    source,
                    hand=fill["hand"],
                    device=read.device,
                    read=fields,
                    camera_slot=fill["slot"],
                )
                return
        if plan is None:
            plan = self.dealing.plan(read.at)
        if plan is EXPOSED:
            self.flow.exposed_card(code, read.at, source, fields)
            return
        if plan is AWAITING_REVEAL:
            self.reveals.refuse_card(code, read.at, source, fields)
            return
        if plan.opens_round and st.storage_full:
            self.dealing.refuse_for_storage(code, read.at, source, fields)
            return
        self.refusals.flush()  # the composition check and placing need every refused card counted
        if st.counts.get(code, 0) >= self.shoe.settings.decks:
            self.dealing.refuse_over_composition(code, read.at, source, fields)
            return
        if read.target is None and self.shoe.settings.game_flow is _BETTING_WINDOW:
            self.flow.hold_unconfirmed_rescan(plan, fields)
        self.dealing.place(plan, code, read.at, source, read=fields, target=read.target)
