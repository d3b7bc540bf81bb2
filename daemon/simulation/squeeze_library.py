"""The squeeze fixtures in ``hw-fixtures/``: library shoes dealt on a squeeze table.

Each is a library fixture (``library.py``) with ``table.reveal.mode: squeeze`` and the game server's
``reveal`` commands added: the open-mode replay of the same bytes tells when each round's last card
was read and which slots it has, and a ``reveal`` of every slot (in the default order) follows it.
A round the shoe's own steps void is never revealed (its cards go to the auditors' topic). The
golden replay gives every card read a seeded nonce (``golden.py``), so the expected streams are
reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, make_fixture
from drivers.fixtures import Fixture, FixtureStep, SupervisorStep

REVEAL_ORDER = ("P1", "P2", "B1", "B2", "P3", "B3")
REVEAL_LAG = 0.2
"""Seconds after a round's last card its reveal comes (before an Angel Eye's verdict frame)."""


@dataclass(frozen=True, slots=True)
class SqueezeEntry:
    """A squeeze fixture: a library deal, the hands revealed late (after the next card is read:
    a card before the reveal), extra reveal steps (mistakes) and restarts, by hand."""

    name: str
    protocol: str
    description: str
    covers: tuple[str, ...]
    faults: tuple[FaultSpec, ...] = ()
    late_hands: frozenset[int] = frozenset()
    wrong_reveals: dict[int, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    after_reveal: dict[int, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    restart_hands: frozenset[int] = frozenset()
    button_line: bytes | None = None
    """A line reader's dealer button (``reveal_button`` signal text plus CR LF): each round is
    revealed by one press per slot instead of the server's command."""

    def base(self) -> Fixture:
        return make_fixture(
            self.name,
            self.protocol,
            DealSettings(seed=11, max_hands=4),
            self.faults,
            description=self.description,
            covers=self.covers,
        )

    def fixture(self) -> Fixture:
        """The fixture: the base deal with the squeeze table and its reveal steps."""
        from daemon.simulation.golden import engine_events

        base = self.base()
        events, _ = engine_events(base)  # the open table: which round got which card, when
        rounds = _rounds(events)
        steps = list(base.steps)
        for hand, (last_at, slots) in sorted(rounds.items()):
            at = _next_card_after(events, last_at) if hand in self.late_hands else last_at
            extra = self._steps_for(hand, at, slots)
            steps = sorted([*steps, *extra], key=lambda s: s.t)  # (stable: each lands after its equals)
        reveal: dict[str, Any] = {"mode": "squeeze"}
        update: dict[str, Any] = {}
        if self.button_line is not None:
            reveal["order_source"] = "button"
            text = self.button_line.decode("ascii").strip()
            signals = {"reveal_button": [text]}
            update["protocol_settings"] = {**base.header.protocol_settings, "signals": signals}
        update["table"] = {**base.header.table, "reveal": reveal}
        header = base.header.model_copy(update=update)
        return Fixture(header=header, steps=tuple(steps))

    def _steps_for(self, hand: int, at: float, slots: list[str]) -> list[FixtureStep]:
        out: list[FixtureStep] = []
        t = at + 0.05
        if hand in self.restart_hands:
            out.append(FixtureStep(t=round(t, 3), event="restart", note=f"restart mid-squeeze, hand {hand}"))
        for k, wrong in enumerate(self.wrong_reveals.get(hand, ())):
            out.append(_reveal(round(t + 0.01 * (k + 1), 3), hand, list(wrong), f"wrong-{hand}-{k}"))
        order = [s for s in REVEAL_ORDER if s in slots]
        if self.button_line is not None:
            for k in range(len(order)):  # one press per slot, in the table's reveal order
                out.append(FixtureStep(t=round(at + REVEAL_LAG + 0.01 * k, 3), data=self.button_line))
        else:
            out.append(_reveal(round(at + REVEAL_LAG, 3), hand, order, f"reveal-{hand}"))
        for k, extra in enumerate(self.after_reveal.get(hand, ())):
            step = SupervisorStep(command_id=f"after-{hand}-{k}", **extra)
            out.append(FixtureStep(t=round(at + REVEAL_LAG + 0.01 * (k + 1), 3), supervisor=step))
        return out


