"""A reference dealer: separate, deliberately plain code that deals a shoe by the book.

It shares nothing with the engine's state machine: it walks a shuffled shoe with
its own third-card rule (written from the table in daemon/rules/RULES.md, not from
``daemon.rules.tableau``), produces the inputs a clean table would send, and the
events a correct engine must answer with. For the standard variant the outcome summary
and every bet are worked out here too, by hand from RULES.md (Banker 19/20, Player 1,
Tie 8, pairs 11), so an outcome or settlement bug in the engine shows up as a
difference; other variants' bets come from the rules core (tested on their own in
tests/rules).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from common.cards import ALL_CARDS, Card
from common.inputs import (
    CardRead,
    CutCardDrawn,
    DeviceTarget,
    EngineInput,
    ShoeVerdict,
    SupervisorCommand,
    VerdictOutcome,
)
from daemon.engine.settings import TableSettings
from daemon.rules.bets import resolve_bets
from daemon.rules.outcome import RoundOutcome
from daemon.rules.variants import Variant
from tests.engine.reference_audit import expected_certificate

# RULES.md: Banker total -> Player third-card points on which the Banker draws.
BANKER_DRAWS = {
    0: set(range(10)),
    1: set(range(10)),
    2: set(range(10)),
    3: {0, 1, 2, 3, 4, 5, 6, 7, 9},
    4: {2, 3, 4, 5, 6, 7},
    5: {4, 5, 6, 7},
    6: {6, 7},
    7: set(),
}

# The standard variant's bets as RULES.md states them: (name, pays on a win as "n" or "n/d").
STANDARD_BETS = (
    ("Player", "1"),
    ("Banker", "19/20"),
    ("Tie", "8"),
    ("Player Pair", "11"),
    ("Banker Pair", "11"),
)

CARD_GAP = 1.0  # seconds between two cards of a round
ROUND_GAP = 20.0  # seconds between rounds (betting time)


def total(cards: list[Card] | tuple[Card, ...]) -> int:
    return sum(c.rank if c.rank < 10 else 0 for c in cards) % 10


def outcome_of(player: tuple[Card, ...], banker: tuple[Card, ...]) -> dict[str, Any]:
    """The round's outcome summary, worked out here (the form of ``RoundOutcome.to_dict()``)."""
    pt, bt = total(player), total(banker)
    winner = "player" if pt > bt else "banker" if bt > pt else "tie"
    first = int(banker[0].rank) - int(player[0].rank)
    return {
        "player": [c.code for c in player],
        "banker": [c.code for c in banker],
        "player_total": pt,
        "banker_total": bt,
        "winner": winner,
        "margin": abs(pt - bt),
        "player_natural": total(player[:2]) in (8, 9),
        "banker_natural": total(banker[:2]) in (8, 9),
        "player_pair": player[0].rank == player[1].rank,
        "banker_pair": banker[0].rank == banker[1].rank,
        "player_suited_pair": player[0].rank == player[1].rank and player[0].suit == player[1].suit,
        "banker_suited_pair": banker[0].rank == banker[1].rank and banker[0].suit == banker[1].suit,
        "cards": len(player) + len(banker),
        "first_card": "dragon" if first > 0 else "tiger" if first < 0 else "tie",
    }


