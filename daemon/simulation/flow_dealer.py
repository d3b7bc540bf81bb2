"""A dealer and a game server together: a shoe dealt round by round inside betting windows.

:func:`plan_flow_game` deals a shoe by the rules (``daemon.rules.outcome.next_slot``) the way a
table with ``table.game_flow: betting_window`` runs it: for each round the game server opens
betting (``open_betting`` with its round id), closes it, and only then are the round's cards
drawn. The plan is a :class:`drivers.simulate.ShoePlan` (the server's commands are its
``supervisor`` actions), so :func:`drivers.simulate.encode_plan` turns it into any protocol's
bytes; :class:`FlowGame` keeps what physically happened, for checks: each round id's cards,
and the faults injected with the round each one touches:

- ``late_unneeded``: after a round is decided, one unneeded card ``delay`` seconds later (0.1 s
  to 60 s), before betting for the next round opens (RULES.md mistake 1: it is burned);
- ``exposed``: a card drawn while betting is open (RULES.md mistake 7; an Angel Eye shoe,
  locked for betting, reports it as drawn outside the game);
- ``misread_deal_on``: the reader cannot read one of the round's cards and the dealer deals on
  without rescanning it;
- ``cut_card``: the cut card comes out during the round (an Angel Eye shoe signals it; for a
  line or HID reader a supervisor sends ``cut_card``): that round is the last;
- ``unscanned``: the dealer deals one of the round's cards (``card_index``; -1: its last) past
  the reader without it being read (RULES.md mistake 5): the edge's round is a card short when
  the next round's betting opens;
- ``unplug_mid_round``: the reader is unplugged after the round's first two cards and plugged
  back after the next two, dealt meanwhile and never read (:attr:`FlowGame.reader_outages`);
- ``empty_window``: betting closes and no card comes for ``delay`` seconds (the service's idle
  tick comes meanwhile); then the round is dealt;
- ``outage``: the edge is down while ``rounds_missed`` rounds are dealt after the round
  (:attr:`FlowGame.outages`: the time spans the caller must not feed);
- ``late_close``: the server's ``close_betting`` reaches the table 0.3 s after the round's first
  card (network lag), though the server issued it 0.2 s before that card
  (:attr:`FlowGame.issued_at`: its own time, the command's signed ``ts``);
- ``quick_reopen``: the server opens the next round's betting 0.8 s after the round is decided,
  and an unneeded card of the decided round is drawn 0.4 s later, while betting is open (RULES.md
  mistake 1: that round's burn, whatever the window says);
- ``last_card_misread``: the cut card comes out during the round (it is the last) and the reader
  cannot read the round's last card, never rescanned; 30 s later the server starts the next shoe
  (``new_shoe``): the shoe must end on it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from common.cards import ALL_CARDS, Card
from common.inputs import DeviceTarget
from daemon.rules.outcome import next_slot
from drivers.simulate import Action, ShoePlan

FLOW_FAULTS = (
    "late_unneeded",
    "exposed",
    "misread_deal_on",
    "cut_card",
    "outage",
    "unscanned",
    "unplug_mid_round",
    "empty_window",
    "late_close",
    "quick_reopen",
    "last_card_misread",
)
"""The faults :func:`plan_flow_game` can inject (module docstring)."""


@dataclass(frozen=True, slots=True)
class FlowFault:
    """A fault in round ``round_no`` (1-based, the physical round); ``delay`` for a late unneeded
    card, ``card_index`` for a misread or a card never scanned (which of the round's cards; -1 the
    last), ``rounds_missed`` for an outage."""

    kind: str
    round_no: int
    delay: float = 5.0
    card_index: int = 0
    rounds_missed: int = 1


@dataclass
class FlowGame:
    """What physically happened: the plan, each round id's cards by slot (in deal order), and
    each fault with the round id it touches."""

    plan: ShoePlan
    rounds: dict[str, dict[str, str]] = field(default_factory=dict)
    round_ids: list[str] = field(default_factory=list)
    touched: list[tuple[str, str]] = field(default_factory=list)  # (fault kind, round id)
    outages: list[tuple[float, float]] = field(default_factory=list)  # the edge is down from, until
    reader_outages: list[tuple[float, float]] = field(default_factory=list)  # the reader is unplugged
    last_round_id: str | None = None  # the round the cut card made the last
    # when the server issued a command that reached the table late ("close:<round id>" -> its time)
    issued_at: dict[str, float] = field(default_factory=dict)


def round_id_of(round_no: int, prefix: str = "T9-") -> str:
    """The server's id of physical round ``round_no`` (prefix + a number, ``commands.ROUND_ID``)."""
    return f"{prefix}{1000 + round_no}"


