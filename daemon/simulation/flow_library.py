"""The committed game-flow fixtures: tables run with ``table.game_flow: betting_window``.

Each is a shoe dealt by :func:`daemon.simulation.flow_dealer.plan_flow_game` (the dealer and the
game server together, with one injected fault), encoded for one protocol, with the betting window
coming from where the entry says:

- ``server``: the game server's ``open_betting``/``close_betting`` commands, recorded in the
  fixture as supervisor steps with their round ids;
- ``button``: the dealer's button presses, sent by the reader itself (a line reader's configured
  line, a keyboard wedge's F1/F2 key: ``drivers.simulate.simulated_signal_settings``);
- ``shoe_lock``: the Angel Eye shoe's own ``L`` frames (``lock_is_betting_window``).

A daemon outage is the outage's steps left out and a ``restart`` step where the edge comes back
(the golden replay restores the engine from its own events there). The files live in
``hw-fixtures/`` beside the ``cards_only`` library (``daemon/simulation/library.py``), which they
leave untouched; ``baccarat-edge simulate --library DIR`` writes both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from daemon.simulation.flow_dealer import FlowFault, FlowGame, plan_flow_game
from drivers.fixtures import GENERATED_PROVENANCE, Fixture, FixtureHeader, FixtureStep, UsbIdentity
from drivers.simulate import SIM_PRODUCT_ID, SIM_VENDOR_ID, Action, encode_plan, simulated_signal_settings

BettingSource = Literal["server", "button", "shoe_lock"]

_AS_BUTTON = {"open_betting": "button_open", "close_betting": "button_close"}
_AS_LOCK = {"open_betting": "lock", "close_betting": "unlock"}


@dataclass(frozen=True, slots=True)
class FlowEntry:
    """One game-flow fixture: who moves the betting window, the fault, and whether the reader
    sends its signals (cut card line or code) instead of the server's ``cut_card`` command."""

    name: str
    protocol: str
    description: str
    covers: tuple[str, ...]
    faults: tuple[FlowFault, ...] = ()
    source: BettingSource = "server"
    reader_signals: bool = False
    seed: int = 12
    rounds: int = 4

    def game(self) -> FlowGame:
        return plan_flow_game(self.seed, self.protocol, self.rounds, self.faults)

    def table(self) -> dict[str, Any]:
        """The engine's ``table`` settings for this fixture."""
        return {"decks": 8, "game_flow": "betting_window", "betting": {"source": self.source}}

    def fixture(self) -> Fixture:
        game = self.game()
        actions = [self._as_sent(action) for action in game.plan.actions]
        plan = replace(game.plan, actions=actions)
        signals = self.reader_signals or self.source != "server"
        steps = encode_plan(plan, self.protocol, self.seed, signals=signals)
        steps = _with_outages(steps, game.outages)
        steps = with_reader_outages(steps, game.reader_outages)
        usb = None
        if self.protocol == "usb_hid":
            usb = UsbIdentity(vendor_id=SIM_VENDOR_ID, product_id=SIM_PRODUCT_ID)
        header = FixtureHeader(
            name=self.name,
            description=self.description,
            protocol=self.protocol,  # type: ignore[arg-type]
            transport="usb" if self.protocol == "usb_hid" else "serial",
            origin="generated",
            provenance=GENERATED_PROVENANCE,
            protocol_settings=simulated_signal_settings(self.protocol) if signals else {},
            table=self.table(),
            usb=usb,
            generator={
                "tool": "daemon.simulation.flow_dealer",
                "seed": self.seed,
                "rounds": self.rounds,
                "faults": [f"{f.kind}@{f.round_no}" for f in self.faults],
                "betting_source": self.source,
                "round_ids": game.round_ids,
                "touched": [f"{kind}:{round_id}" for kind, round_id in game.touched],
                "outages": [[round(a, 6), round(b, 6)] for a, b in game.outages],
            },
            covers=list(self.covers),
        )
        return Fixture(header=header, steps=tuple(steps))

    def _as_sent(self, action: Action) -> Action:
        return as_sent(action, self.source, reader_signals=self.reader_signals)


