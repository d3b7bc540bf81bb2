"""Property tests: faults injected into dealt shoes, and arbitrary input streams.

Whatever arrives (double pulls, pulls missing a card, extra cards, misreads, duplicates,
foreign and over-composition cards, garbage order, device noise, malformed commands), the
engine never raises, never publishes an illegal or incomplete round, never lets a
card exceed the shoe's composition, answers every command exactly once, and its
state is always the fold of its events.

With faults injected into a dealt shoe, every completed round is also the reference
dealer's round for the same physical cards (``_physical_cards``: the cards that came out
of the shoe, in the order they came out, whether the reader reported them or not), starting
right after the last card (in shoe order) the engine dealt before the round opened, unless something that
tells a supervisor the engine's model may be off covers it: a holding alert, a rescan, a
journal-full refusal, a void, a correction, a card the camera or a supervisor supplied, or the
round having been held (it completes only once a supervisor resolved the hold: accepting the
engine's model is then a human decision, e.g. a random ``resolve_hold`` in the stream).
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from common.cards import ALL_CARDS, Card
from common.inputs import (
    CardRead,
    CutCardDrawn,
    DeviceConnection,
    DeviceTarget,
    EngineInput,
    OutsideGameCard,
    OutsideGameMode,
    ReaderSignal,
    ReaderSignalKind,
    ReadFailed,
    ShoeVerdict,
    Source,
    StorageState,
    SupervisorCommand,
    Tick,
    VerdictOutcome,
)
from daemon.alerts import HOLDING_CODES
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from tests.engine.reference import CARD_GAP, deal_round, deal_shoe, shuffled_shoe
from tests.engine.support import assert_legal, assert_restores, variant

FAULTS = [
    "target",
    "camera",
    "dup",
    "pull",
    "lost",
    "misread",
    "extra",
    "foreign",
    "garbage",
    "tick",
    "cut",
    "unplug",
    "verdict",
    "command",
    "outside",
    "storage",
]

SLOTS = ["P1", "B1", "P2", "B2", "P3", "B3", "burn", "indicator", "X9", None]
ACTIONS = [
    "new_shoe",
    "void_round",
    "void_shoe",
    "assign_card",
    "move_card",
    "swap",
    "rearrange",
    "acknowledge_alert",
    "resolve_hold",
    "rescan_ack",
    "super_round_die",
    "lock",
    "bogus",
]


def _random_command(rng: random.Random, at: float, n: int) -> SupervisorCommand:
    action = rng.choice(ACTIONS)
    pool: dict[str, Any] = {
        "hand": rng.choice([None, 1, 2, rng.randint(1, 80), -1, "x", True]),
        "card": rng.choice([c.code for c in ALL_CARDS[:20]] + ["Zz", 5, None]),
        "slot": rng.choice(SLOTS),
        "from": rng.choice(SLOTS),
        "to": rng.choice(SLOTS),
        "a": rng.choice(SLOTS),
        "b": rng.choice(SLOTS),
        "sides": rng.choice([True, False, "yes"]),
        "alert_id": rng.choice([f"S1:a{rng.randint(1, 30)}", f"noshoe:a{rng.randint(1, 5)}", None, 7]),
        "value": rng.choice([rng.randint(1, 12), 0, 99, "8"]),
        "reason": rng.choice(["", "dealer error", None, 3]),
        "shoe_id": rng.choice([None, f"S{n}", "bad id!", "S1"]),
        "cards": rng.choice(
            [
                {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d"},
                {"P1": "9s", "B2": "2h"},
                {"Q": "9s"},
                "nope",
                {"P1": "9s", "B1": "2h", "P2": "Kc", "B2": "3d", "P3": "4c"},
            ]
        ),
        "extra": 1,
    }
    keys = rng.sample(sorted(pool), rng.randint(0, 4))
    args = {k: pool[k] for k in keys if pool[k] is not None}
    return SupervisorCommand(action, at, "fuzz", f"cmd-{n}", args)


def _run_of_reads(out: list[EngineInput], i: int, k: int) -> list[CardRead]:
    """Up to ``k`` reads from ``out[i]`` that a dealer could pull together: consecutive card reads
    of one run (one round, or a burn run), no betting interval between them; else []."""
    group = out[i : i + k]
    reads = [x for x in group if isinstance(x, CardRead) and x.source is Source.READER and x.position is None]
    if len(reads) < 2 or len(reads) != len(group):
        return []
    if any(b.at - a.at != CARD_GAP for a, b in itertools.pairwise(reads)):
        return []
    return reads


def _inject(
    inputs: list[EngineInput], rng: random.Random, faults: list[str]
) -> tuple[list[EngineInput], dict[str, list[CardRead]]]:
    """The inputs with ``faults`` injected, and the pulled cards the reader never reported
    (by pull tag: a pull's reads carry ``raw = "pull<n>"``)."""
    out = list(inputs)
    lost: dict[str, list[CardRead]] = {}
    for n, fault in enumerate(faults):
        i = rng.randrange(1, len(out))
        here = out[i]
        at = here.at
        if fault == "dup" and isinstance(here, CardRead):
            out.insert(i + 1, here)
        elif fault in ("pull", "lost"):
            group = _run_of_reads(out, i, rng.randint(2, 3))
            if not group:
                continue
            tag = f"pull{n}"
            pulled = [
                CardRead(x.card, at + 0.01 * j, position=j + 1, transmission_id=x.transmission_id, raw=tag)
                for j, x in enumerate(group)
            ]
            if fault == "lost":  # the reader never reports one card above the bottom one
                lost[tag] = [pulled.pop(rng.randrange(len(pulled) - 1))]
            rng.shuffle(pulled)
            out[i : i + len(group)] = pulled
        elif fault == "misread":
            out.insert(i, ReadFailed(at - 0.1, code=1))
        elif fault in ("extra", "foreign"):
            card = rng.choice(ALL_CARDS) if fault == "extra" else ALL_CARDS[0]
            for _ in range(1 if fault == "extra" else rng.randint(1, 9)):
                out.insert(i, CardRead(card, at - 0.05, transmission_id=f"x{n}"))
        elif fault == "garbage":
            # Inputs arrive in another order (their times stay in order: the clock runs forward).
            window = out[i : i + 3]
            tids = [x.transmission_id for x in out if isinstance(x, CardRead)]
            if any(
                isinstance(x, CardRead)
                and (
                    x.position is not None
                    or (x.transmission_id is not None and tids.count(x.transmission_id) > 1)
                )
                for x in window
            ):
                # Not across a pull nor a resend: with the times kept in order, a pull's card or a
                # resent copy would be reported seconds after its pull or its original, which no
                # device does and no engine could tell from a new pull or a new card (the pull
                # and dup faults cover those reads' own disorder).
                continue
            times = [x.at for x in window]
            rng.shuffle(window)
            out[i : i + 3] = [x._replace(at=t) for x, t in zip(window, times, strict=True)]
        elif fault == "tick":
            out.insert(i, Tick(at + rng.random()))
        elif fault == "cut":
            out.insert(i, CutCardDrawn(at))
        elif fault == "unplug":
            out.insert(i, DeviceConnection(False, at))
            out.insert(i + rng.randint(1, 4), DeviceConnection(True, at + 1))
        elif fault == "verdict":
            outcome = rng.choice(list(VerdictOutcome))
            out.insert(i, ShoeVerdict(outcome, rng.random() < 0.1, rng.random() < 0.1, at))
        elif fault == "command":
            out.insert(i, _random_command(rng, at, n))
        elif fault == "outside":
            card = here.card if isinstance(here, CardRead) and rng.random() < 0.5 else rng.choice(ALL_CARDS)
            mode = rng.choice(list(OutsideGameMode))
            out.insert(i, OutsideGameCard(card, mode, at - 0.02, transmission_id=f"d{n}"))
        elif fault == "storage":
            out.insert(i, StorageState(True, at - 0.03, "disk full"))
            out.insert(i + rng.randint(1, 6), StorageState(False, at + 0.5))
        elif fault == "target" and isinstance(here, CardRead):
            out[i] = here._replace(target=rng.choice(list(DeviceTarget)))
        elif fault == "camera":
            card = here.card if isinstance(here, CardRead) and rng.random() < 0.7 else rng.choice(ALL_CARDS)
            slot = rng.choice(
                [DeviceTarget.P1, DeviceTarget.B1, DeviceTarget.P2, DeviceTarget.B2, DeviceTarget.P3]
            )
            camera = CardRead(
                card, at + 0.3, source=Source.CAMERA, device="camera", target=slot, confidence=rng.random()
            )
            out.insert(i + 1, camera)
    return out, lost


def _physical_cards(
    inputs: list[EngineInput], lost: dict[str, list[CardRead]]
) -> list[tuple[str | None, str]]:
    """The cards that physically came out of the shoe, in order, as (transmission id, card).

    Reader reads in arrival order, a resend (same transmission id and card) once; a pull's cards
    (tagged ``pull<n>``) at its first read's place, in position order, with any card the reader
    never reported. Camera reads and cards drawn outside the game are not layout cards.
    """
    pulls: dict[str, list[CardRead]] = {tag: list(cards) for tag, cards in lost.items()}
    for x in inputs:
        if isinstance(x, CardRead) and x.raw is not None and x.raw.startswith("pull"):
            pulls.setdefault(x.raw, []).append(x)
    out: list[tuple[str | None, str]] = []
    seen: set[tuple[str | None, str]] = set()
    for x in inputs:
        if not isinstance(x, CardRead) or x.source is not Source.READER:
            continue
        group = [x]
        if x.raw in pulls:
            group = sorted(pulls.pop(x.raw), key=lambda r: r.position or 0)
        elif x.raw is not None and x.raw.startswith("pull"):
            continue  # a later read of a pull placed already
        for r in group:
            key = (r.transmission_id, r.card.code)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


# What tells a supervisor the engine's model may differ from the layout.
_COVERING_ALERTS = HOLDING_CODES | {"rescan_needed", "journal_full_card_refused"}
_COVERING_KINDS = {"round_voided", "round_corrected", "shoe_started", "shoe_voided"}


def _covers(event: Event) -> bool:
    if event.kind == "alert_raised":
        return event.data["code"] in _COVERING_ALERTS
    return event.kind in _COVERING_KINDS


def assert_rounds_are_the_physical_ones(events: list[Event], physical: list[tuple[str | None, str]]) -> None:
    """Every completed round not covered (see the module docstring) is the reference dealer's
    round from the physical card after the last card (in shoe order) the engine dealt before it
    opened."""
    index = {key: n for n, key in enumerate(physical)}
    last: int | None = None  # physical index of the last card (in shoe order) the engine dealt
    last_at = 0  # and the index of its event
    rounds: dict[tuple[str | None, int], tuple[int | None, int, list[tuple[str, int | None]]]] = {}
    held: set[tuple[str | None, int]] = set()  # rounds that were held before they completed
    for n, e in enumerate(events):
        if e.kind == "round_opened":
            rounds[(e.shoe_id, e.data["hand"])] = (last, last_at, [])
        elif e.kind == "card_dealt":
            read = e.data.get("read")
            found = None
            if read is not None and read["source"] == "reader":
                found = index.get((read["transmission_id"], read["card"]))
            if "round" in e.data and (e.shoe_id, e.data["round"]) in rounds:
                rounds[(e.shoe_id, e.data["round"])][2].append((e.data["slot"], found))
            if found is not None and (last is None or found > last):
                last, last_at = found, n
        elif e.kind == "round_held":
            held.add((e.shoe_id, e.data["hand"]))
        elif e.kind == "round_completed" and (e.shoe_id, e.data["hand"]) in rounds:
            anchor, since, cards = rounds[(e.shoe_id, e.data["hand"])]
            if (
                anchor is None
                or (e.shoe_id, e.data["hand"]) in held
                or any(_covers(x) for x in events[since:n])
                or any(i is None for _, i in cards)
            ):
                continue
            start = anchor + 1
            dealt = deal_round([Card.parse(code) for _, code in physical[start:]])
            expected = [(slot, start + k) for k, (slot, _) in enumerate(dealt)]
            assert cards == expected, (
                f"hand {e.hand} of {e.shoe_id} settled {e.data['cards']} with no alert or void, but the "
                f"cards from the shoe were {[physical[i][1] for i in range(start, start + len(dealt))]}"
            )


def _run_checked(eng: Engine, inputs: list[EngineInput]) -> list[Event]:
    events: list[Event] = []
    for inp in inputs:
        produced = eng.handle(inp)
        if isinstance(inp, SupervisorCommand):
            replies = [e for e in produced if e.kind in ("command_accepted", "command_refused")]
            assert len(replies) == 1, f"{inp.action} got {len(replies)} replies"
            assert replies[0].data["command_id"] == inp.command_id
            if replies[0].kind == "command_refused":
                assert replies[0].data["reason"]
        events.extend(produced)
        st = eng.state
        rounds = [*([st.round] if st.round is not None else []), *st.held.values()]
        holding = {a for r in rounds for a in r.holds} | set(st.next_round_holds)
        assert holding <= set(st.alerts), "a round is held by an alert that is no longer open"
    return events


@settings(max_examples=120)
@given(
    decks=st.sampled_from([1, 2, 8]),
    per_round_burn=st.booleans(),
    await_verdict=st.booleans(),
    variant_name=st.sampled_from(["standard", "ez", "super-98"]),
    seed=st.integers(0, 2**32),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=25),
)
def test_injected_faults_never_yield_an_illegal_round(
    decks: int, per_round_burn: bool, await_verdict: bool, variant_name: str, seed: int, faults: list[str]
) -> None:
    cfg = TableSettings(
        decks=decks, burn_before_each_round=per_round_burn, await_device_verdict=await_verdict
    )
    rng = random.Random(seed)
    cards = shuffled_shoe(decks, rng)
    cut_at = rng.randint(len(cards) - 40, len(cards) - 22)
    clean = deal_shoe(cfg, variant(variant_name), cards, cut_at, dies=rng).inputs
    eng = Engine(cfg, variant(variant_name))
    inputs, lost = _inject(clean, rng, faults)
    events = _run_checked(eng, inputs)
    assert_legal(events, decks)
    assert_rounds_are_the_physical_ones(events, _physical_cards(inputs, lost))
    assert_restores(eng, events)


