"""Squeeze tables: commitments at the deal, cards only at their reveal, and the mistakes under
squeeze (README.md, "Squeeze tables")."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from common.inputs import (
    CardRead,
    DeviceTarget,
    ReadFailed,
    RevealSignal,
    ShoeVerdict,
    Source,
    VerdictOutcome,
)
from daemon.engine.checkpoint import capture
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.squeeze import SEALED, public_data
from daemon.engine.table import Engine
from tests.engine.support import (
    alerts,
    assert_engine_alert_as_catalogued,
    assert_restores,
    cmd,
    feed,
    kinds,
    of_kind,
    read,
    roundtrip,
    variant,
)

TABLE = "T01"
CARD = re.compile(r'"[2-9TJQKA][cdhs]"')
"""A card code as a JSON string (a commitment's hex may contain ``2c``, never with quotes)."""


def squeeze(**reveal: Any) -> Engine:
    settings = TableSettings.model_validate({"reveal": {"mode": "squeeze", **reveal}})
    return Engine(settings, variant(), table_id=TABLE)


class Nonces:
    """Seeded nonces, as the fixtures pass them (the service draws them from the OS)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return hashlib.sha256(f"test-nonce-{self.n}".encode()).hexdigest()[:32]


def deal(eng: Engine, nonce: Nonces, cards: list[str], at: float) -> list[Event]:
    return feed(eng, [read(c, at + k, nonce=nonce()) for k, c in enumerate(cards)])


def start(eng: Engine, nonce: Nonces) -> list[Event]:
    out = feed(eng, [cmd("new_shoe", 0, "new", shoe_id="S1")])
    return out + deal(eng, nonce, ["2c", "Kd", "Kh"], 1)


def published(events: list[Event]) -> list[str]:
    """Each event as its data would leave the table (the journal's projection)."""
    return [json.dumps({**e.to_dict(), "data": public_data(e.data)}) for e in events]


def assert_no_card_published(events: list[Event]) -> None:
    """No published event names a card, but the indicator and revealed cards (and completed rounds)."""
    for event, text in zip(events, published(events), strict=True):
        if event.kind in ("card_revealed", "round_completed") or event.data.get("slot") == "indicator":
            continue
        assert CARD.search(text) is None or _only_revealed(event), text


def _only_revealed(event: Event) -> bool:
    shown = public_data(event.data).get("cards")
    return isinstance(shown, dict) and all(v is None or isinstance(v, str) for v in shown.values())


def expected_commitment(shoe: str, hand: int, slot: str, card: str, nonce: str) -> str:
    text = f"baccarat-edge card commitment v1\n{TABLE}\n{shoe}\n{hand}\n{slot}\n{card}\n{nonce}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_each_card_is_published_as_a_commitment_and_shown_at_its_reveal() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh", "9c"], 10)  # P 8, B 9: naturals, no third card
    dealt = [e for e in of_kind(out, "card_dealt") if e.data["slot"] in ("P1", "B1", "P2", "B2")]
    assert [sorted(public_data(e.data)) for e in dealt] == [
        ["commitment", "round", "scheme", "slot", "source"]
    ] * 4
    for event, card in zip(dealt, ["8s", "Td", "Qh", "9c"], strict=True):
        sealed = event.data[SEALED]
        assert sealed["card"] == card
        assert event.data["commitment"] == expected_commitment(
            "S1", 1, event.data["slot"], card, sealed["nonce"]
        )
    assert "round_completed" not in kinds(out)  # decided on the hidden cards, told at the reveal
    assert eng.snapshot()["round"]["cards"] == {"P1": None, "B1": None, "P2": None, "B2": None}
    assert eng.snapshot()["round"]["player_total"] is None
    assert eng.snapshot()["round"]["next_slot"] is None
    out += feed(eng, [cmd("reveal", 20, "r1", slots=["P1", "P2"])])
    assert eng.snapshot()["round"]["cards"] == {"P1": "8s", "B1": None, "P2": "Qh", "B2": None}
    out += feed(eng, [cmd("reveal", 21, "r2", slots=["B1", "B2"])])
    revealed = of_kind(out, "card_revealed")
    assert [(e.data["slot"], e.data["card"]) for e in revealed] == [
        ("P1", "8s"),
        ("P2", "Qh"),
        ("B1", "Td"),
        ("B2", "9c"),
    ]
    by_slot = {e.data["slot"]: e.data["commitment"] for e in dealt}
    for e in revealed:  # what a server checks: the reveal against the deal's commitment
        d = e.data
        assert (
            expected_commitment(e.shoe_id or "", d["round"], d["slot"], d["card"], d["nonce"])
            == by_slot[d["slot"]]
        )
        assert d["revealed_by"] == {
            "source": "server",
            "actor": "floor-1",
            "command_id": e.data["revealed_by"]["command_id"],
        }
    completed = of_kind(out, "round_completed")
    assert len(completed) == 1
    assert completed[0].data["outcome"]["winner"] == "banker"
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_a_third_card_is_dealt_face_down_and_the_round_waits_for_its_reveal() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["2s", "3d", "Ah", "4c"], 10)  # P 3, B 7: the Player draws
    out += deal(eng, nonce, ["5h"], 20)
    third = of_kind(out, "card_dealt")[-1]
    assert public_data(third.data)["slot"] == "P3"
    assert "card" not in public_data(third.data)
    out += feed(eng, [cmd("reveal", 30, "r1", slots=["P1", "P2", "B1", "B2"])])
    assert "round_completed" not in kinds(out)
    out += feed(eng, [cmd("reveal", 31, "r2", slots=["P3"])])
    assert kinds(out)[-2:] == ["round_completed", "bets_offered"]
    assert_no_card_published(out)
    assert_restores(eng, out)


