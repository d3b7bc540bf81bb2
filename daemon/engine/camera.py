"""Camera arbitration: a camera read cross-checks the reader's cards, and fills in a card only when
the reader cannot supply it (``README.md``, "The camera")."""

from __future__ import annotations

from common.inputs import CardRead
from common.slots import SLOT_NAMED, Slot
from daemon.alerts import AlertCode
from daemon.engine.dealing import Dealing
from daemon.engine.emitter import Emitter
from daemon.engine.phases import DEALING, Phase
from daemon.engine.reads import read_fields
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState


class CameraArbiter:
    """Checks camera reads against the reader's cards; places one only for a failed reader."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter, dealing: Dealing) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing

    def _already_disputed(self, hand: int | None, slot: str, code: str) -> bool:
        """The same camera disagreement is open already (the camera may report a card again)."""
        for alert in self.state.alerts.values():
            details = alert.get("details", {})
            if (
                alert["code"] == AlertCode.CAMERA_DISAGREEMENT
                and alert.get("hand") == hand
                and details.get("slot") == slot
                and details.get("camera_card") == code
            ):
                return True
        return False

    def _reader_failed(self) -> bool:
        """The reader cannot supply the next card: a misread awaits its rescan, or every device
        that supplies cards is disconnected (one reader down while another works is no failure)."""
        st = self.state
        if st.rescan_alert is not None:
            return True
        return bool(st.reader_devices) and all(d in st.disconnected for d in st.reader_devices)

    def on_read(self, read: CardRead) -> None:
        """Camera arbitration: cross-check the reader; fill in only for a failed reader."""
        cfg = self.shoe.settings.camera
        if read.confidence is None or not read.confidence >= cfg.min_confidence:  # NaN abstains too
            return  # below threshold the camera abstains
        st = self.state
        code = read.card.code
        fields = read_fields(read)
        source = read.source
        slot = SLOT_NAMED.get(read.target) if read.target is not None else None
        ref_hand: int | None = None
        ref_cards: dict[str, str] = {}
        if st.round is not None and st.round.cards:
            ref_hand, ref_cards = st.round.hand, st.round.cards
        elif (
            st.last_decided is not None
            and st.phase != Phase.ROUND
            and read.at - st.last_decided["at"] <= cfg.late_read_window_s
        ):
            # A camera read just after the round was decided still describes that round;
            # later, the boxes hold the next round's cards.
            ref_hand, ref_cards = st.last_decided["hand"], st.last_decided["cards"]
        if slot is not None and slot in ref_cards:
            if ref_cards[slot] != code and not self._already_disputed(ref_hand, slot, code):
                assert ref_hand is not None
                still_open = st.round_for(ref_hand) is not None
                self.emitter.alert(
                    AlertCode.CAMERA_DISAGREEMENT,
                    read.at,
                    source,
                    hand=ref_hand,
                    holds=ref_hand if still_open else None,
                    device=read.device,
                    read=fields,
                    slot=slot,
                    reader_card=ref_cards[slot],
                    camera_card=code,
                    round_already_completed=not still_open,
                )
            return
        if not self._reader_failed() or st.phase not in DEALING:
            return
        plan = self.dealing.plan(read.at)
        if not isinstance(plan.slot, Slot):
            return  # burn cards have no box on the layout: the reader must rescan them
        if slot is None:
            return  # a card seen in no known box: the camera abstains, it never guesses the slot
        if plan.opens_round and st.storage_full:
            return  # no round may open: the reader's read of it is refused and counted, not this one
        if slot is not None and slot != plan.slot:
            self.emitter.alert(
                AlertCode.CAMERA_SLOT_MISMATCH,
                read.at,
                source,
                hand=st.round.hand if st.round is not None else None,
                device=read.device,
                read=fields,
                expected_slot=plan.slot,
                camera_slot=slot,
            )
            return
        if not self.dealing.composition_ok(code, read.at, source, fields):
            return
        self.dealing.place(plan, code, read.at, source, read=fields)
