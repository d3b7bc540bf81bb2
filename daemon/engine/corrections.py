"""Supervisor commands that correct a round's cards (daemon/rules/RULES.md dealing mistakes 4 and 5, and the
unneeded cards of mistakes 1-2): ``assign_card``, ``rearrange``, ``move_card``, ``swap``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from common.inputs import (
    Source,
    SupervisorCommand,
)
from common.slots import MIRROR, ROUND_SLOTS, SLOT_NAMED, Slot
from daemon.alerts import UNNEEDED_CODES
from daemon.engine import commands as args_
from daemon.engine.commands import Outcome, Refused
from daemon.engine.dealing import Dealing, Placement
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.phases import OUTSIDE_SHOE, CardPlace
from daemon.engine.rounds import RoundState, find_loose, oldest_loose_hand
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState
from daemon.rules.outcome import next_slot


@dataclass(frozen=True, slots=True)
class Correction:
    """A validated correction of a round's cards, as its ``round_corrected`` event records it."""

    action: str
    after: dict[str, str]
    """The round's cards after it, in draw order."""
    supplied: list[str]
    """Slots whose card is new to the round (counted against the shoe, unless ``from_burn``)."""
    removed: list[str]
    """Cards no longer in the round (they stay counted: they left the shoe)."""
    from_burn: list[str]
    """Supplied slots whose card was burned as unneeded (counted already)."""
    from_outside: list[str]
    """Supplied slots whose card was counted as drawn outside the game (e.g. exposed during betting)."""
    pending_slot: Slot | None
    """The slot a pending rescan is waiting for (the round in progress only)."""


