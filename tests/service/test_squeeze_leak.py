"""Nothing a squeeze table lets out names a card before its reveal.

The real daemon (in this process: runner, engine thread, SQLite journal, publisher) on a real
mosquitto started on its own port; a client subscribed to ``#`` before the daemon starts records
every message the broker carries; the daemon's info-level JSON log is kept. A one-deck shoe is
replayed through each reader protocol's real driver (``angel_eye`` and ``ascii_lines`` on a
pseudo-terminal, ``usb_hid`` through pyusb's replay backend), and through the camera path (a
misread the camera fills in, camera reads confirming the reader's cards, and one that disagrees).
The game server reveals each round's cards in order.

In a one-deck shoe every card identity occurs once, so :mod:`tests.support.leak_detector` calls
any mention of a hidden card before its ``card_revealed`` a leak: its code in any case or symbol
form, its rank and suit in words, the reader's raw bytes for it, and totals, results or the
third-card decision of its round. The same rig on an ``open`` table is the positive control: the
detector finds every card there. Every reveal is checked against the commitment published at
the deal (``daemon.mqtt.reveal_check``) and every event's signature verifies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from common.cards import Card
from common.inputs import CardRead, DeviceTarget, EngineInput, ReadFailed, Source
from daemon.alerts import AlertCode
from daemon.console.table_model import ConsoleTable
from daemon.fleet.metrics import exposition
from daemon.fleet.render import as_json
from daemon.fleet.tables import Fleet, summarize
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.reveal_check import RevealStatus
from daemon.mqtt.topics import TableTopics
from daemon.service.runner import Daemon
from daemon.service.table_text import render
from daemon.service.table_view import TableView
from daemon.simulation.dealer import DealSettings, Fault, FaultSpec, make_fixture
from drivers.fixtures import load_fixture
from tests.conftest import REPO_ROOT
from tests.service.squeeze_leak_rig import TABLE_ID, LeakRun, run_fixture
from tests.support.broker import MosquittoBroker
from tests.support.leak_detector import Captured, HiddenCard, checkable, find_leaks

pytestmark = pytest.mark.mosquitto

EVENTS = TableTopics(TABLE_ID).events
SEED = 5
ROUND_SLOTS = ("P1", "P2", "P3", "B1", "B2", "B3")


def views_of(messages: list[Captured]) -> list[Captured]:
    """What the monitor, the console (table view and dealer display model, floor row) and the
    fleet view (``--json``, metrics) drew after each message, indexed like that message."""
    view = TableView(TABLE_ID)
    console = ConsoleTable(TABLE_ID)
    fleet = Fleet()
    out: list[Captured] = []
    for message in messages:
        suffix = message.topic.split(f"/{TABLE_ID}/", 1)[-1]
        view.apply(message.topic, message.payload)
        console.apply(suffix, message.payload)
        fleet.receive(message.topic, message.payload)
        model = console.table_model()
        assert model["round"]["hidden"] == [] or (
            model["round"]["player_total"] is None or not {"P1", "P2", "P3"} & set(model["round"]["hidden"])
        ), "a total of a side with a card face down"
        summaries = [summarize(r, now=0.0) for r in fleet.records()]
        drawn = {
            "monitor": render(view, colour=False),
            "console": json.dumps([model, console.floor_row()], ensure_ascii=False),
            "fleet": as_json(summaries, 0.0, message.index) + exposition(summaries, message.index, True, 0),
        }
        out.extend(Captured(message.index, name, text.encode()) for name, text in drawn.items())
    assert view.malformed == 0, view.last_problem  # the squeeze retained state passes the schema
    assert all(s.problem is None for r in fleet.records() for s in r.slots.values())
    return out


def _checked(run: LeakRun) -> None:
    """No leak (on the broker, in the log, in what the views draw), no refused reveal; every reveal
    verifies against its deal; every event is signed."""
    leaks = find_leaks(
        run.messages + views_of(run.messages), run.hidden, EVENTS, log_lines=run.log_lines, public=run.public
    )
    assert leaks == [], "\n".join(leaks[:40])
    assert run.reveals_refused == []
    consumer = EventConsumer(TABLE_ID, key=run.events_key)
    verdicts = []
    for message in run.messages:
        if message.topic == EVENTS:
            received = consumer.feed(message.payload)
            assert received.verdict in (Verdict.NEW, Verdict.DUPLICATE), received.reason
            if received.reveal is not None:
                verdicts.append(received.reveal)
    voided = {(e["shoe_id"], e["data"]["hand"]) for e in run.journal_events if e["kind"] == "round_voided"}
    round_cards = [c for c in run.hidden if c.slot in ROUND_SLOTS and (c.shoe_id, c.hand) not in voided]
    assert round_cards, "the shoe dealt no round"
    assert len(verdicts) == len(round_cards)
    events = [json.loads(m.payload) for m in run.messages if m.topic == EVENTS]
    errors = [
        e["data"]
        for e in events
        if e["kind"] == "alert_raised" and e["data"]["code"] == AlertCode.ENGINE_ERROR
    ]
    assert errors == [], errors[:3]
    assert all(v.status is RevealStatus.VERIFIED for v in verdicts), [
        v.describe() for v in verdicts if not v.ok
    ]
    assert any(m.topic == EVENTS for m in run.messages)


# A whole one-deck shoe with a dealing mistake on each reader protocol; the golden squeeze fixtures
# below cover every mistake on every protocol. LEAK_FULL=1 adds the clean shoes and an unneeded card.
_SHOES: list[tuple[str, str, tuple[FaultSpec, ...]]] = [
    ("angel_eye-misread", "angel_eye", (FaultSpec(Fault.MISREAD, 2),)),
    ("ascii_lines-exposed-voided", "ascii_lines", (FaultSpec(Fault.CARD_EXPOSED, 2),)),
    ("usb_hid-misread", "usb_hid", (FaultSpec(Fault.MISREAD, 3),)),
]
if os.environ.get("LEAK_FULL") == "1":
    _SHOES += [
        ("angel_eye", "angel_eye", ()),
        ("ascii_lines", "ascii_lines", ()),
        ("usb_hid", "usb_hid", ()),
        ("angel_eye-unneeded", "angel_eye", (FaultSpec(Fault.UNNEEDED_CARD, 2),)),
    ]


@pytest.mark.parametrize(
    ("protocol", "faults"),
    [(protocol, faults) for _, protocol, faults in _SHOES],
    ids=[n for n, _, _ in _SHOES],
)
def test_no_card_is_named_before_its_reveal_on_any_reader(
    protocol: str, faults: tuple[FaultSpec, ...], tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    fixture = make_fixture("leak", protocol, DealSettings(decks=1, seed=SEED), faults)
    run = run_fixture(tmp_path, mosquitto.port, fixture, reveal_mode="squeeze")
    assert any(c.raw for c in run.hidden), "the journal keeps each card's raw reader bytes"
    _checked(run)


SQUEEZE_FIXTURES = sorted((REPO_ROOT / "hw-fixtures").glob("*-squeeze-*.fixture.jsonl"))


@pytest.mark.parametrize(
    "path", SQUEEZE_FIXTURES, ids=[p.name.removesuffix(".fixture.jsonl") for p in SQUEEZE_FIXTURES]
)
def test_no_card_is_named_before_its_reveal_in_the_squeeze_fixtures(
    path: Path, tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    """The golden squeeze fixtures (every reader protocol; a misread, an unneeded card, a voided
    round, reveal mistakes, a restart mid-squeeze), their reveals as the fixture sends them. In
    an eight-deck shoe a face may be dealt twice: such a card is checked by name until the other
    one is revealed, by its raw bytes and its round's results throughout."""
    fixture = load_fixture(path)
    run = run_fixture(tmp_path, mosquitto.port, fixture, reveal_mode="squeeze")
    assert checkable(run.hidden, run.public) >= len(run.hidden) // 2
    _checked(run)