@pytest.mark.parametrize(
    ("slots", "reason"),
    [
        (["B1"], "out_of_order"),
        (["P3"], "not_dealt"),
        (["P1", "P1"], None),  # an argument error: no alert
    ],
)
def test_a_reveal_out_of_order_or_of_a_slot_not_dealt_is_refused(
    slots: list[str], reason: str | None
) -> None:
    eng, nonce = squeeze(), Nonces()
    start(eng, nonce)
    deal(eng, nonce, ["8s", "Td", "Qh", "9c"], 10)
    out = feed(eng, [cmd("reveal", 20, "r1", slots=slots)])
    assert kinds(out)[0] == "command_refused"
    assert "card_revealed" not in kinds(out)
    raised = alerts(out, "reveal_refused")
    assert [a.data["details"]["reason"] for a in raised] == ([] if reason is None else [reason])
    for a in raised:
        assert_engine_alert_as_catalogued(a.data)


def test_a_slot_revealed_twice_is_refused() -> None:
    eng, nonce = squeeze(), Nonces()
    start(eng, nonce)
    deal(eng, nonce, ["8s", "Td"], 10)
    feed(eng, [cmd("reveal", 20, "r1", slots=["P1"])])
    out = feed(eng, [cmd("reveal", 21, "r2", slots=["P1"])])
    assert [a.data["details"]["reason"] for a in alerts(out, "reveal_refused")] == ["already_revealed"]


def test_an_unneeded_card_before_the_reveal_is_refused_and_holds_the_round() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh", "9c", "3c"], 10)  # 3c: the round needs no card
    refused = of_kind(out, "card_refused")
    assert len(refused) == 1
    assert public_data(refused[0].data)["reason"] == "awaiting_reveal"
    assert refused[0].data[SEALED]["card"] == "3c"
    (raised,) = alerts(out, "card_before_reveal")
    assert raised.data["holds"] == 1
    assert "card" not in public_data(raised.data)["details"]
    assert eng.state.counts["3c"] == 1  # it left the shoe
    out += feed(eng, [cmd("reveal", 20, "r1", slots=["P1", "P2", "B1", "B2"])])
    assert "round_held" in kinds(out)
    assert "round_completed" not in kinds(out)
    out += feed(eng, [cmd("resolve_hold", 30, "h1")])
    assert "round_completed" in kinds(out)
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_a_misread_waits_for_its_rescan_which_is_sealed_too() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s"], 10)
    out += feed(eng, [ReadFailed(11.0, raw="?? 8s")])
    assert alerts(out, "rescan_needed")
    out += deal(eng, nonce, ["Td", "Qh", "9c"], 12)
    assert [e.data["slot"] for e in of_kind(out, "card_dealt")][-3:] == ["B1", "P2", "B2"]
    assert_no_card_published(out)
    assert "8s" not in "".join(published(out))  # the failed read's raw bytes are sealed too
    assert_restores(eng, out)


