"""Supervisor commands: an explicit table from each action to its handler. A handler validates the
command against the table state and returns its effect or a typed refusal (``commands.Outcome``);
the command is answered with exactly one ``command_accepted`` / ``command_refused`` event, then its
effect runs (what changed, who asked) or the refusal's alert is raised."""

from __future__ import annotations

from collections.abc import Callable

from common.inputs import Source, SupervisorCommand
from daemon.engine import commands as args_
from daemon.engine.commands import Outcome, Refused
from daemon.engine.corrections import RoundCorrections
from daemon.engine.emitter import Emitter
from daemon.engine.events import EventKind
from daemon.engine.game_flow import BettingWindow
from daemon.engine.reveal import Reveals
from daemon.engine.shoe_audit import ShoeAudit
from daemon.engine.shoe_commands import ShoeCommands

Handler = Callable[[SupervisorCommand], Outcome]

_NO_NONCE = (
    "refused on a squeeze table: a card placed by command has no sealed nonce, so its commitment could "
    "be guessed; rescan the card, or void the round"
)
SEALED_ACTIONS = {action: _NO_NONCE for action in ("assign_card", "move_card", "swap", "rearrange")}
"""Commands a squeeze table refuses (``README.md``, "Squeeze"), with the reason."""


class SupervisorCommands:
    """Answers every supervisor command through ``handlers``."""

    emitter: Emitter
    handlers: dict[str, Handler]
    """Action -> handler: one entry per action of ``commands.ACTIONS`` (a test checks both agree)."""

    def __init__(
        self,
        *,
        emitter: Emitter,
        shoe: ShoeCommands,
        corrections: RoundCorrections,
        flow: BettingWindow,
        reveals: Reveals,
        audit: ShoeAudit,
    ) -> None:
        self.emitter = emitter
        self.handlers = {
            "new_shoe": shoe.new_shoe,
            "void_round": shoe.void_round,
            "void_shoe": shoe.void_shoe,
            "assign_card": corrections.assign_card,
            "move_card": corrections.move_card,
            "swap": corrections.swap,
            "rearrange": corrections.rearrange,
            "acknowledge_alert": shoe.acknowledge_alert,
            "resolve_hold": shoe.resolve_hold,
            "rescan_ack": shoe.rescan_ack,
            "super_round_die": shoe.super_round_die,
            "lock": shoe.reader_command,
            "unlock": shoe.reader_command,
            "open_betting": flow.open_betting,
            "close_betting": flow.close_betting,
            "cut_card": flow.cut_card,
            "dealer_changed": self.dealer_changed,
            "attest": self.attest,
            "reveal": reveals.reveal_command,
            "remainder_count": audit.remainder_count,
        }

    def on_command(self, cmd: SupervisorCommand) -> None:
        """Answer one command: refused (with its reason, and an alert where the floor must see it
        too) or accepted, then its effect."""
        handler = self.handlers.get(cmd.action)
        if handler is None:
            self._answer(cmd, f"unknown action {cmd.action!r}; accepted: {', '.join(args_.ACTIONS)}")
            return
        if not isinstance(cmd.args, dict):
            self._answer(cmd, "args must be an object")
            return
        if self.emitter.squeeze and cmd.action in SEALED_ACTIONS:
            self._answer(cmd, SEALED_ACTIONS[cmd.action])
            return
        try:
            outcome = handler(cmd)
        except args_.ArgError as exc:
            self._answer(cmd, str(exc))
            return
        if isinstance(outcome, Refused):
            self._answer(cmd, outcome.reason)
            if outcome.alert is not None:
                outcome.alert()  # a refusal the floor must see too (game flow: a round id out of sequence)
            return
        self._answer(cmd, None)
        outcome()

    def dealer_changed(self, cmd: SupervisorCommand) -> Outcome:
        """A dealer took the table: ``dealer_changed`` (the fold keeps them as the table's dealer;
        the rounds started from now on are theirs). The dealer already on the table is refused."""
        args_.check_keys(cmd.args, {"dealer_id", "name"})
        dealer_id, name = args_.req_dealer(cmd.args)
        current = self.emitter.state.dealer
        if current is not None and current["dealer_id"] == dealer_id and current["name"] == name:
            return Refused(f"dealer {dealer_id!r} is already on the table")
        data = {"dealer_id": dealer_id, "name": name, "actor": cmd.actor}

        def effect() -> None:
            self.emitter.emit(EventKind.DEALER_CHANGED, cmd.at, Source.SUPERVISOR, data)

        return effect

    def attest(self, cmd: SupervisorCommand) -> Outcome:
        """``attest``: journaled here (who asked, when), carried out by the service (file I/O)."""
        args_.check_keys(cmd.args, set())
        return lambda: None

    def _answer(self, cmd: SupervisorCommand, refused: str | None) -> None:
        """The command's one reply: ``command_refused`` with its reason, else ``command_accepted``."""
        self.emitter.emit(
            EventKind.COMMAND_ACCEPTED if refused is None else EventKind.COMMAND_REFUSED,
            cmd.at,
            Source.SUPERVISOR,
            {"command_id": cmd.command_id, "action": cmd.action, "actor": cmd.actor, "reason": refused},
        )
