"""Game-flow fixtures judged by time: the game server's commands carry the time they were signed.

Each entry is a :mod:`daemon.simulation.flow_library` game (four rounds, seed 12, server betting
window) in which every server command is recorded with its ``issued_at`` (the signed ``ts``, on the
fixture's clock: its send time, the network adding no lag) and one round is retimed:

- ``late_close``: round 2's ``close_betting`` was issued ``0.2`` s before the round's first card but
  reaches the table ``0.3`` s after it (skew 0.5 s, within ``table.betting.max_skew_s`` 1 s): the
  card read as exposed is claimed for the round, which completes with its physical cards;
- ``late_close_outside``: the same close reaches the table ``1.5`` s after it was issued (beyond the
  bound): the card stays exposed (RULES.md mistake 7), the round it shifts is held, never settled;
- ``quick_reopen``: the server reopens betting ``0.8`` s after round 2 was decided and the dealer
  draws an unneeded card ``1.2`` s after it (within ``table.betting.unneeded_window_s`` 1.5 s): it is
  round 2's unneeded card (RULES.md mistake 1: burned), round 3 is unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from common.inputs import DeviceTarget
from daemon.simulation.flow_dealer import FlowFault, FlowGame, plan_flow_game, round_id_of
from drivers.fixtures import GENERATED_PROVENANCE, Fixture, FixtureHeader, FixtureStep, UsbIdentity
from drivers.simulate import SIM_PRODUCT_ID, SIM_VENDOR_ID, Action, encode_plan

TimedCase = Literal["late_close", "late_close_outside", "quick_reopen"]

LATE_CLOSE_ISSUED_BEFORE_CARD_S = 0.2
LATE_CLOSE_ARRIVES_AFTER_CARD_S = 0.3
OUTSIDE_SKEW_S = 1.5
REOPEN_AFTER_DECISION_S = 0.8
UNNEEDED_AFTER_DECISION_S = 1.2


@dataclass(frozen=True, slots=True)
class TimedEntry:
    """One fixture of this library: the protocol, the case, the round it touches."""

    name: str
    protocol: str
    description: str
    covers: tuple[str, ...]
    case: TimedCase
    round_no: int = 2
    seed: int = 12
    rounds: int = 4

    def game(self) -> FlowGame:
        faults: tuple[FlowFault, ...] = ()
        if self.case == "quick_reopen":
            faults = (FlowFault("late_unneeded", self.round_no, delay=UNNEEDED_AFTER_DECISION_S),)
        return plan_flow_game(self.seed, self.protocol, self.rounds, faults)

    def table(self) -> dict[str, Any]:
        return {"decks": 8, "game_flow": "betting_window", "betting": {"source": "server"}}

    def fixture(self) -> Fixture:
        game = self.game()
        actions, issued = self._retimed(game.plan.actions)
        steps = encode_plan(replace(game.plan, actions=actions), self.protocol, self.seed)
        steps = [_with_issued_time(step, issued) for step in steps]
        usb = (
            UsbIdentity(vendor_id=SIM_VENDOR_ID, product_id=SIM_PRODUCT_ID)
            if self.protocol == "usb_hid"
            else None
        )
        header = FixtureHeader(
            name=self.name,
            description=self.description,
            protocol=self.protocol,  # type: ignore[arg-type]
            transport="usb" if self.protocol == "usb_hid" else "serial",
            origin="generated",
            provenance=GENERATED_PROVENANCE,
            protocol_settings={},
            table=self.table(),
            usb=usb,
            generator={
                "tool": "daemon.simulation.timed_library",
                "seed": self.seed,
                "rounds": self.rounds,
                "case": f"{self.case}@{self.round_no}",
                "round_ids": game.round_ids,
            },
            covers=list(self.covers),
        )
        return Fixture(header=header, steps=tuple(steps))

    def _retimed(self, planned: list[Action]) -> tuple[list[Action], dict[tuple[str, str], float]]:
        """The actions with this case's round retimed, and each server command's issued time
        (by action and round id; the late close's own, the others their send time)."""
        actions = list(planned)
        issued: dict[tuple[str, str], float] = {}
        round_id = round_id_of(self.round_no)
        if self.case in ("late_close", "late_close_outside"):
            at = _server_index(actions, "close_betting", round_id)
            first_card = next(a for a in actions[at + 1 :] if a.kind == "draw")
            arrival = first_card.t + LATE_CLOSE_ARRIVES_AFTER_CARD_S
            if self.case == "late_close":
                issued[("close_betting", round_id)] = first_card.t - LATE_CLOSE_ISSUED_BEFORE_CARD_S
            else:
                issued[("close_betting", round_id)] = arrival - OUTSIDE_SKEW_S
            actions[at] = replace(actions[at], t=round(arrival, 6))
        else:  # quick_reopen: the next round's betting opens right after the decision
            next_id = round_id_of(self.round_no + 1)
            closed = actions[_server_index(actions, "close_betting", round_id)].t
            unneeded = next(
                a for a in actions if a.kind == "draw" and a.target is DeviceTarget.BURN and a.t > closed
            )
            decided = unneeded.t - UNNEEDED_AFTER_DECISION_S
            at = _server_index(actions, "open_betting", next_id)
            actions[at] = replace(actions[at], t=round(decided + REOPEN_AFTER_DECISION_S, 6))
        actions.sort(key=lambda a: a.t)
        for action in actions:
            if action.kind == "supervisor" and action.supervisor is not None:
                key = (action.supervisor["action"], str(action.supervisor["args"].get("round_id", "")))
                issued.setdefault(key, action.t)
        return actions, issued


def _server_index(actions: list[Action], name: str, round_id: str) -> int:
    for index, action in enumerate(actions):
        sup = action.supervisor
        if sup is not None and sup["action"] == name and sup["args"].get("round_id") == round_id:
            return index
    raise LookupError(f"no {name} for round {round_id}")


def _with_issued_time(step: FixtureStep, issued: dict[tuple[str, str], float]) -> FixtureStep:
    sup = step.supervisor
    if sup is None or sup.action not in ("open_betting", "close_betting", "cut_card"):
        return step
    at = issued.get((sup.action, str(sup.args.get("round_id", ""))))
    if at is None:
        return step
    return step.model_copy(update={"supervisor": sup.model_copy(update={"issued_at": round(at, 6)})})


_PROTOCOLS = ("angel_eye", "ascii_lines", "usb_hid")
_READER = {"angel_eye": "the Angel Eye shoe", "ascii_lines": "a line reader", "usb_hid": "a keyboard wedge"}

TIMED_LIBRARY: tuple[TimedEntry, ...] = tuple(
    entry
    for protocol in _PROTOCOLS
    for entry in (
        TimedEntry(
            f"{protocol}-flow-late-close", protocol,
            f"Round 2 on {_READER[protocol]}: the server's close_betting, issued 0.2 s before the first "
            "card, arrives 0.3 s after it: the card is the round's.",
            ("a late close within table.betting.max_skew_s claims the cards read after its own time",),
            "late_close",
        ),
        TimedEntry(
            f"{protocol}-flow-late-close-outside", protocol,
            f"Round 2 on {_READER[protocol]}: the server's close_betting arrives 1.5 s after it was issued "
            "(beyond the bound): the first card stays exposed and the round is held.",
            ("a late close beyond table.betting.max_skew_s claims nothing: exposed, held",),
            "late_close_outside",
        ),
        TimedEntry(
            f"{protocol}-flow-quick-reopen", protocol,
            f"Round 3's betting opens 0.8 s after round 2 was decided on {_READER[protocol]}; an unneeded "
            "card 1.2 s after the decision is round 2's (burned), round 3 is unaffected.",
            ("RULES.md mistake 1 after betting reopened: unneeded within table.betting.unneeded_window_s",),
            "quick_reopen",
        ),
    )
)  # fmt: skip