def _reveal(t: float, hand: int, slots: list[str], command_id: str) -> FixtureStep:
    step = SupervisorStep(action="reveal", args={"slots": slots, "hand": hand}, command_id=command_id)
    return FixtureStep(t=t, supervisor=step, note="the game server reveals")


def _rounds(events: list[dict[str, Any]]) -> dict[int, tuple[float, list[str]]]:
    """Each round of the open replay that was not voided: its last card's time and its slots."""
    rounds: dict[int, tuple[float, list[str]]] = {}
    voided: set[int] = set()
    for event in events:
        data = event["data"]
        if event["kind"] == "card_dealt" and data.get("round") is not None:
            _, slots = rounds.get(data["round"], (0.0, []))
            rounds[data["round"]] = (float(event["at"]), [*slots, data["slot"]])
        elif event["kind"] == "round_voided":
            voided.add(data["hand"])
    return {hand: r for hand, r in rounds.items() if hand not in voided}


def _next_card_after(events: list[dict[str, Any]], at: float) -> float:
    """When the first card after ``at`` was read (the card a late reveal comes after)."""
    return next(float(e["at"]) for e in events if e["kind"] == "card_dealt" and float(e["at"]) > at)


def _entries(protocol: str) -> tuple[SqueezeEntry, ...]:
    two = (FaultSpec(Fault.MISREAD, 2),)
    entries = [
        SqueezeEntry(
            f"{protocol}-squeeze-clean",
            protocol,
            "Four squeeze hands: every card committed at the deal, revealed by the game server.",
            ("squeeze: commit, then reveal",),
        ),
        SqueezeEntry(
            f"{protocol}-squeeze-misread",
            protocol,
            "Squeeze hand 2: a card unreadable, then its rescan, committed like the others.",
            ("squeeze: a misread",),
            faults=two,
        ),
        SqueezeEntry(
            f"{protocol}-squeeze-unneeded-card",
            protocol,
            "Squeeze hand 2: a card drawn before the round was revealed: refused, counted, the round "
            "held until a supervisor resolves it.",
            ("squeeze: an unneeded card before the reveal (card_before_reveal)",),
            faults=(FaultSpec(Fault.UNNEEDED_CARD, 2),),
            late_hands=frozenset({2}),
            after_reveal={2: ({"action": "resolve_hold", "args": {"hand": 2}},)},
        ),
        SqueezeEntry(
            f"{protocol}-squeeze-reveal-mistakes",
            protocol,
            "Squeeze hand 1: reveals out of order and of a slot not dealt are refused; hand 2: a slot "
            "revealed twice.",
            ("squeeze: a reveal out of order, of a slot not dealt, twice",),
            wrong_reveals={1: (("B1",), ("B3",))},
            after_reveal={2: ({"action": "reveal", "args": {"slots": ["P1"], "hand": 2}},)},
        ),
        SqueezeEntry(
            f"{protocol}-squeeze-voided",
            protocol,
            "Squeeze hand 2: a card exposed, the round voided before its reveal: its cards go to the "
            "auditors only.",
            ("squeeze: a round voided before its reveal",),
            faults=(FaultSpec(Fault.CARD_EXPOSED, 2),),
        ),
    ]
    if protocol == "ascii_lines":
        entries.append(
            SqueezeEntry(
                f"{protocol}-squeeze-button",
                protocol,
                "Four squeeze hands revealed by the dealer's button (a configured line), one press per "
                "slot in the table's reveal order.",
                ("squeeze: reveals from a dealer button",),
                button_line=b"SQUEEZE\r\n",
            )
        )
    if protocol != "usb_hid":  # (a restart is replayed on serial readers only)
        entries.append(
            SqueezeEntry(
                f"{protocol}-squeeze-restart",
                protocol,
                "Squeeze hand 3: the edge restarts after the round's cards, before its reveal; the "
                "sealed cards come back from the journal and the reveal goes on.",
                ("squeeze: a restart mid-squeeze",),
                restart_hands=frozenset({3}),
            )
        )
    return tuple(entries)


SQUEEZE_LIBRARY: tuple[SqueezeEntry, ...] = tuple(
    entry for protocol in ("angel_eye", "ascii_lines", "usb_hid") for entry in _entries(protocol)
)
