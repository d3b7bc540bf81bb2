"""The monitor on a squeeze table: a slot dealt face down is drawn face down, with no total,
until its reveal; then its face shows."""

from __future__ import annotations

import json
import re

from daemon.mqtt.reveal_check import SCHEME, commitment
from daemon.service.table_text import FACE_DOWN, render
from daemon.service.table_view import TableView

TABLE, SHOE = "T9", "shoe-1"
DEALT = {"P1": "8s", "B1": "Kd", "P2": "Qh", "B2": "7c"}
NONCE = "0f" * 16


def _event(seq: int, kind: str, data: dict[str, object]) -> bytes:
    body = {"schema_version": 1, "event_id": f"id-{seq}", "seq": seq, "table_id": TABLE, "shoe_id": SHOE,
            "hand": 4, "kind": kind, "ts": 1000.0 + seq, "published_at": 1000.5 + seq, "source": "reader",
            "data": data}  # fmt: skip
    return json.dumps(body).encode()


def _digest(slot: str) -> str:
    return commitment(TABLE, SHOE, 4, slot, card=DEALT[slot], nonce=NONCE)


def _squeeze_round(view: TableView, reveal: tuple[str, ...]) -> None:
    topic = f"baccarat/v1/{TABLE}/events"
    seq = 1
    view.apply(topic, _event(seq, "round_opened", {"hand": 4, "bets": []}))
    for slot in DEALT:
        seq += 1
        data = {"slot": slot, "round": 4, "source": "reader", "commitment": _digest(slot), "scheme": SCHEME}
        view.apply(topic, _event(seq, "card_dealt", data))
    for slot in reveal:
        seq += 1
        by = {"source": "server", "actor": "gs", "command_id": f"r{seq}"}
        data = {"slot": slot, "round": 4, "card": DEALT[slot], "nonce": NONCE, "commitment": _digest(slot),
                "scheme": SCHEME, "revealed_by": by}  # fmt: skip
        view.apply(topic, _event(seq, "card_revealed", data))


def _faces(text: str) -> set[str]:
    """Every card face on a rendered screen (rank and suit symbol)."""
    return set(re.findall(r"(?:10|[2-9TJQKA])[♣♦♥♠]", text))


def test_face_down_slots_show_no_face_and_no_total_before_their_reveal() -> None:
    view = TableView(TABLE)
    _squeeze_round(view, reveal=())
    assert view.malformed == 0, view.last_problem
    assert view.round_cards == {}
    assert view.round_hidden == ["P1", "B1", "P2", "B2"]
    text = render(view, colour=False)
    assert _faces(text) == set()
    assert f"Player  {FACE_DOWN} {FACE_DOWN}" in text
    assert text.count("total ? (face down)") == 2
    assert view.cards_in_shoe == 4  # a card out of the shoe is visible, its face is not


def test_each_reveal_turns_its_slot_face_up_and_the_total_shows_once_a_side_is_open() -> None:
    view = TableView(TABLE)
    _squeeze_round(view, reveal=("P1", "P2", "B1"))
    text = render(view, colour=False)
    assert _faces(text) == {"8♠", "Q♥", "K♦"}
    assert "Player  8♠ Q♥" in text
    assert "total 8" in text  # the player's side is all open
    assert f"Banker  K♦ {FACE_DOWN}" in text
    assert "total ? (face down)" in text
    assert view.round_reveals["P1"] == {"card": "8s", "nonce": NONCE, "commitment": _digest("P1")}
    assert view.round_hidden == ["B2"]


def test_a_squeeze_retained_state_is_taken_by_the_schema_and_drawn_face_down() -> None:
    """The retained state of a squeeze round: null cards and the slots' commitments, valid by the
    contract's schema (the fleet view's parser too); drawn face down, no total."""
    from daemon.fleet.payloads import check
    from tests.fleet.synthetic import SyntheticTable

    body = json.loads(SyntheticTable(TABLE, shoe_id=SHOE, hand=4).state(1.0))
    cards: dict[str, str | None] = {"P1": "8s", "B1": None, "P2": None}
    body["state"]["round"] = {
        "hand": 4, "opened_at": 1.0, "cards": cards, "sources": dict.fromkeys(cards, "reader"),
        "holds": [], "awaiting_verdict": False, "super_round_die": None, "corrected": False,
        "player_total": None, "banker_total": None, "next_slot": "B2", "blocked_by": [],
        "commitments": {slot: _digest(slot) for slot in cards},
    }  # fmt: skip
    payload = json.dumps(body).encode()
    checked = check("state", TABLE, payload)
    assert checked.problem is None
    view = TableView(TABLE)
    view.apply(f"baccarat/v1/{TABLE}/state", payload)
    assert view.malformed == 0, view.last_problem
    assert (view.round_cards, view.round_hidden) == ({"P1": "8s"}, ["B1", "P2"])
    assert view.round_commitments == {slot: _digest(slot) for slot in cards}
    text = render(view, colour=False)
    assert _faces(text) == {"8♠"}
    assert f"Player  8♠ {FACE_DOWN}" in text
    assert f"Banker  {FACE_DOWN}" in text