def as_sent(action: Action, source: BettingSource, *, reader_signals: bool = False) -> Action:
    """The dealer's or server's step as a table with betting ``source`` receives it: a server
    command stays a command; for a button or the shoe's lock it is the reader's own press or
    frame; with ``reader_signals`` the ``cut_card`` command is the reader's cut card signal."""
    if action.kind != "supervisor" or action.supervisor is None:
        return action
    name = action.supervisor["action"]
    if source == "button" and name in _AS_BUTTON:
        return Action(action.t, _AS_BUTTON[name])
    if source == "shoe_lock" and name in _AS_LOCK:
        return Action(action.t, _AS_LOCK[name])
    if reader_signals and name == "cut_card":
        return Action(action.t, "cut")
    return action


def with_reader_outages(steps: list[FixtureStep], outages: list[tuple[float, float]]) -> list[FixtureStep]:
    """The steps with the reader unplugged and plugged back for each outage (its draws are not
    in the plan: they were dealt unseen)."""
    events = []
    for start, end in outages:
        note = "reader unplugged mid-round: the next cards are dealt while it is out"
        events += [
            FixtureStep(t=round(start, 6), event="unplug", note=note),
            FixtureStep(t=round(end, 6), event="replug"),
        ]
    return sorted([*steps, *events], key=lambda step: step.t)


def _with_outages(steps: list[FixtureStep], outages: list[tuple[float, float]]) -> list[FixtureStep]:
    """The steps the edge saw: none during an outage, a ``restart`` step where it comes back."""
    out: list[FixtureStep] = []
    pending = sorted(outages)
    for step in steps:
        while pending and step.t >= pending[0][1]:
            start, end = pending.pop(0)
            note = f"the edge was down from t={start:g} s (rounds dealt meanwhile are not in this file)"
            out.append(FixtureStep(t=round(end, 6), event="restart", note=note))
        if pending and pending[0][0] <= step.t < pending[0][1]:
            continue
        out.append(step)
    return out