class RoundCorrections:
    """The correcting commands (each returns an effect or a refusal) and the round a command names."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing

    def __init__(self, *, state: TableState, shoe: ShoeSetup, emitter: Emitter, dealing: Dealing) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing

    def target_round(self, cmd: SupervisorCommand) -> RoundState | Refused:
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            if st.round is not None:
                return st.round
            if len(st.held) == 1:
                return next(iter(st.held.values()))
            return Refused(
                "no round in progress"
                if not st.held
                else f"several rounds are held {sorted(st.held)}: give hand"
            )
        rnd = st.round_for(hand)
        if rnd is None:
            return Refused(f"hand {hand} is neither in progress nor held")
        return rnd

    def assign_card(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"card", "slot", "hand"})
        card = args_.req_card(cmd.args, "card")
        slot = args_.slot_arg(cmd.args, "slot", args_.CARD_SLOT_NAMES, False)
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        st = self.state
        if st.phase in OUTSIDE_SHOE and hand is None:
            return Refused("no shoe is being dealt")
        if st.counts.get(card.code, 0) >= self.shoe.settings.decks:
            decks = self.shoe.settings.decks
            return Refused(f"card {card.code} has already appeared {decks} times in this {decks}-deck shoe")
        if hand is not None and (st.round is None or st.round.hand != hand):
            rnd = st.held.get(hand)
            if rnd is None:
                return Refused(f"hand {hand} is neither in progress nor held")
            needed = rnd.next_slot()
            if needed is None:
                return Refused(f"held round {hand} needs no more cards")
            plan = Placement(needed)
        else:
            plan = self.dealing.plan(cmd.at, detect_unneeded=False)
        if plan.slot is CardPlace.EXPOSED:
            return Refused("betting is open: a card drawn now is exposed during betting, never dealt")
        if slot is not None and slot != plan.slot:
            return Refused(f"the next card goes to {plan.slot}, not {slot}")
        if plan.opens_round and st.storage_full:
            return Refused("the journal is full: no new round can open until it has room")
        return lambda: self.dealing.place(plan, card.code, cmd.at, Source.SUPERVISOR, cmd=cmd, hand=hand)

    def _correct(
        self, cmd: SupervisorCommand, rnd: RoundState, after: dict[str, str], action: str
    ) -> Outcome:
        """Validate a rearrangement of a round's cards and return its effect.

        Cards new to the round are "supplied" (checked against the shoe's composition and
        counted); cards no longer in it are "removed" (they stay counted: they left the shoe).
        """
        ordered: dict[str, str] = {s: after[s] for s in ROUND_SLOTS if s in after}
        probe = RoundState(hand=rnd.hand, opened_at=rnd.opened_at, cards=ordered)
        try:
            next_slot(*probe.sides())
        except ValueError as exc:
            return Refused(f"the corrected round would be illegal: {exc}")
        if ordered == rnd.cards:
            return Refused("the correction changes nothing")
        spare = Counter(rnd.cards.values())
        supplied: list[str] = []
        for slot, code in ordered.items():
            if spare[code] > 0:
                spare[code] -= 1
            else:
                supplied.append(slot)
        moved = self._moved(rnd, ordered, supplied)
        correction = Correction(
            action=action,
            after=ordered,
            supplied=supplied,
            removed=sorted(spare.elements()),
            from_burn=moved["burn"],
            from_outside=moved["outside"],
            # The slot a pending rescan (misread or over-composition card) is waiting for.
            pending_slot=rnd.next_slot() if rnd is self.state.round else None,
        )
        new_counts = Counter(
            ordered[s] for s in supplied if s not in correction.from_burn and s not in correction.from_outside
        )
        decks = self.shoe.settings.decks
        for code, n in new_counts.items():
            if self.state.counts.get(code, 0) + n > decks:
                return Refused(f"card {code} would appear more than {decks} times in this {decks}-deck shoe")
        return lambda: self._apply_correction(cmd, rnd, correction)

    def _moved(self, rnd: RoundState, ordered: dict[str, str], supplied: list[str]) -> dict[str, list[str]]:
        """The supplied slots whose card is already counted out of the shoe in no round, by where:
        ``burn``, burned as unneeded (a fast dealer's real Player 1, or a round's real last card after
        a misread dealt on); ``outside``, drawn outside the game (exposed during betting). Drawn just
        before the round or after it was decided, each is moved into it, never counted again."""
        loose = list(self.state.loose_cards)
        moved: dict[str, list[str]] = {"burn": [], "outside": []}
        for slot in supplied:
            for place in ("burn", "outside"):
                oldest = oldest_loose_hand(place, slot, rnd.hand)
                index = find_loose(loose, ordered[slot], place, rnd.hand, oldest_hand=oldest)
                if index is not None:
                    del loose[index]
                    moved[place].append(slot)
                    break
        return moved

    def _apply_correction(self, cmd: SupervisorCommand, rnd: RoundState, correction: Correction) -> None:
        st = self.state
        source = Source.SUPERVISOR
        self.emitter.emit(
            EventKind.ROUND_CORRECTED,
            cmd.at,
            source,
            {
                "hand": rnd.hand,
                "action": correction.action,
                "before": dict(rnd.cards),
                "after": correction.after,
                "supplied": correction.supplied,
                "removed": correction.removed,
                **({"from_unneeded_burn": correction.from_burn} if correction.from_burn else {}),
                **({"from_outside_game": correction.from_outside} if correction.from_outside else {}),
                "args": dict(cmd.args),
                "actor": cmd.actor,
                "command_id": cmd.command_id,
            },
            hand=rnd.hand,
        )
        pending_slot = correction.pending_slot
        if st.rescan_alert is not None and pending_slot is not None and pending_slot in correction.supplied:
            self.emitter.clear_alert(st.rescan_alert, cmd.at, source, "corrected", cmd=cmd)
        # The correction is the supervisor's reading of this round's cards: it answers the
        # unneeded-card alerts that held it (other holds stay: resolve_hold).
        unneeded = [a for a in rnd.holds if st.alerts[a]["code"] in UNNEEDED_CODES]
        if rnd is st.round and rnd.next_slot() is None:
            for alert_id in unneeded:
                self.emitter.clear_alert(alert_id, cmd.at, source, "corrected", cmd=cmd)
            self.dealing.decide(rnd, cmd.at, source, cmd.at)
        elif unneeded:
            self.release_unneeded(unneeded, cmd, "corrected")

    def rearrange(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"cards", "hand"})
        rnd = self.target_round(cmd)
        if isinstance(rnd, Refused):
            return rnd
        return self._correct(cmd, rnd, args_.req_slot_cards(cmd.args, "cards"), "rearrange")

    def move_card(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"from", "to", "hand"})
        src, dst = args_.req_slot(cmd.args, "from"), args_.req_slot(cmd.args, "to")
        rnd = self.target_round(cmd)
        if isinstance(rnd, Refused):
            return rnd
        if src not in rnd.cards:
            return Refused(f"slot {src} of hand {rnd.hand} holds no card")
        if dst in rnd.cards:
            return Refused(f"slot {dst} of hand {rnd.hand} already holds {rnd.cards[dst]}: use swap")
        after = {s: c for s, c in rnd.cards.items() if s != src} | {dst: rnd.cards[src]}
        return self._correct(cmd, rnd, after, "move_card")

    def swap(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"a", "b", "sides", "hand"})
        rnd = self.target_round(cmd)
        if isinstance(rnd, Refused):
            return rnd
        if args_.opt_flag(cmd.args, "sides"):
            if "a" in cmd.args or "b" in cmd.args:
                return Refused("give either sides=true or slots a and b, not both")
            after: dict[str, str] = {MIRROR[SLOT_NAMED[s]]: c for s, c in rnd.cards.items()}
        else:
            a, b = args_.req_slot(cmd.args, "a"), args_.req_slot(cmd.args, "b")
            if a == b or a not in rnd.cards or b not in rnd.cards:
                return Refused(
                    f"swap needs two different filled slots of hand {rnd.hand}; filled: {list(rnd.cards)}"
                )
            after = dict(rnd.cards)
            after[a], after[b] = rnd.cards[b], rnd.cards[a]
        return self._correct(cmd, rnd, after, "swap")

    def release_unneeded(self, alert_ids: list[str], cmd: SupervisorCommand, reason: str) -> None:
        """Clear ``unneeded_card`` (``card_before_betting_closed``) alerts; a held round they alone kept
        back completes as it stands."""
        st = self.state
        source = Source.SUPERVISOR
        held = [r for r in st.held.values() if any(a in r.holds for a in alert_ids)]
        for alert_id in alert_ids:
            self.emitter.clear_alert(alert_id, cmd.at, source, reason, cmd=cmd)
        for rnd in held:
            self.dealing.try_complete_held(rnd, cmd.at, source)