def plan_flow_game(
    seed: int,
    protocol: str,
    rounds: int,
    faults: tuple[FlowFault, ...] = (),
    *,
    decks: int = 8,
    face_burns: int = 10,
    ace_burns: int = 1,
) -> FlowGame:
    """Deal ``rounds`` rounds (fewer if a cut card ends the shoe) with the server's betting window."""
    rng = random.Random(seed)
    shoe = [card for card in ALL_CARDS for _ in range(decks)]
    rng.shuffle(shoe)
    taken = iter(shoe)
    by_round = {f.round_no: f for f in faults}
    acts: list[Action] = []
    game = FlowGame(ShoePlan(acts))
    angel_eye = protocol == "angel_eye"

    def server(t: float, action: str, args: dict[str, object]) -> None:
        _server(acts, t, action, args)

    t = 0.0
    server(t, "new_shoe", {"shoe_id": f"flow-{seed}"})
    indicator = next(taken)
    t += 1.0
    acts.append(Action(t, "draw", card=indicator, target=DeviceTarget.FIRST_CARD, index=1))
    rank = int(indicator.rank)
    burns = ace_burns if rank == 1 else face_burns if rank >= 10 else rank
    for i in range(burns):
        t += 0.6
        acts.append(Action(t, "draw", card=next(taken), target=DeviceTarget.BURN, index=i + 1))
    t += 2.0
    outage_from: float | None = None
    back_before = 0  # the edge is back before this round's betting opens
    for round_no in range(1, rounds + 1):
        fault = by_round.get(round_no)
        round_id = round_id_of(round_no)
        if outage_from is not None and round_no == back_before:
            game.outages.append((outage_from, t - 0.5))
            game.touched.append(("outage", round_id))
            outage_from = None
        if round_no > 1 and by_round.get(round_no - 1, _NO_FAULT).kind == "quick_reopen":
            game.touched.append(("quick_reopen", round_id))
        t = _betting(fault, acts, t, game=game, round_id=round_id, taken=taken, angel_eye=angel_eye)
        decided = _deal(fault, acts, t, game=game, round_id=round_id, taken=taken, angel_eye=angel_eye)
        t = decided + 2.0  # the server learns the result and opens the next round
        if fault is None:
            continue
        if fault.kind == "cut_card":
            break
        if fault.kind == "last_card_misread":
            server(decided + 30.0, "new_shoe", {"shoe_id": f"flow-{seed}-next"})
            break
        if fault.kind == "quick_reopen" and round_no < rounds:
            # betting for the next round reopens 0.8 s after the decision (at the loop's top), and
            # the decided round's unneeded card comes 0.4 s after that
            t = decided + 0.8
            acts.append(Action(t + 0.4, "draw", card=next(taken), target=DeviceTarget.BURN, index=1))
        elif fault.kind == "late_unneeded":
            acts.append(
                Action(decided + fault.delay, "draw", card=next(taken), target=DeviceTarget.BURN, index=1)
            )
            t = decided + fault.delay + 1.0
            if round_no < rounds:
                game.touched.append(("late_unneeded", round_id_of(round_no + 1)))
        elif fault.kind == "outage" and outage_from is None and round_no + fault.rounds_missed < rounds:
            # the edge goes down now; the next rounds_missed rounds are dealt while it is down
            outage_from = decided + 0.5
            back_before = round_no + fault.rounds_missed + 1
    game.plan.hands = len(game.round_ids)
    acts.sort(key=lambda a: a.t)
    return game


_NO_FAULT = FlowFault("", 0)