def test_a_card_drawn_while_betting_is_open_is_exposed_with_its_face_sealed() -> None:
    eng = Engine(
        TableSettings.model_validate({"reveal": {"mode": "squeeze"}, "game_flow": "betting_window"}),
        variant(),
        table_id=TABLE,
    )
    nonce = Nonces()
    out = start(eng, nonce)
    out += feed(eng, [cmd("open_betting", 10, "o1", round_id="7")])
    out += deal(eng, nonce, ["5d"], 11)
    assert alerts(out, "card_exposed_during_betting")
    assert of_kind(out, "card_outside_game")
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_a_round_voided_before_its_reveal_seals_its_cards_for_the_auditors() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh"], 10)
    out += feed(eng, [cmd("reveal", 15, "r1", slots=["P1"])])
    out += feed(eng, [cmd("void_round", 20, "v1", reason="card exposed")])
    (voided,) = of_kind(out, "round_voided")
    assert public_data(voided.data)["cards"] == {"P1": "8s", "B1": None, "P2": None}
    audit = voided.data[SEALED]["audit"]
    assert sorted(audit) == ["B1", "P2"]
    assert audit["B1"]["card"] == "Td"
    assert audit["B1"]["commitment"] == expected_commitment("S1", 1, "B1", "Td", audit["B1"]["nonce"])
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_a_restart_mid_squeeze_restores_the_sealed_cards_and_the_reveals_go_on() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["2s", "3d", "Ah", "4c"], 10)
    out += feed(eng, [cmd("reveal", 20, "r1", slots=["P1", "P2"])])
    restored = Engine.restore(eng.configured_settings, eng.configured_variant, roundtrip(out), table_id=TABLE)
    assert restored.state.comparable() == eng.state.comparable()
    later = deal(restored, nonce, ["5h"], 30)
    later += feed(restored, [cmd("reveal", 31, "r2", slots=["B1", "B2", "P3"])])
    assert [e.data["card"] for e in of_kind(later, "card_revealed")] == ["3d", "4c", "5h"]
    assert "round_completed" in kinds(later)
    assert_no_card_published(out + later)


def test_a_button_reveals_the_next_slot_in_the_configured_order_and_a_server_reveal_is_refused() -> None:
    eng, nonce = squeeze(order_source="button", order=["B1", "B2", "P1", "P2", "B3", "P3"]), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh", "9c"], 10)
    out += feed(eng, [cmd("reveal", 15, "r1", slots=["B1"])])
    assert [a.data["details"]["reason"] for a in alerts(out, "reveal_refused")] == ["wrong_source"]
    out += feed(eng, [RevealSignal(20.0 + k, "button", device="button") for k in range(4)])
    assert [e.data["slot"] for e in of_kind(out, "card_revealed")] == ["B1", "B2", "P1", "P2"]
    assert "round_completed" in kinds(out)
    out += feed(eng, [RevealSignal(30.0, "button", device="button")])
    assert [a.data["details"]["reason"] for a in alerts(out, "reveal_refused")][-1] == "no_round"
    assert_restores(eng, out)


def test_commands_that_would_place_a_card_without_a_nonce_and_reads_without_one_are_refused() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += feed(eng, [read("8s", 10)])  # no nonce: the service always gives one
    assert alerts(out, "invalid_input")
    out += feed(eng, [cmd("assign_card", 11, "a1", card="8s")])
    assert kinds(out)[-1] == "command_refused"
    assert "nonce" in out[-1].data["reason"]
    assert "card_dealt" not in kinds(out[-3:])


def test_a_reveal_on_an_open_table_is_refused() -> None:
    eng = Engine(TableSettings(), variant())
    out = feed(eng, [cmd("new_shoe", 0, "n", shoe_id="S1"), cmd("reveal", 1, "r", slots=["P1"])])
    assert [a.data["details"]["reason"] for a in alerts(out, "reveal_refused")] == ["not_squeeze"]


