"""A squeeze table's reveals (``README.md``, "Squeeze"): the game server's ``reveal`` command naming
slots, or a dealer button / reader mark revealing the next slot in the configured order; each slot
revealed is a ``card_revealed`` with its card and nonce, and a round whose cards are all revealed and
complete is decided then. A card drawn while a round only awaits its reveal is refused."""

from __future__ import annotations

from typing import Any

from common.inputs import RevealSignal, Source, SupervisorCommand
from common.slots import OPENING_SLOTS
from daemon.alerts import AlertCode
from daemon.engine import commands as args_
from daemon.engine.commands import Outcome, Refused
from daemon.engine.dealing import Dealing
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.payloads import ReadFields
from daemon.engine.reveal_fold import slot_key
from daemon.engine.rounds import RoundState
from daemon.engine.settings import RevealSource
from daemon.engine.shoe import ShoeSetup
from daemon.engine.squeeze import SCHEME, unrevealed
from daemon.engine.state import TableState

_SLOT_NAMES = frozenset(args_.ROUND_SLOT_NAMES)


class Reveals:
    """Reveals slots of squeeze rounds and refuses what would show a card out of turn."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter, dealing: Dealing) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing

    # ------------------------------------------------------------------ the server's command
    def reveal_command(self, cmd: SupervisorCommand) -> Outcome:
        """``reveal``: args ``slots`` (the slots to show, in order), ``hand`` (optional: the round
        in progress, else the oldest held round with a sealed card)."""
        args_.check_keys(cmd.args, {"slots", "hand"})
        slots = cmd.args.get("slots")
        if not isinstance(slots, list) or not slots or not all(s in _SLOT_NAMES for s in slots):
            raise args_.ArgError(
                f"argument 'slots' must be a non-empty list of {', '.join(sorted(_SLOT_NAMES))}"
            )
        if len(set(slots)) != len(slots):
            raise args_.ArgError("argument 'slots' names a slot twice")
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        refusal = self._refusal(RevealSource.SERVER, slots, hand)
        if refusal is not None:
            return self._refused(cmd.at, refusal, slots)
        rnd = self._round(hand)
        assert rnd is not None
        revealed_by = {"source": RevealSource.SERVER, "actor": cmd.actor, "command_id": cmd.command_id}
        return lambda: self._reveal(rnd, slots, cmd.at, revealed_by)

    # ------------------------------------------------------------------ a button or reader mark
    def on_signal(self, inp: RevealSignal) -> None:
        """A dealer button press or reader mark: the next slot in the configured order."""
        rnd = self._round(None)
        slot = None if rnd is None else self._next_in_order(rnd)
        refusal = self._refusal(inp.source, [] if slot is None else [slot], None)
        if refusal is None and rnd is not None and slot is None:
            refusal = ("not_dealt", f"round {rnd.hand} has no dealt card left to reveal")
        if refusal is not None or rnd is None or slot is None:
            self._raise_refused(inp.at, refusal or ("no_round", "no round to reveal"), [], inp.device)
            return
        self._reveal(rnd, [slot], inp.at, {"source": inp.source, "actor": inp.device, "command_id": None})

    # ------------------------------------------------------------------ checks
    def _round(self, hand: int | None) -> RoundState | None:
        st = self.state
        if hand is not None:
            return st.round_for(hand)
        if st.round is not None:
            return st.round
        for _, rnd in sorted(st.held.items()):
            if unrevealed(st, rnd):
                return rnd
        return None

    def _next_in_order(self, rnd: RoundState) -> str | None:
        hidden = set(unrevealed(self.state, rnd))
        for slot in self.shoe.settings.reveal.order:
            if slot in hidden:
                return slot
        return None

    def _refusal(self, source: str, slots: list[str], hand: int | None) -> tuple[str, str] | None:
        """Why revealing ``slots`` now is refused (a reason code and its explanation), or None."""
        settings = self.shoe.settings.reveal
        if not self.emitter.squeeze:
            return ("not_squeeze", "this table deals open (table.reveal.mode): there is nothing to reveal")
        if source != settings.order_source:
            return (
                "wrong_source",
                f"this table's reveals come from its {settings.order_source}, not {source}",
            )
        rnd = self._round(hand)
        if rnd is None:
            return (
                "no_round",
                "no round in progress or held" if hand is None else f"hand {hand} is not open",
            )
        hidden = unrevealed(self.state, rnd)
        order = settings.order
        shown: set[str] = set()
        for slot in slots:
            if slot not in rnd.cards:
                return ("not_dealt", f"slot {slot} of round {rnd.hand} was not dealt")
            if slot not in hidden:
                return ("already_revealed", f"slot {slot} of round {rnd.hand} is revealed already")
            for earlier in order[: order.index(slot)]:
                waiting = earlier in hidden or (earlier in OPENING_SLOTS and earlier not in rnd.cards)
                if waiting and earlier not in shown:
                    return ("out_of_order", f"slot {earlier} comes before {slot} (table.reveal.order)")
            shown.add(slot)
        return None

    def _refused(self, at: float, refusal: tuple[str, str], slots: list[str]) -> Refused:
        return Refused(
            f"{refusal[0]}: {refusal[1]}", alert=lambda: self._raise_refused(at, refusal, slots, None)
        )

    def _raise_refused(
        self, at: float, refusal: tuple[str, str], slots: list[str], device: str | None
    ) -> None:
        reason, explanation = refusal
        rnd = self.state.round
        self.emitter.alert(
            AlertCode.REVEAL_REFUSED,
            at,
            Source.SUPERVISOR if device is None else Source.READER,
            hand=None if rnd is None else rnd.hand,
            device=device,
            reason=reason,
            slots=list(slots),
            explanation=explanation,
            reveal_source=self.shoe.settings.reveal.order_source,
        )

    # ------------------------------------------------------------------ revealing
    def _reveal(self, rnd: RoundState, slots: list[str], at: float, revealed_by: dict[str, Any]) -> None:
        st = self.state
        source = Source.SUPERVISOR if revealed_by["source"] == RevealSource.SERVER else Source.READER
        for slot in slots:
            entry = st.sealed_slots[slot_key(rnd.hand, slot)]
            data = {
                "slot": slot,
                "round": rnd.hand,
                "card": rnd.cards[slot],
                "nonce": entry["nonce"],
                "commitment": entry["commitment"],
                "scheme": SCHEME,
                "revealed_by": dict(revealed_by),
            }
            self.emitter.emit(EventKind.CARD_REVEALED, at, source, data, hand=rnd.hand)
        if rnd.next_slot() is None and not unrevealed(st, rnd):
            if rnd is st.round:
                self.dealing.decide(rnd, at, source, at)
            else:
                self.dealing.try_complete_held(rnd, at, source)

    # ------------------------------------------------------------------ a card out of turn
    def refuse_card(self, code: str, at: float, source: str, fields: ReadFields) -> None:
        """A card while the round in progress needs none, only its reveal: refused, counted (it
        left the shoe), its identity sealed; the round is held."""
        st = self.state
        rnd = st.round
        assert rnd is not None
        seen = st.counts.get(code, 0)
        counted = seen < self.shoe.settings.decks
        alert_id = self.emitter.alert(
            AlertCode.CARD_BEFORE_REVEAL,
            at,
            source,
            hand=rnd.hand,
            holds=rnd.hand,
            device=fields.get("device"),
            read=fields,
            reason="awaiting_reveal",
            counted=counted,
            card=code,
        )
        refused = {"card": code, "reason": "awaiting_reveal", "counted": counted, "refused": 1}
        self.emitter.emit(
            EventKind.CARD_REFUSED,
            at,
            source,
            refused | {"alert_id": alert_id, "read": fields},
            hand=rnd.hand,
        )