def standard_bets(outcome: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every standard-variant bet settled by hand: win pays its odds, a Player/Banker bet on a
    tie is returned (push), anything else loses its stake."""
    winner = outcome["winner"]
    won = {
        "Player": winner == "player",
        "Banker": winner == "banker",
        "Tie": winner == "tie",
        "Player Pair": outcome["player_pair"],
        "Banker Pair": outcome["banker_pair"],
    }
    out: dict[str, dict[str, Any]] = {}
    for name, pays in STANDARD_BETS:
        if won[name]:
            numerator, _, denominator = pays.partition("/")
            value = int(numerator) / int(denominator or "1")
            out[name] = {"outcome": "win", "multiplier": pays, "multiplier_float": value}
        elif winner == "tie" and name in ("Player", "Banker"):
            out[name] = {"outcome": "push", "multiplier": "0", "multiplier_float": 0.0}
        else:
            out[name] = {"outcome": "lose", "multiplier": "-1", "multiplier_float": -1.0}
    return out


def deal_round(cards: list[Card]) -> list[tuple[str, Card]]:
    """Deal one round from the top of ``cards`` by RULES.md; return (slot, card) in deal order."""
    it = iter(cards)
    player = [next(it), None]
    banker = [next(it), None]
    player[1] = next(it)
    banker[1] = next(it)
    p, b = [c for c in player if c], [c for c in banker if c]
    out = [("P1", p[0]), ("B1", b[0]), ("P2", p[1]), ("B2", b[1])]
    pt, bt = total(p), total(b)
    if pt >= 8 or bt >= 8:
        return out
    third: Card | None = None
    if pt <= 5:
        third = next(it)
        out.append(("P3", third))
        banker_draws = bt in BANKER_DRAWS and (third.points in BANKER_DRAWS[bt])
    else:
        banker_draws = bt <= 5
    if banker_draws:
        out.append(("B3", next(it)))
    return out


@dataclass
class Dealt:
    """Inputs for the engine and the events expected back (data without the ``read`` audit part)."""

    inputs: list[EngineInput] = field(default_factory=list)
    expected: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[list[tuple[str, Card]]] = field(default_factory=list)


def shuffled_shoe(decks: int, rng: random.Random) -> list[Card]:
    cards = list(ALL_CARDS) * decks
    rng.shuffle(cards)
    return cards


def burn_for(settings: TableSettings, card: Card) -> int:
    value = (
        card.rank
        if 1 < card.rank < 10
        else (settings.burn.ace_burns if card.rank == 1 else settings.burn.face_burns)
    )
    return value - 1 if settings.burn.indicator_counts else value


def deal_shoe(
    settings: TableSettings,
    variant: Variant,
    cards: list[Card],
    cut_at: int,
    shoe_id: str = "S1",
    dies: random.Random | None = None,
    started_by_device: bool = False,
) -> Dealt:
    """A whole clean shoe: new_shoe, indicator, burn, rounds until the cut card's last round.

    ``cut_at`` is the index in ``cards`` before which the cut card comes out.
    ``started_by_device``: no new_shoe command; the reader marks the indicator as the shoe's
    first card (``device_starts_shoe``), and the shoe id is the engine's own
    ``shoe-1-<indicator time in ms>``.
    """
    out = Dealt()
    t = 100.0
    hand = 0
    if started_by_device:
        shoe_id = f"shoe-1-{round((t + CARD_GAP) * 1000)}"

    def ev(kind: str, hand_: int | None, shoe: str | None = shoe_id, **data: Any) -> None:
        out.expected.append({"kind": kind, "shoe_id": shoe, "hand": hand_, "data": data})

    if not started_by_device:
        out.inputs.append(SupervisorCommand("new_shoe", t, "sup", "cmd-shoe", {"shoe_id": shoe_id}))
        ev("command_accepted", None, None, command_id="cmd-shoe", action="new_shoe", actor="sup", reason=None)
    ev(
        "shoe_started",
        None,
        shoe_id=shoe_id,
        decks=settings.decks,
        variant=variant.name,
        variant_digest=variant.digest,
        started_by="device" if started_by_device else "supervisor",
        actor=None if started_by_device else "sup",
        command_id=None if started_by_device else "cmd-shoe",
    )
    i = 0
    cut_seen = False
    last_hand: int | None = None
    burned: list[Card] = []
    winners: list[str] = []  # of the rounds completed when the shoe ends

    def card_in(kind_slot: str, in_round: bool) -> None:
        nonlocal i, t, cut_seen, last_hand
        t += CARD_GAP
        if i == cut_at and not cut_seen:
            cut_seen = True
            out.inputs.append(CutCardDrawn(t - 0.5))
            during = hand if in_round else None
            finish = settings.cut_card_policy.value == "finish_current_round"
            last_hand = during if (during is not None and finish) else (during or hand) + 1
            ev("cut_card", during, during_hand=during, policy=settings.cut_card_policy.value, device="reader")
            ev("last_round", last_hand, hand=last_hand)
        target = DeviceTarget.FIRST_CARD if started_by_device and kind_slot == "indicator" else None
        out.inputs.append(CardRead(cards[i], t, target=target, transmission_id=f"tx{i}"))
        i += 1

    indicator = cards[0]
    card_in("indicator", False)
    n = burn_for(settings, indicator)
    ev("card_dealt", None, card=indicator.code, slot="indicator", source="reader", burn_count=n)
    burned.append(indicator)
    for _ in range(n):
        code = cards[i].code
        burned.append(cards[i])
        card_in("burn", False)
        ev("card_dealt", None, card=code, slot="burn", source="reader", burn="opening")
    ev("bets_offered", 1, hand=1, bets=variant.offered_bets(1))
    while True:
        t += ROUND_GAP
        next_hand = hand + 1
        die: int | None = None
        if variant.needs_super_round_die and variant.super_round is not None:
            assert dies is not None
            die = dies.randint(1, variant.super_round.die_faces)
            cid = f"die-{next_hand}"
            out.inputs.append(SupervisorCommand("super_round_die", t, "sup", cid, {"value": die}))
            ev("command_accepted", None, command_id=cid, action="super_round_die", actor="sup", reason=None)
            ev("super_round_die", next_hand, hand=next_hand, value=die, actor="sup", command_id=cid)
        if settings.burn_before_each_round:
            for _ in range(settings.round_burn_cards):
                code = cards[i].code
                burned.append(cards[i])
                card_in("burn", False)
                ev("card_dealt", None, card=code, slot="burn", source="reader", burn="round")
        dealt = deal_round(cards[i:])
        for k, (slot, card) in enumerate(dealt):
            card_in(slot, k > 0)
            if k == 0:
                hand = next_hand
                ev("round_opened", hand, hand=hand, bets=variant.offered_bets(hand))
            ev("card_dealt", hand, card=card.code, slot=slot, source="reader", round=hand)
        decided_at = t
        out.rounds.append(dealt)
        player = tuple(c for s, c in dealt if s[0] == "P")
        banker = tuple(c for s, c in dealt if s[0] == "B")
        offered = set(variant.offered_bets(hand))
        if variant.name == "standard":
            summary = outcome_of(player, banker)
            bets = {k: r for k, r in standard_bets(summary).items() if k in offered}
        else:
            outcome = RoundOutcome(player, banker)
            summary = outcome.to_dict()
            bets = {k: r.to_dict() for k, r in resolve_bets(variant, outcome, die).items() if k in offered}
        slots = {s: c.code for s, c in sorted(dealt, key=lambda sc: "P1B1P2B2P3B3".index(sc[0]))}
        completed: dict[str, Any] = {
            "hand": hand,
            "cards": slots,
            "sources": dict.fromkeys(slots, "reader"),
            "outcome": summary,
            "bets": bets,
            "super_round_die": die,
            "corrected": False,
            "decided_at": decided_at,
        }
        awaiting = settings.await_device_verdict
        if awaiting:
            # The round waits for the shoe's own verdict (Angel Eye 'G'), sent just after.
            ev(
                "round_held",
                hand,
                hand=hand,
                cards=slots,
                blocked_by=["awaiting the reader's verdict"],
                awaiting_verdict=True,
                decided_at=decided_at,
            )
        else:
            ev("round_completed", hand, **completed)
            winners.append(summary["winner"])
        last = last_hand is not None and hand >= last_hand
        if last:
            ev("shoe_ended", None, shoe_id=shoe_id, reason="cut_card", hands=hand, cards_out=i)
            certificate, alert = expected_certificate(
                settings, shoe_id, cards[:i], burned, out.rounds, winners
            )
            ev("shoe_certificate", None, **certificate)
            if alert is not None:
                ev("alert_raised", None, **alert)
        else:
            ev("bets_offered", hand + 1, hand=hand + 1, bets=variant.offered_bets(hand + 1))
        if awaiting:
            verdict = VerdictOutcome(summary["winner"])
            ppair, bpair = summary["player_pair"], summary["banker_pair"]
            out.inputs.append(ShoeVerdict(verdict, ppair, bpair, t + 0.5))
            ev(
                "verdict_checked",
                hand,
                hand=hand,
                agrees=True,
                verdict={
                    "outcome": verdict.value,
                    "player_pair": ppair,
                    "banker_pair": bpair,
                    "raw": None,
                    "device": "reader",
                },
            )
            ev("round_completed", hand, **(completed | {"decided_at": None}))
            winners.append(summary["winner"])
        if last:
            return out


def project(event: Any) -> dict[str, Any]:
    """An engine event in the reference's terms (the audit ``read`` part dropped)."""
    data = {k: v for k, v in event.data.items() if k != "read"}
    return {"kind": event.kind, "shoe_id": event.shoe_id, "hand": event.hand, "data": data}