def test_reveal_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="exactly once"):
        TableSettings.model_validate({"reveal": {"order": ["P1", "P1", "B1", "B2", "P3", "B3"]}})
    with pytest.raises(ValueError, match="after the four opening slots"):
        TableSettings.model_validate({"reveal": {"order": ["P1", "P3", "B1", "B2", "P2", "B3"]}})
    with pytest.raises(ValueError, match="mode"):
        TableSettings.model_validate({"reveal": {"mode": "peek"}})


def test_the_camera_path_fills_a_misread_with_a_sealed_commitment_and_cross_checks_sealed() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)

    def camera(code: str, at: float, slot: str) -> CardRead:
        return read(
            code,
            at,
            source=Source.CAMERA,
            device="camera",
            target=DeviceTarget(slot),
            confidence=0.99,
            nonce=nonce(),
        )

    out += deal(eng, nonce, ["8s"], 10)
    out += feed(eng, [camera("7h", 10.5, "P1")])  # disagrees with the reader: an alert, sealed
    assert alerts(out, "camera_disagreement")
    out += feed(eng, [ReadFailed(11.0)])
    out += feed(eng, [camera("Td", 11.5, "B1")])  # fills the misread
    filled = of_kind(out, "card_dealt")[-1]
    assert public_data(filled.data)["fills_rescan"] is True
    assert filled.data["commitment"] == expected_commitment("S1", 1, "B1", "Td", filled.data[SEALED]["nonce"])
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_the_shoes_verdict_before_the_reveal_is_checked_sealed_and_holds_nothing() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh", "9c"], 10)  # the Banker wins 9 to 8
    out += feed(eng, [ShoeVerdict(VerdictOutcome.BANKER, False, False, 14.0, raw="G B")])
    (checked,) = of_kind(out, "verdict_checked")
    assert public_data(checked.data) == {"hand": 1, "agrees": True}  # the verdict itself sealed
    assert not alerts(out, "missing_card")
    out += feed(eng, [ShoeVerdict(VerdictOutcome.PLAYER, False, False, 14.5, raw="G P")])
    (disagreement,) = alerts(out, "verdict_disagreement")
    assert "engine" not in public_data(disagreement.data)["details"]
    assert "verdict" not in public_data(disagreement.data)["details"]
    out += feed(eng, [cmd("reveal", 20, "r1", slots=["P1", "P2", "B1", "B2"])])
    assert "round_held" in kinds(out)  # the disagreement holds it, named
    assert_no_card_published(out)
    assert_restores(eng, out)


def test_a_checkpoint_mid_squeeze_keeps_the_sealed_cards_and_nonces() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td", "Qh", "9c"], 10)
    out += feed(eng, [cmd("reveal", 20, "r1", slots=["P1"])])
    checkpoint = capture(eng, out[-1].at)
    restored = Engine.restore(
        eng.configured_settings, eng.configured_variant, [], start=checkpoint, table_id=TABLE
    )
    assert restored.state.comparable() == eng.state.comparable()
    later = feed(restored, [cmd("reveal", 30, "r2", slots=["P2", "B1", "B2"])])
    assert [e.data["card"] for e in of_kind(later, "card_revealed")] == ["Qh", "Td", "9c"]
    assert "round_completed" in kinds(later)


def test_a_pull_held_and_released_keeps_each_cards_nonce() -> None:
    eng, nonce = squeeze(), Nonces()
    out = start(eng, nonce)
    out += deal(eng, nonce, ["8s", "Td"], 10)
    # P2 and B2 pulled together, the lower card reported first: it waits for the one above it
    out += feed(
        eng, [read("9c", 12.0, position=2, nonce=nonce()), read("Qh", 12.1, position=1, nonce=nonce())]
    )
    out += feed(eng, [cmd("reveal", 13, "r1", slots=["P1", "P2", "B1", "B2"])])  # after a held read
    assert of_kind(out, "read_held")
    dealt = {e.data["slot"]: e for e in of_kind(out, "card_dealt") if e.data.get("round") == 1}
    assert [dealt[s].data[SEALED]["card"] for s in ("P2", "B2")] == ["Qh", "9c"]
    for slot, event in dealt.items():
        sealed = event.data[SEALED]
        assert event.data["commitment"] == expected_commitment("S1", 1, slot, sealed["card"], sealed["nonce"])
    assert "round_completed" in kinds(out)
    assert_no_card_published(out)
    assert_restores(eng, out)
