"""Supervisor commands: validated against the table state, answered with exactly one
``command_accepted`` / ``command_refused`` event, then their effects (what changed, who asked)."""

from __future__ import annotations

from collections import Counter

from common.inputs import (
    Source,
    SupervisorCommand,
)
from daemon.alerts import HOLDING_CODES, AlertCode
from daemon.engine import commands as args_
from daemon.engine.core import Effect, EngineCore, Placement
from daemon.engine.events import EventKind
from daemon.engine.state import (
    ROUND_SLOTS,
    Phase,
    RoundState,
)
from daemon.rules.outcome import next_slot


class SupervisorCommands(EngineCore):
    """Every action of ``commands.ACTIONS``: ``_cmd_<action>`` returns a refusal or an effect."""

    def _on_command(self, cmd: SupervisorCommand) -> None:
        handler = getattr(self, f"_cmd_{cmd.action}", None) if cmd.action in args_.ACTIONS else None
        if handler is None:
            self._refuse(cmd, f"unknown action {cmd.action!r}; accepted: {', '.join(args_.ACTIONS)}")
            return
        if not isinstance(cmd.args, dict):
            self._refuse(cmd, "args must be an object")
            return
        try:
            outcome = handler(cmd)
        except args_.ArgError as exc:
            self._refuse(cmd, str(exc))
            return
        if isinstance(outcome, str):
            self._refuse(cmd, outcome)
            return
        self._emit(
            EventKind.COMMAND_ACCEPTED,
            cmd.at,
            Source.SUPERVISOR.value,
            {"command_id": cmd.command_id, "action": cmd.action, "actor": cmd.actor, "reason": None},
        )
        outcome()

    def _refuse(self, cmd: SupervisorCommand, reason: str) -> None:
        self._emit(
            EventKind.COMMAND_REFUSED,
            cmd.at,
            Source.SUPERVISOR.value,
            {"command_id": cmd.command_id, "action": cmd.action, "actor": cmd.actor, "reason": reason},
        )

    def _cmd_new_shoe(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"shoe_id"})
        shoe_id = args_.opt_shoe_id(cmd.args)
        st = self.state
        if st.phase == Phase.ROUND:
            return f"round {st.hand} is in progress: finish or void it first"
        if st.held:
            return f"held round(s) {sorted(st.held)} await a decision: resolve or void them first"
        if shoe_id is not None and shoe_id == st.shoe_id:
            return f"shoe id {shoe_id!r} is the current shoe's id"
        return lambda: self._start_shoe(cmd.at, shoe_id, cmd, Source.SUPERVISOR.value)

    def _target_round(self, cmd: SupervisorCommand) -> RoundState | str:
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            if st.round is not None:
                return st.round
            if len(st.held) == 1:
                return next(iter(st.held.values()))
            return (
                "no round in progress"
                if not st.held
                else f"several rounds are held {sorted(st.held)}: give hand"
            )
        rnd = st.round_for(hand)
        if rnd is None:
            return f"hand {hand} is neither in progress nor held"
        return rnd

    def _cmd_void_round(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"hand", "reason", "opening_burn"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if args_.opt_flag(cmd.args, "opening_burn"):
            return self._void_as_opening_burn(cmd, hand, reason)
        completed = False
        if hand is not None and st.round_for(hand) is None:
            if st.last_decided is None or st.last_decided["hand"] != hand:
                return f"hand {hand} is not in progress, held, or the last completed round"
            completed = True
            target_hand = hand
            cards = dict(st.last_decided["cards"])
        else:
            target = self._target_round(cmd)
            if isinstance(target, str):
                return target
            target_hand, cards = target.hand, dict(target.cards)
        return lambda: self._void_round(cmd, target_hand, cards, reason, completed)

    def _void_as_opening_burn(self, cmd: SupervisorCommand, hand: int | None, reason: str) -> Effect | str:
        """RULES.md shoe procedure: a forgotten opening burn caught before the first round is
        corrected on the spot (seed 002): the cards dealt as round 1 (in progress or held) are
        burned after all, and round 1 is dealt afresh with the same hand number."""
        st = self.state
        if st.phase in (Phase.NO_SHOE, Phase.OVER):
            return "no shoe is being dealt"
        if hand not in (None, 1):
            return "only round 1 can be turned into the opening burn"
        if st.hand == 0:
            return "no round has been dealt yet: the cards since the indicator are burn cards already"
        rnd = st.round_for(1)
        if st.hand > 1 or st.results or rnd is None:
            return (
                "round 1 has completed or later rounds were dealt: a forgotten opening burn now makes the "
                "shoe invalid (RULES.md shoe procedure): void_shoe, then new_shoe"
            )
        cards = dict(rnd.cards)

        def effect() -> None:
            source = Source.SUPERVISOR.value
            for alert_id in self._alerts_about(1):
                self._clear_alert(alert_id, cmd.at, source, "round 1 burned", cmd)
            pending = st.rescan_alert
            if pending is not None and st.alerts[pending].get("hand") == 1:
                self._clear_alert(pending, cmd.at, source, "round 1 burned", cmd)
            data = {"hand": 1, "cards": cards, "reason": reason, "was_completed": False, "opening_burn": True}
            self._emit(
                EventKind.ROUND_VOIDED,
                cmd.at,
                source,
                data | {"actor": cmd.actor, "command_id": cmd.command_id},
                hand=1,
            )
            self._offer(1, cmd.at, source)

        return effect

    def _is_holding(self, alert_id: str) -> bool:
        """Whether the alert keeps a round (current, held, or the next one) from completing."""
        st = self.state
        if alert_id in st.next_round_holds:
            return True
        rounds = [*([st.round] if st.round is not None else []), *st.held.values()]
        return any(alert_id in rnd.holds for rnd in rounds)

    def _alerts_about(self, hand: int) -> list[str]:
        """Open alerts a void of ``hand`` settles: those holding it, and round-holding kinds
        raised about it after it had completed."""
        st = self.state
        rnd = st.round_for(hand)
        holding = [a for a in rnd.holds if a in st.alerts] if rnd is not None else []
        about = [
            a
            for a, d in st.alerts.items()
            if d.get("hand") == hand
            and a not in holding
            and d["code"] in HOLDING_CODES
            and not self._is_holding(a)  # (an unneeded card after ``hand`` holds the next round)
        ]
        return holding + about

    def _void_round(
        self, cmd: SupervisorCommand, hand: int, cards: dict[str, str], reason: str, completed: bool
    ) -> None:
        st = self.state
        source = Source.SUPERVISOR.value
        was_current = st.round is not None and st.round.hand == hand
        for alert_id in self._alerts_about(hand):
            self._clear_alert(alert_id, cmd.at, source, f"round {hand} voided", cmd)
        pending = st.rescan_alert
        if pending is not None and st.alerts[pending].get("hand") == hand:
            # the card awaiting a rescan belonged to the voided round: nothing is pending any more
            self._clear_alert(pending, cmd.at, source, f"round {hand} voided", cmd)
        self._emit(
            EventKind.ROUND_VOIDED,
            cmd.at,
            source,
            {
                "hand": hand,
                "cards": cards,
                "reason": reason,
                "was_completed": completed,
                "actor": cmd.actor,
                "command_id": cmd.command_id,
            },
            hand=hand,
        )
        if was_current and st.phase != Phase.OVER:
            self._after_round(hand, cmd.at, source)

    def _cmd_void_shoe(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"reason"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        if st.shoe_id is None or (
            st.phase == Phase.OVER and not st.held and st.shoe_end_reason != "cut_card"
        ):
            return "no shoe to void"

        def effect() -> None:
            source = Source.SUPERVISOR.value
            voided: list[int] = []
            for rnd in [*([st.round] if st.round is not None else []), *st.held.values()]:
                voided.append(rnd.hand)
                for alert_id in self._alerts_about(rnd.hand):
                    self._clear_alert(alert_id, cmd.at, source, "shoe voided", cmd)
                self._emit(
                    EventKind.ROUND_VOIDED,
                    cmd.at,
                    source,
                    {
                        "hand": rnd.hand,
                        "cards": dict(rnd.cards),
                        "reason": f"shoe voided: {reason}",
                        "was_completed": False,
                        "actor": cmd.actor,
                        "command_id": cmd.command_id,
                    },
                    hand=rnd.hand,
                )
            for alert_id in list(st.next_round_holds):
                if alert_id in st.alerts:
                    self._clear_alert(alert_id, cmd.at, source, "shoe voided", cmd)
            self._emit(
                EventKind.SHOE_VOIDED,
                cmd.at,
                source,
                {
                    "shoe_id": st.shoe_id,
                    "reason": reason,
                    "voided_hands": voided,
                    "actor": cmd.actor,
                    "command_id": cmd.command_id,
                },
            )
            self._end_shoe(cmd.at, source, "voided")

        return effect

    def _cmd_assign_card(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"card", "slot", "hand"})
        card = args_.req_card(cmd.args, "card")
        slot = args_.slot_arg(cmd.args, "slot", args_.CARD_SLOT_NAMES, False)
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        st = self.state
        if st.phase in (Phase.NO_SHOE, Phase.OVER) and hand is None:
            return "no shoe is being dealt"
        if st.counts.get(card.code, 0) >= self.settings.decks:
            decks = self.settings.decks
            return f"card {card.code} has already appeared {decks} times in this {decks}-deck shoe"
        if hand is not None and (st.round is None or st.round.hand != hand):
            rnd = st.held.get(hand)
            if rnd is None:
                return f"hand {hand} is neither in progress nor held"
            needed = rnd.next_slot()
            if needed is None:
                return f"held round {hand} needs no more cards"
            plan = Placement(needed)
        else:
            plan = self._plan(cmd.at, detect_unneeded=False)
        if slot is not None and slot != plan.slot:
            return f"the next card goes to {plan.slot}, not {slot}"
        if plan.opens_round and st.storage_full:
            return "the journal is full: no new round can open until it has room"
        return lambda: self._place(plan, card.code, cmd.at, Source.SUPERVISOR.value, cmd=cmd, hand=hand)

    def _correct(
        self, cmd: SupervisorCommand, rnd: RoundState, after: dict[str, str], action: str
    ) -> Effect | str:
        """Validate a rearrangement of a round's cards and return its effect.

        Cards new to the round are "supplied" (checked against the shoe's composition and
        counted); cards no longer in it are "removed" (they stay counted: they left the shoe).
        """
        ordered = {s: after[s] for s in ROUND_SLOTS if s in after}
        probe = RoundState(hand=rnd.hand, opened_at=rnd.opened_at, cards=ordered)
        try:
            next_slot(*probe.sides())
        except ValueError as exc:
            return f"the corrected round would be illegal: {exc}"
        if ordered == rnd.cards:
            return "the correction changes nothing"
        spare = Counter(rnd.cards.values())
        supplied: list[str] = []
        for slot, code in ordered.items():
            if spare[code] > 0:
                spare[code] -= 1
            else:
                supplied.append(slot)
        removed = sorted(spare.elements())
        # A card the engine took as this round's unneeded burn (a fast dealer's real Player 1) is
        # out of the shoe and counted already: put back into the round, it is not counted again.
        st = self.state
        burned = Counter(
            st.alerts[a]["details"]["card"]
            for a in rnd.holds
            if st.alerts[a]["code"] == AlertCode.UNNEEDED_CARD.value and st.alerts[a]["holds"] == "next_round"
        )
        from_burn: list[str] = []
        for slot in supplied:
            if burned[ordered[slot]] > 0:
                burned[ordered[slot]] -= 1
                from_burn.append(slot)
        new_counts = Counter(ordered[s] for s in supplied if s not in from_burn)
        decks = self.settings.decks
        for code, n in new_counts.items():
            if self.state.counts.get(code, 0) + n > decks:
                return f"card {code} would appear more than {decks} times in this {decks}-deck shoe"

        # The slot a pending rescan (misread or over-composition card) is waiting for.
        pending_slot = rnd.next_slot() if rnd is self.state.round else None

        def effect() -> None:
            source = Source.SUPERVISOR.value
            self._emit(
                EventKind.ROUND_CORRECTED,
                cmd.at,
                source,
                {
                    "hand": rnd.hand,
                    "action": action,
                    "before": dict(rnd.cards),
                    "after": ordered,
                    "supplied": supplied,
                    "removed": removed,
                    **({"from_unneeded_burn": from_burn} if from_burn else {}),
                    "args": dict(cmd.args),
                    "actor": cmd.actor,
                    "command_id": cmd.command_id,
                },
                hand=rnd.hand,
            )
            if st.rescan_alert is not None and pending_slot is not None and pending_slot in supplied:
                self._clear_alert(st.rescan_alert, cmd.at, source, "corrected", cmd)
            # The correction is the supervisor's reading of this round's cards: it answers the
            # unneeded-card alerts that held it (other holds stay: resolve_hold).
            unneeded = [a for a in rnd.holds if st.alerts[a]["code"] == AlertCode.UNNEEDED_CARD.value]
            if rnd is self.state.round and rnd.next_slot() is None:
                for alert_id in unneeded:
                    self._clear_alert(alert_id, cmd.at, source, "corrected", cmd)
                self._decide(rnd, cmd.at, source, cmd.at)
            elif unneeded:
                self._release_unneeded(unneeded, cmd, "corrected")

        return effect

    def _cmd_rearrange(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"cards", "hand"})
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        return self._correct(cmd, rnd, args_.req_slot_cards(cmd.args, "cards"), "rearrange")

    def _cmd_move_card(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"from", "to", "hand"})
        src, dst = args_.req_slot(cmd.args, "from"), args_.req_slot(cmd.args, "to")
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        if src not in rnd.cards:
            return f"slot {src} of hand {rnd.hand} holds no card"
        if dst in rnd.cards:
            return f"slot {dst} of hand {rnd.hand} already holds {rnd.cards[dst]}: use swap"
        after = {s: c for s, c in rnd.cards.items() if s != src} | {dst: rnd.cards[src]}
        return self._correct(cmd, rnd, after, "move_card")

    def _cmd_swap(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"a", "b", "sides", "hand"})
        rnd = self._target_round(cmd)
        if isinstance(rnd, str):
            return rnd
        if args_.opt_flag(cmd.args, "sides"):
            if "a" in cmd.args or "b" in cmd.args:
                return "give either sides=true or slots a and b, not both"
            mirror = {"P1": "B1", "B1": "P1", "P2": "B2", "B2": "P2", "P3": "B3", "B3": "P3"}
            after = {mirror[s]: c for s, c in rnd.cards.items()}
        else:
            a, b = args_.req_slot(cmd.args, "a"), args_.req_slot(cmd.args, "b")
            if a == b or a not in rnd.cards or b not in rnd.cards:
                return f"swap needs two different filled slots of hand {rnd.hand}; filled: {list(rnd.cards)}"
            after = dict(rnd.cards)
            after[a], after[b] = rnd.cards[b], rnd.cards[a]
        return self._correct(cmd, rnd, after, "swap")

    def _cmd_acknowledge_alert(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"alert_id"})
        alert_id = args_.opt_text(cmd.args, "alert_id", 100)
        st = self.state
        if alert_id is None:
            raise args_.ArgError("argument 'alert_id' is required")
        alert = st.alerts.get(alert_id)
        if alert is None:
            return f"no open alert {alert_id!r}"
        if alert["code"] == AlertCode.UNNEEDED_CARD.value:
            # The supervisor accepts the engine's reading: the round it held goes on (or completes).
            return lambda: self._release_unneeded([alert_id], cmd, "acknowledged")
        if self._is_holding(alert_id):
            return "this alert holds a round: use resolve_hold, a correction or void_round"
        if alert["code"] == AlertCode.READER_DISCONNECTED.value and alert.get("device") in st.disconnected:
            return f"device {alert.get('device')!r} is still disconnected"
        return lambda: self._clear_alert(alert_id, cmd.at, Source.SUPERVISOR.value, "acknowledged", cmd)

    def _release_unneeded(self, alert_ids: list[str], cmd: SupervisorCommand, reason: str) -> None:
        """Clear ``unneeded_card`` alerts; a held round they alone kept back completes as it stands."""
        st = self.state
        source = Source.SUPERVISOR.value
        held = [r for r in st.held.values() if any(a in r.holds for a in alert_ids)]
        for alert_id in alert_ids:
            self._clear_alert(alert_id, cmd.at, source, reason, cmd)
        for rnd in held:
            self._try_complete_held(rnd, cmd.at, source)

    def _cmd_resolve_hold(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"hand"})
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            candidates = sorted(st.held) + (
                [st.round.hand] if st.round is not None and st.round.holds else []
            )
            if len(candidates) != 1:
                return (
                    "no held round" if not candidates else f"several rounds are held {candidates}: give hand"
                )
            hand = candidates[0]
        rnd = st.round_for(hand)
        if rnd is None or (rnd is st.round and not rnd.holds):
            return f"hand {hand} is not held"
        needed = rnd.next_slot()
        if rnd is not st.round and needed is not None:
            return f"held round {hand} still needs {needed}: supply it with assign_card or rearrange"
        if self.variant_missing is not None:
            return f"{self._variant_missing_text()}: void the round or the shoe"
        if self._needs_die and rnd.die is None and rnd is not st.round:
            return f"hand {hand} needs the super-round die: send super_round_die"
        resolved_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR.value
            for alert_id in [a for a in rnd.holds if a in st.alerts]:
                self._clear_alert(alert_id, cmd.at, source, "hold resolved", cmd)
            self._emit(
                EventKind.HOLD_RESOLVED,
                cmd.at,
                source,
                {"hand": resolved_hand, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=resolved_hand,
            )
            if rnd is not st.round:
                self._try_complete_held(rnd, cmd.at, source)
            # Other held rounds kept back only by the alerts just cleared complete as they stand.
            for other in [r for r in st.held.values() if r is not rnd]:
                self._try_complete_held(other, cmd.at, source)

        return effect

    def _cmd_rescan_ack(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, set())
        alert_id = self.state.rescan_alert
        if alert_id is None:
            return "no rescan is pending"
        return lambda: self._clear_alert(alert_id, cmd.at, Source.SUPERVISOR.value, "rescan_ack", cmd)

    def _cmd_super_round_die(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, {"value", "hand"})
        die = self.variant.super_round
        if not self._needs_die or die is None:
            return f"variant {self.variant.name!r} has no super round"
        value = args_.req_int(cmd.args, "value", 1, die.die_faces)
        st = self.state
        if st.phase in (Phase.NO_SHOE, Phase.OVER) and not st.held:
            return "no shoe is being dealt"
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            hand = st.round.hand if st.round is not None else st.hand + 1
        rnd = st.round_for(hand)
        if rnd is None and hand != st.hand + 1:
            return f"hand {hand} is not in progress, held or next"
        if (rnd.die if rnd is not None else st.dies.get(hand)) is not None:
            return f"hand {hand} already has its die"
        target_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR.value
            self._emit(
                EventKind.SUPER_ROUND_DIE,
                cmd.at,
                source,
                {"hand": target_hand, "value": value, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=target_hand,
            )
            held = st.held.get(target_hand)
            if held is not None:
                self._try_complete_held(held, cmd.at, source)

        return effect

    def _reader_command(self, cmd: SupervisorCommand) -> Effect | str:
        args_.check_keys(cmd.args, set())

        def effect() -> None:
            self._emit(
                EventKind.READER_COMMAND_REQUESTED,
                cmd.at,
                Source.SUPERVISOR.value,
                {"action": cmd.action, "command_id": cmd.command_id, "actor": cmd.actor},
            )

        return effect

    def _cmd_lock(self, cmd: SupervisorCommand) -> Effect | str:
        return self._reader_command(cmd)

    def _cmd_unlock(self, cmd: SupervisorCommand) -> Effect | str:
        return self._reader_command(cmd)