class CameraPath:
    """The overhead camera beside the reader: it fills in the card the reader misread (before the
    reader's rescan), confirms every card the reader placed, and once sees another card than the
    reader did."""

    def __init__(self, dispute_card: int | None = None) -> None:
        self.dispute_card = dispute_card
        self.filled = 0
        self.misread = False
        self.cards = 0
        self.disputed: str | None = None

    def __call__(self, inp: EngineInput, daemon: Daemon) -> None:
        if isinstance(inp, ReadFailed):
            self.misread = True
        if not isinstance(inp, CardRead) or inp.source is not Source.READER:
            daemon.submit(inp)
            return
        if self.misread:  # the reader's rescan follows: the camera names the card first
            self.misread = False
            slot = self._next_slot(daemon)
            if slot is not None:
                daemon.submit(self._camera(inp.card, inp.at, slot))
                self.filled += 1
        daemon.submit(inp)
        self.cards += 1
        slot = self._slot_of(daemon, inp.card.code)
        if slot is None:
            return
        seen = inp.card
        if self.cards == self.dispute_card:  # a card the camera gets wrong
            seen = Card.parse("As" if inp.card.code != "As" else "Kd")
            self.disputed = slot
        daemon.submit(self._camera(seen, inp.at + 0.01, slot))

    @staticmethod
    def _camera(card: Card, at: float, slot: str) -> CardRead:
        return CardRead(card, at, Source.CAMERA, target=DeviceTarget(slot), confidence=0.99, device="camera")

    @staticmethod
    def _next_slot(daemon: Daemon) -> str | None:
        assert daemon.wait_until_processed(20)
        rnd = daemon.engine.state.round
        slot = rnd.next_slot() if rnd is not None else None
        return str(slot) if slot is not None else None

    @staticmethod
    def _slot_of(daemon: Daemon, code: str) -> str | None:
        assert daemon.wait_until_processed(20)
        rnd = daemon.engine.state.round
        if rnd is None:
            return None
        return next((str(slot) for slot, card in rnd.cards.items() if str(card) == code), None)