def _server(acts: list[Action], t: float, action: str, args: dict[str, object]) -> None:
    """A game server's command at ``t`` (a supervisor step of the plan)."""
    acts.append(Action(t, "supervisor", supervisor={"action": action, "args": args}))


def _betting(
    fault: FlowFault | None,
    acts: list[Action],
    t: float,
    *,
    game: FlowGame,
    round_id: str,
    taken: Iterator[Card],
    angel_eye: bool,
) -> float:
    """The round's betting window from ``t``: open, a card exposed meanwhile, the close (late: it
    reaches the table after the first card, issued before it), an empty window; when the round's
    cards may start."""
    _server(acts, t, "open_betting", {"round_id": round_id})
    if fault is not None and fault.kind == "exposed":
        card = next(taken)
        acts.append(Action(t + 2.0, "outside" if angel_eye else "draw", card=card, target=DeviceTarget.P1))
        game.touched.append(("exposed", round_id))
    t += 5.0
    if fault is not None and fault.kind == "late_close":  # the first card comes at t + 0.8
        game.issued_at[f"close:{round_id}"] = t + 0.6
        _server(acts, t + 0.8 + 0.3, "close_betting", {"round_id": round_id})
        game.touched.append(("late_close", round_id))
    else:
        _server(acts, t, "close_betting", {"round_id": round_id})
    return _empty_window(fault, acts, t, game=game, round_id=round_id)


def _deal(
    fault: FlowFault | None,
    acts: list[Action],
    t: float,
    *,
    game: FlowGame,
    round_id: str,
    taken: Iterator[Card],
    angel_eye: bool,
) -> float:
    """The round's cards by the rules from ``t`` (misread, cut card, unread cards as the fault says),
    recorded in ``game``; when the round is decided."""
    player: list[Card] = []
    banker: list[Card] = []
    cards: dict[str, str] = {}
    draws: list[int] = []  # where this round's draws are in ``acts``
    k = 0
    while (slot := next_slot(player, banker)) is not None:
        t += 0.8
        card = next(taken)
        (player if slot.value.startswith("P") else banker).append(card)
        cards[slot.value] = card.code
        misread = fault is not None and fault.kind == "misread_deal_on" and k == fault.card_index
        if misread or (_last_card_misread(fault) and next_slot(player, banker) is None):
            acts.append(Action(t, "misread"))
            game.touched.append(("misread_deal_on" if misread else "last_card_misread", round_id))
        else:
            draws.append(len(acts))
            acts.append(Action(t, "draw", card=card, target=DeviceTarget(slot.value), index=1))
        if fault is not None and fault.kind in ("cut_card", "last_card_misread") and k == 1:
            if angel_eye:
                acts.append(Action(t + 0.3, "cut"))
            else:
                _server(acts, t + 0.3, "cut_card", {})
            game.last_round_id = round_id
        k += 1
    _unread(fault, acts, draws, game=game, round_id=round_id)
    game.rounds[round_id] = cards
    game.round_ids.append(round_id)
    return t


def _last_card_misread(fault: FlowFault | None) -> bool:
    return fault is not None and fault.kind == "last_card_misread"


def _unread(
    fault: FlowFault | None, acts: list[Action], draws: list[int], *, game: FlowGame, round_id: str
) -> None:
    """Draws dealt but never read: a card never scanned (``draws[fault.card_index]``), or the
    round's second pair, dealt while a reader is unplugged after its first pair."""
    if fault is None:
        return
    if fault.kind == "unscanned":
        del acts[draws[fault.card_index]]
        game.touched.append(("unscanned", round_id))
    elif fault.kind == "unplug_mid_round":
        game.reader_outages.append((acts[draws[1]].t + 0.2, acts[draws[3]].t + 0.3))
        del acts[draws[3]], acts[draws[2]]
        game.touched.append(("unplug_mid_round", round_id))


def _empty_window(
    fault: FlowFault | None, acts: list[Action], t: float, *, game: FlowGame, round_id: str
) -> float:
    """An empty window: an idle tick ``fault.delay`` s after the close, the round's cards after it."""
    if fault is None or fault.kind != "empty_window":
        return t
    acts.append(Action(t + fault.delay, "tick"))
    game.touched.append(("empty_window", round_id))
    return t + fault.delay + 1.0