def _card_reads() -> st.SearchStrategy[EngineInput]:
    return st.builds(
        CardRead,
        card=st.sampled_from(ALL_CARDS[:13]),  # few distinct cards: composition limits are hit
        at=st.floats(0, 50),
        source=st.sampled_from([Source.READER, Source.READER, Source.CAMERA]),
        position=st.one_of(st.none(), st.integers(0, 4)),
        target=st.one_of(st.none(), st.sampled_from(list(DeviceTarget))),
        transmission_id=st.one_of(st.none(), st.sampled_from(["1", "2", "3"])),
        confidence=st.one_of(st.none(), st.floats(0, 1)),
    )


_any_input = st.one_of(
    _card_reads(),
    _card_reads(),
    _card_reads(),
    st.builds(ReadFailed, at=st.floats(0, 50), position=st.one_of(st.none(), st.integers(1, 3))),
    st.builds(CutCardDrawn, at=st.floats(0, 50)),
    st.builds(
        OutsideGameCard,
        card=st.sampled_from(ALL_CARDS[:13]),
        mode=st.sampled_from(list(OutsideGameMode)),
        at=st.floats(0, 50),
        transmission_id=st.one_of(st.none(), st.sampled_from(["1", "2", "3"])),
    ),
    st.builds(ReaderSignal, kind=st.sampled_from(list(ReaderSignalKind)), at=st.floats(0, 50)),
    st.builds(
        ShoeVerdict,
        outcome=st.sampled_from(list(VerdictOutcome)),
        player_pair=st.booleans(),
        banker_pair=st.booleans(),
        at=st.floats(0, 50),
    ),
    st.builds(
        DeviceConnection,
        connected=st.booleans(),
        at=st.floats(0, 50),
        device=st.sampled_from(["reader", "camera"]),
    ),
    st.builds(Tick, at=st.floats(0, 60)),
    st.builds(StorageState, full=st.booleans(), at=st.floats(0, 50)),
    st.builds(CardRead, card=st.sampled_from(ALL_CARDS), at=st.sampled_from([math.nan, math.inf, -math.inf])),
    st.builds(
        lambda seed, at: _random_command(random.Random(seed), at, seed),
        st.integers(0, 10_000),
        st.floats(0, 50),
    ),
)


@settings(max_examples=300)
@given(
    decks=st.sampled_from([1, 8]),
    start=st.booleans(),
    inputs=st.lists(_any_input, max_size=60),
)
def test_arbitrary_input_streams_never_crash_and_always_fold(
    decks: int, start: bool, inputs: list[EngineInput]
) -> None:
    cfg = TableSettings(decks=decks, unneeded_card_window_s=2.0, device_starts_shoe=True)
    eng = Engine(cfg, variant("standard"))
    prefix: list[EngineInput] = [SupervisorCommand("new_shoe", 0.0, "t", "start", {})] if start else []
    ordered = sorted(inputs, key=lambda x: x.at if math.isfinite(x.at) else 25.0)
    events = _run_checked(eng, prefix + ordered)
    assert_legal(events, decks)
    assert_restores(eng, events)
    # A partial history folds to the state the engine had at that point.
    cut = len(events) // 2
    Engine.restore(cfg, variant("standard"), events[:cut]).snapshot()
