"""The supervisor commands about the shoe, its rounds and its alerts: ``new_shoe``, ``void_round``,
``void_shoe``, ``acknowledge_alert``, ``resolve_hold``, ``rescan_ack``, ``super_round_die`` and the
reader's ``lock``/``unlock``. Each validates the command against the state and returns its effect
or its refusal (``commands.Outcome``)."""

from __future__ import annotations

from common.inputs import (
    Source,
    SupervisorCommand,
)
from daemon.alerts import HOLDING_CODES, UNNEEDED_CODES, AlertCode
from daemon.engine import commands as args_
from daemon.engine.commands import Outcome, Refused
from daemon.engine.corrections import RoundCorrections
from daemon.engine.dealing import Dealing
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.phases import LAST_ROUND_ENDS, OUTSIDE_SHOE, Phase, ShoeEnd
from daemon.engine.shoe import ShoeSetup
from daemon.engine.state import TableState


class ShoeCommands:
    """The commands on the shoe, its rounds and alerts (each returns an effect or a refusal)."""

    state: TableState
    shoe: ShoeSetup
    emitter: Emitter
    dealing: Dealing
    corrections: RoundCorrections

    def __init__(
        self,
        *,
        state: TableState,
        shoe: ShoeSetup,
        emitter: Emitter,
        dealing: Dealing,
        corrections: RoundCorrections,
    ) -> None:
        self.state = state
        self.shoe = shoe
        self.emitter = emitter
        self.dealing = dealing
        self.corrections = corrections

    def new_shoe(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"shoe_id"})
        shoe_id = args_.opt_shoe_id(cmd.args)
        st = self.state
        if st.phase == Phase.ROUND and self.dealing.last_round_end(st.hand) is not None:
            # the shoe's last round never got its last card (misread, never scanned): the shoe ends
            return Refused(
                f"round {st.hand}, the shoe's last, was cut short and held; the shoe ended: resolve or "
                "void it, then new_shoe",
                alert=lambda: self.dealing.cut_short(
                    cmd.at, Source.SUPERVISOR, next_round_id=None, betting_source="new_shoe"
                ),
            )
        if st.phase == Phase.ROUND:
            return Refused(f"round {st.hand} is in progress: finish or void it first")
        if st.held:
            return Refused(f"held round(s) {sorted(st.held)} await a decision: resolve or void them first")
        if st.remainder is not None:
            return Refused("the ended shoe's remainder count is running: remainder_count step finish first")
        if shoe_id is not None and shoe_id == st.shoe_id:
            return Refused(f"shoe id {shoe_id!r} is the current shoe's id")
        return lambda: self.dealing.start_shoe(cmd.at, shoe_id, cmd, Source.SUPERVISOR)

    def void_round(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"hand", "reason", "opening_burn"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if args_.opt_flag(cmd.args, "opening_burn"):
            return self._void_as_opening_burn(cmd, hand, reason)
        completed = False
        if hand is not None and st.round_for(hand) is None:
            if st.last_decided is None or st.last_decided["hand"] != hand:
                return Refused(f"hand {hand} is not in progress, held, or the last completed round")
            completed = True
            target_hand = hand
            cards = dict(st.last_decided["cards"])
        else:
            target = self.corrections.target_round(cmd)
            if isinstance(target, Refused):
                return target
            target_hand, cards = target.hand, dict(target.cards)
        return lambda: self._void_round(cmd, target_hand, cards, reason=reason, completed=completed)

    def _void_as_opening_burn(self, cmd: SupervisorCommand, hand: int | None, reason: str) -> Outcome:
        """daemon/rules/RULES.md shoe procedure: a forgotten opening burn caught before the first round is
        corrected on the spot (seed 002): the cards dealt as round 1 (in progress or held) are
        burned after all, and round 1 is dealt afresh with the same hand number."""
        st = self.state
        if st.phase in OUTSIDE_SHOE:
            return Refused("no shoe is being dealt")
        if hand not in (None, 1):
            return Refused("only round 1 can be turned into the opening burn")
        if st.hand == 0:
            return Refused(
                "no round has been dealt yet: the cards since the indicator are burn cards already"
            )
        rnd = st.round_for(1)
        if st.hand > 1 or st.results or rnd is None:
            return Refused(
                "round 1 has completed or later rounds were dealt: a forgotten opening burn now makes the "
                "shoe invalid (RULES.md shoe procedure): void_shoe, then new_shoe"
            )
        cards = dict(rnd.cards)

        def effect() -> None:
            source = Source.SUPERVISOR
            for alert_id in self._alerts_about(1):
                self.emitter.clear_alert(alert_id, cmd.at, source, "round 1 burned", cmd=cmd)
            pending = st.rescan_alert
            if pending is not None and st.alerts[pending].get("hand") == 1:
                self.emitter.clear_alert(pending, cmd.at, source, "round 1 burned", cmd=cmd)
            data = {"hand": 1, "cards": cards, "reason": reason, "was_completed": False, "opening_burn": True}
            self.emitter.emit(
                EventKind.ROUND_VOIDED,
                cmd.at,
                source,
                data | {"actor": cmd.actor, "command_id": cmd.command_id},
                hand=1,
            )
            self.dealing.offer(1, cmd.at, source)

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
        self, cmd: SupervisorCommand, hand: int, cards: dict[str, str], *, reason: str, completed: bool
    ) -> None:
        st = self.state
        source = Source.SUPERVISOR
        was_current = st.round is not None and st.round.hand == hand
        for alert_id in self._alerts_about(hand):
            self.emitter.clear_alert(alert_id, cmd.at, source, f"round {hand} voided", cmd=cmd)
        pending = st.rescan_alert
        if pending is not None and st.alerts[pending].get("hand") == hand:
            # the card awaiting a rescan belonged to the voided round: nothing is pending any more
            self.emitter.clear_alert(pending, cmd.at, source, f"round {hand} voided", cmd=cmd)
        self.emitter.emit(
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
            self.dealing.after_round(hand, cmd.at, source)

    def void_shoe(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"reason"})
        reason = args_.opt_text(cmd.args, "reason") or ""
        st = self.state
        if st.shoe_id is None or (
            st.phase == Phase.OVER and not st.held and st.shoe_end_reason not in LAST_ROUND_ENDS
        ):
            return Refused("no shoe to void")

        def effect() -> None:
            source = Source.SUPERVISOR
            voided: list[int] = []
            for rnd in [*([st.round] if st.round is not None else []), *st.held.values()]:
                voided.append(rnd.hand)
                for alert_id in self._alerts_about(rnd.hand):
                    self.emitter.clear_alert(alert_id, cmd.at, source, "shoe voided", cmd=cmd)
                self.emitter.emit(
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
                    self.emitter.clear_alert(alert_id, cmd.at, source, "shoe voided", cmd=cmd)
            self.emitter.emit(
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
            self.dealing.end_shoe(cmd.at, source, ShoeEnd.VOIDED)

        return effect

    def acknowledge_alert(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"alert_id"})
        alert_id = args_.opt_text(cmd.args, "alert_id", 100)
        st = self.state
        if alert_id is None:
            raise args_.ArgError("argument 'alert_id' is required")
        alert = st.alerts.get(alert_id)
        if alert is None:
            return Refused(f"no open alert {alert_id!r}")
        if alert["code"] in UNNEEDED_CODES:
            # The supervisor accepts the engine's reading: the round it held goes on (or completes).
            return lambda: self.corrections.release_unneeded([alert_id], cmd, "acknowledged")
        if self._is_holding(alert_id):
            return Refused("this alert holds a round: use resolve_hold, a correction or void_round")
        if alert["code"] == AlertCode.READER_DISCONNECTED and alert.get("device") in st.disconnected:
            return Refused(f"device {alert.get('device')!r} is still disconnected")
        return lambda: self.emitter.clear_alert(alert_id, cmd.at, Source.SUPERVISOR, "acknowledged", cmd=cmd)

    def resolve_hold(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"hand"})
        st = self.state
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            candidates = sorted(st.held) + (
                [st.round.hand] if st.round is not None and st.round.holds else []
            )
            if len(candidates) != 1:
                return Refused(
                    "no held round" if not candidates else f"several rounds are held {candidates}: give hand"
                )
            hand = candidates[0]
        rnd = st.round_for(hand)
        if rnd is None or (rnd is st.round and not rnd.holds):
            return Refused(f"hand {hand} is not held")
        needed = rnd.next_slot()
        if rnd is not st.round and needed is not None:
            return Refused(f"held round {hand} still needs {needed}: supply it with assign_card or rearrange")
        if self.shoe.variant_missing is not None:
            return Refused(f"{self.shoe.variant_missing_text()}: void the round or the shoe")
        if self.shoe.needs_die and rnd.die is None and rnd is not st.round:
            return Refused(f"hand {hand} needs the super-round die: send super_round_die")
        resolved_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR
            for alert_id in [a for a in rnd.holds if a in st.alerts]:
                self.emitter.clear_alert(alert_id, cmd.at, source, "hold resolved", cmd=cmd)
            self.emitter.emit(
                EventKind.HOLD_RESOLVED,
                cmd.at,
                source,
                {"hand": resolved_hand, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=resolved_hand,
            )
            if rnd is not st.round:
                self.dealing.try_complete_held(rnd, cmd.at, source)
            # Other held rounds kept back only by the alerts just cleared complete as they stand.
            for other in [r for r in st.held.values() if r is not rnd]:
                self.dealing.try_complete_held(other, cmd.at, source)

        return effect

    def rescan_ack(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, set())
        alert_id = self.state.rescan_alert
        if alert_id is None:
            return Refused("no rescan is pending")
        return lambda: self.emitter.clear_alert(alert_id, cmd.at, Source.SUPERVISOR, "rescan_ack", cmd=cmd)

    def super_round_die(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, {"value", "hand"})
        die = self.shoe.variant.super_round
        if not self.shoe.needs_die or die is None:
            return Refused(f"variant {self.shoe.variant.name!r} has no super round")
        value = args_.req_int(cmd.args, "value", 1, die.die_faces)
        st = self.state
        if st.phase in OUTSIDE_SHOE and not st.held:
            return Refused("no shoe is being dealt")
        hand = args_.opt_int(cmd.args, "hand", 1, 10_000)
        if hand is None:
            hand = st.round.hand if st.round is not None else st.hand + 1
        rnd = st.round_for(hand)
        if rnd is None and hand != st.hand + 1:
            return Refused(f"hand {hand} is not in progress, held or next")
        if (rnd.die if rnd is not None else st.dies.get(hand)) is not None:
            return Refused(f"hand {hand} already has its die")
        target_hand = hand

        def effect() -> None:
            source = Source.SUPERVISOR
            self.emitter.emit(
                EventKind.SUPER_ROUND_DIE,
                cmd.at,
                source,
                {"hand": target_hand, "value": value, "actor": cmd.actor, "command_id": cmd.command_id},
                hand=target_hand,
            )
            held = st.held.get(target_hand)
            if held is not None:
                self.dealing.try_complete_held(held, cmd.at, source)

        return effect

    def _reader_command(self, cmd: SupervisorCommand) -> Outcome:
        args_.check_keys(cmd.args, set())

        def effect() -> None:
            self.emitter.emit(
                EventKind.READER_COMMAND_REQUESTED,
                cmd.at,
                Source.SUPERVISOR,
                {"action": cmd.action, "command_id": cmd.command_id, "actor": cmd.actor},
            )

        return effect

    def reader_command(self, cmd: SupervisorCommand) -> Outcome:
        """``lock`` / ``unlock``: carried out on the reader by the service (``reader_command_requested``)."""
        return self._reader_command(cmd)