def test_no_card_is_named_before_its_reveal_on_the_camera_path(
    tmp_path: Path, mosquitto: MosquittoBroker
) -> None:
    fixture = make_fixture(
        "leak-camera", "ascii_lines", DealSettings(decks=1, seed=SEED), [FaultSpec(Fault.MISREAD, 2)]
    )
    camera = CameraPath()
    run = run_fixture(tmp_path, mosquitto.port, fixture, reveal_mode="squeeze", hand_on=camera)
    assert camera.filled == 1, "the camera filled in no misread card"
    assert any(c.raw is None for c in run.hidden), "no card was placed from the camera"
    _checked(run)


def test_a_camera_disagreement_names_no_hidden_card(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    fixture = make_fixture("leak-dispute", "ascii_lines", DealSettings(decks=1, seed=SEED))
    camera = CameraPath(dispute_card=12)  # the first round's Player 1 (after the indicator and its burns)
    run = run_fixture(tmp_path, mosquitto.port, fixture, reveal_mode="squeeze", hand_on=camera)
    assert camera.disputed is not None, "the camera disputed no card"
    _checked(run)


def test_the_detector_finds_every_card_of_an_open_table(tmp_path: Path, mosquitto: MosquittoBroker) -> None:
    """Positive control: the same rig and detector on an open table, where every card is public
    the moment it is read, finds each round card named before a reveal that never comes."""
    fixture = make_fixture("leak-open", "ascii_lines", DealSettings(decks=1, seed=SEED))
    run = run_fixture(tmp_path, mosquitto.port, fixture, reveal_mode="open")
    leaks = find_leaks(run.messages + views_of(run.messages), run.hidden, EVENTS, log_lines=run.log_lines)
    for card in run.hidden:
        where = f"(shoe {card.shoe_id} round {card.hand} {card.slot})"
        assert any(where in leak and not leak.startswith("log") for leak in leaks), f"{card} not found"
        assert any(where in leak and leak.startswith("log") for leak in leaks), f"{card} not found in the log"
    assert any("player_total=" in leak or "totals=" in leak for leak in leaks)


def test_the_detector_knows_every_encoding_of_a_card() -> None:
    """Each way a message could name a hidden card, and what must not count (hex digests)."""
    card = HiddenCard("s1", 3, "P1", "Tc", "43 31 30 0d 0a")
    clean = '{"commitment": "aa10cbb2c3tc9", "slot": "P1", "ts": 3, "raw": "05 10 63 81", "round": 3}'
    assert find_leaks([Captured(0, EVENTS, clean.encode())], [card], EVENTS) == []
    named = {
        "code Tc": '{"card": "Tc"}',
        "code 10c": '{"text": "a 10c was read"}',
        "symbol 10♣": '{"text": "10♣"}',
        "words ten of clubs": '{"text": "Ten of Clubs"}',
        "raw 43 31 30 0d 0a": '{"raw": "43 31 30 0d 0a"}',
        "raw 4331300d0a": '{"raw": "4331300d0a"}',
        "raw text C10": '{"line": "C10"}',
    }
    for name, payload in named.items():
        leaks = find_leaks([Captured(0, EVENTS, payload.encode())], [card], EVENTS)
        assert len(leaks) == 1, (name, leaks)
        assert f": {name} names Tc" in leaks[0]
    rnd = '{"hand": 3, "cards": {"P1": null}, "player_total": 4}'
    state = '{"state": {"shoe": {"shoe_id": "s1"}, "round": ' + rnd + "}}"
    leaks = find_leaks([Captured(0, "baccarat/v1/T/state", state.encode())], [card], EVENTS)
    assert leaks == ["#0 baccarat/v1/T/state: player_total=4 of shoe s1 round 3 before its reveal"]


def test_the_detector_judges_a_state_as_of_its_last_seq() -> None:
    """The retained state reflects the events up to its ``last_seq`` and can reach a subscriber
    before the publisher sent them: a card it names that was revealed at or before ``last_seq``
    is no leak, also in what a view drew from it; one revealed after is."""
    card = HiddenCard("s1", 3, "P1", "Tc", None)
    state_topic = EVENTS.rsplit("/", 1)[0] + "/state"
    of_p1 = '"shoe_id": "s1", "hand": 3, "data": {"slot": "P1", "round": 3}'
    dealt = '{"seq": 7, "kind": "card_dealt", ' + of_p1 + "}"
    shown = '{"seq": 8, "kind": "card_revealed", ' + of_p1 + "}"

    def run(last_seq: int) -> list[str]:
        state = json.dumps({"last_seq": last_seq, "state": {"round": {"hand": 3, "cards": {"P1": "Tc"}}}})
        messages = [
            Captured(0, EVENTS, dealt.encode()),
            Captured(1, state_topic, state.encode()),
            Captured(1, "monitor", b"P1 Tc"),
            Captured(2, EVENTS, shown.encode()),
        ]
        return find_leaks(messages, [card], EVENTS)

    assert run(8) == []
    assert [leak.split(":")[0] for leak in run(7)] == [f"#1 {state_topic}", "#1 monitor"]