FLOW_LIBRARY: tuple[FlowEntry, ...] = (
    FlowEntry("angel_eye-flow-server", "angel_eye",
              "Four rounds, each opened and closed by the game server's signed commands with its round id.",
              ("betting window from the game server", "round ids on every round's events")),
    FlowEntry("ascii_lines-flow-server", "ascii_lines",
              "Four rounds from a line reader inside the server's betting windows.",
              ("betting window from the game server", "no positions: engine assigns order")),
    FlowEntry("angel_eye-flow-late-unneeded-60s", "angel_eye",
              "Round 2: an unneeded card 60 s after the round was decided, before betting reopens.",
              ("RULES.md mistake 1 at any delay: never the next round's Player 1",),
              faults=(FlowFault("late_unneeded", 2, delay=60.0),)),
    FlowEntry("ascii_lines-flow-late-unneeded-45s", "ascii_lines",
              "Round 2: an unneeded card 45 s after the round was decided (cards_only would take it "
              "as round 3's Player 1).",
              ("RULES.md mistake 1 at any delay: never the next round's Player 1",),
              faults=(FlowFault("late_unneeded", 2, delay=45.0),)),
    FlowEntry("usb_hid-flow-late-unneeded-0.1s", "usb_hid",
              "Round 2: an unneeded card 0.1 s after the round was decided.",
              ("RULES.md mistake 1 at any delay: never the next round's Player 1",),
              faults=(FlowFault("late_unneeded", 2, delay=0.1),)),
    FlowEntry("ascii_lines-flow-misread-deal-on", "ascii_lines",
              "Round 2: the reader cannot read the second card and the dealer deals on without a "
              "rescan: the round is held for a supervisor.",
              ("RULES.md mistake 6, then dealt on: held, never settled shifted",),
              faults=(FlowFault("misread_deal_on", 2, card_index=1),)),
    FlowEntry("usb_hid-flow-misread-deal-on", "usb_hid",
              "Round 2: an unreadable code for the first card, then the dealer deals on.",
              ("RULES.md mistake 6, then dealt on: held, never settled shifted",),
              faults=(FlowFault("misread_deal_on", 2, card_index=0),)),
    FlowEntry("ascii_lines-flow-cut-card-line", "ascii_lines",
              "Round 3: the line reader sends its configured cut card line (CUT): that round is the last.",
              ("cut card from a line reader's configured line", "last round", "shoe end"),
              faults=(FlowFault("cut_card", 3),), reader_signals=True),
    FlowEntry("usb_hid-flow-cut-card-code", "usb_hid",
              "Round 3: the keyboard wedge types its configured cut card code (CUT, Enter).",
              ("cut card from a keyboard wedge's configured code", "last round", "shoe end"),
              faults=(FlowFault("cut_card", 3),), reader_signals=True),
    FlowEntry("ascii_lines-flow-cut-card-command", "ascii_lines",
              "Round 3: the reader sends nothing for the cut card; the cut_card command says it.",
              ("cut card by command for a reader that sends none", "last round"),
              faults=(FlowFault("cut_card", 3),)),
    FlowEntry("angel_eye-flow-outage", "angel_eye",
              "The edge is down after round 2 while round 3 is dealt; it restarts before round 4.",
              ("daemon outage between rounds: alert and hold, hands never renumbered",),
              faults=(FlowFault("outage", 2, rounds_missed=1),), rounds=5),
    FlowEntry("ascii_lines-flow-outage", "ascii_lines",
              "The edge is down after round 2 while round 3 is dealt; it restarts before round 4.",
              ("daemon outage between rounds: alert and hold, hands never renumbered",),
              faults=(FlowFault("outage", 2, rounds_missed=1),), rounds=5),
    FlowEntry("ascii_lines-flow-button", "ascii_lines",
              "No game server: the dealer's button lines (PLACE BETS, NO MORE BETS) move the window.",
              ("betting window from a dealer button (line reader)",), source="button"),
    FlowEntry("usb_hid-flow-button-keys", "usb_hid",
              "No game server: the dealer presses F2 (place your bets) and F1 (no more bets) on the wedge.",
              ("betting window from a dealer button (HID keys)",), source="button"),
    FlowEntry("angel_eye-flow-shoe-lock", "angel_eye",
              "No game server: the shoe's own lock state (L frames) is the betting window.",
              ("betting window from the Angel Eye shoe's lock state",), source="shoe_lock"),
    FlowEntry("ascii_lines-flow-unscanned", "ascii_lines",
              "Round 2: the dealer deals the round's last card past the reader unread; the server then "
              "opens round 3: round 2 is held a card short, round 3 is read into its own slots.",
              ("RULES.md mistake 5: the next round's betting ends the round, held, never completed "
               "with later cards",),
              faults=(FlowFault("unscanned", 2, card_index=-1),)),
    FlowEntry("usb_hid-flow-unscanned", "usb_hid",
              "Round 2: its last card is never typed by the wedge; the server opens round 3.",
              ("RULES.md mistake 5: the next round's betting ends the round, held, never completed "
               "with later cards",),
              faults=(FlowFault("unscanned", 2, card_index=-1),)),
    FlowEntry("angel_eye-flow-unscanned", "angel_eye",
              "Round 2: the shoe never reports its last card; the server opens round 3.",
              ("RULES.md mistake 5: the next round's betting ends the round, held, never completed "
               "with later cards",),
              faults=(FlowFault("unscanned", 2, card_index=-1),)),
    FlowEntry("ascii_lines-flow-unscanned-button", "ascii_lines",
              "No game server: round 2's last card is never read; the dealer's PLACE BETS line for "
              "the next round ends it.",
              ("RULES.md mistake 5 with a dealer button: the next window ends the round",),
              faults=(FlowFault("unscanned", 2, card_index=-1),), source="button"),
    FlowEntry("angel_eye-flow-unscanned-shoe-lock", "angel_eye",
              "No game server: round 2's last card is never reported; the shoe locking for the next "
              "round's betting ends it.",
              ("RULES.md mistake 5 with the shoe's lock state: the next window ends the round",),
              faults=(FlowFault("unscanned", 2, card_index=-1),), source="shoe_lock"),
    FlowEntry("ascii_lines-flow-unplug-mid-round", "ascii_lines",
              "Round 2: the line reader is unplugged after P1 and B1; P2 and B2 are dealt while it is "
              "out; the rest of the round is read after it is back.",
              ("a slotless reader's lost continuity holds the round (reader_gap)",),
              faults=(FlowFault("unplug_mid_round", 2),)),
    FlowEntry("usb_hid-flow-unplug-mid-round", "usb_hid",
              "Round 2: the keyboard wedge is unplugged after P1 and B1; P2 and B2 are dealt while it "
              "is out.",
              ("a slotless reader's lost continuity holds the round (reader_gap)",),
              faults=(FlowFault("unplug_mid_round", 2),)),
    FlowEntry("angel_eye-flow-unplug-mid-round", "angel_eye",
              "Round 2: the Angel Eye shoe is unplugged after P1 and B1; P2 and B2 are dealt while it "
              "is out: its slot targets show the gap.",
              ("an Angel Eye reader keeps its slot-based handling (device_disagreement)",),
              faults=(FlowFault("unplug_mid_round", 2),)),
    FlowEntry("ascii_lines-flow-empty-window", "ascii_lines",
              "Round 2: betting closes and no card comes for 90 s (the reader is out); the idle tick "
              "raises empty_betting_window naming the round id; its first card clears it.",
              ("an empty betting window: its own alert, naming the server's round id",),
              faults=(FlowFault("empty_window", 2, delay=90.0),)),
    FlowEntry("usb_hid-flow-empty-window", "usb_hid",
              "Round 2: betting closes and no card comes for 90 s (the keyboard wedge is out); the idle "
              "tick raises empty_betting_window naming the round id; its first card clears it.",
              ("an empty betting window: its own alert, naming the server's round id",),
              faults=(FlowFault("empty_window", 2, delay=90.0),)),
    FlowEntry("angel_eye-flow-empty-window", "angel_eye",
              "Round 2: betting closes and no card comes for 90 s (the shoe is out); the idle tick "
              "raises empty_betting_window naming the round id; its first card clears it.",
              ("an empty betting window: its own alert, naming the server's round id",),
              faults=(FlowFault("empty_window", 2, delay=90.0),)),
    FlowEntry("ascii_lines-flow-last-card-misread", "ascii_lines",
              "Round 3: the cut card comes out (it is the last round) and the line reader cannot read its "
              "last card, never rescanned; 30 s later the server sends new_shoe: the round is cut short "
              "and held, the shoe ends (new_shoe is refused until the held round is decided).",
              ("a shoe always ends on its signals: its last card misread, then new_shoe",),
              faults=(FlowFault("last_card_misread", 3),)),
    FlowEntry("usb_hid-flow-last-card-misread", "usb_hid",
              "Round 3: the cut card's round; its last card is an unreadable code, never rescanned; the "
              "server's new_shoe ends the shoe.",
              ("a shoe always ends on its signals: its last card misread, then new_shoe",),
              faults=(FlowFault("last_card_misread", 3),)),
    FlowEntry("angel_eye-flow-last-card-misread", "angel_eye",
              "Round 3: the shoe signals the cut card, then an error code for the round's last card, never "
              "rescanned; the server's new_shoe ends the shoe.",
              ("a shoe always ends on its signals: its last card misread, then new_shoe",),
              faults=(FlowFault("last_card_misread", 3),)),
)  # fmt: skip
