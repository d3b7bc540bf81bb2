"""The floor and table models fed anything a broker may deliver: never an exception, what is
wrong counted, hostile strings kept as data (the page renders them as text)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from daemon.alerts import AlertCode
from daemon.console.floor import MAX_TABLES, Floor
from tests.fleet.synthetic import SyntheticTable

EVIL = "<img src=x onerror=alert(1)>"


def _status(table: str, status: str) -> bytes:
    return SyntheticTable(table, online=status == "online").status(1.0)


def _event(kind: str, data: object, seq: int, hand: int | None = None) -> bytes:
    return json.dumps({"event_id": f"e{seq}", "seq": seq, "kind": kind, "data": data, "hand": hand,
                       "shoe_id": "s1", "ts": 1.0}).encode()  # fmt: skip


def test_a_round_holds_and_clears_through_events() -> None:
    floor = Floor()
    base = "baccarat/v1/T1/"
    floor.apply(base + "status", _status("T1", "online"))
    floor.apply(base + "events", _event("shoe_started", {"shoe_id": "s1", "decks": 8}, 1))
    floor.apply(base + "events", _event("round_opened", {"hand": 1}, 2, 1))
    for seq, (slot, card) in enumerate([("P1", "2s"), ("B1", "3h"), ("P2", "3s"), ("B2", "2d")], start=3):
        floor.apply(base + "events", _event("card_dealt", {"slot": slot, "card": card, "round": 1}, seq, 1))
    model = floor.table_model("T1")
    assert model is not None
    assert model["round"]["next_slot"] == "P3"
    assert model["round"]["next_text"] == "Player draws"
    assert (model["round"]["player_total"], model["round"]["banker_total"]) == (5, 5)
    alert = {"alert_id": "a1", "code": AlertCode.UNNEEDED_CARD.value, "message": EVIL, "hand": 1, "holds": 1}
    floor.apply(base + "events", _event("alert_raised", alert, 7, 1))
    floor.apply(
        base + "events", _event("round_held", {"hand": 1, "cards": {}, "blocked_by": ["alert a1"]}, 8, 1)
    )
    row = floor.floor_model()["tables"][0]
    assert (row["severity"], row["open_alerts"], row["held_rounds"]) == (2, 1, 1)
    assert floor.table_model("T1")["alerts"][0]["message"] == EVIL  # type: ignore[index]
    accepted = {"command_id": "c1", "action": "resolve_hold", "actor": "supervisor:sup-anna", "reason": None}
    floor.apply(base + "events", _event("command_accepted", accepted, 9))
    floor.apply(base + "events", _event("alert_cleared", {"alert_id": "a1"}, 10, 1))
    floor.apply(base + "events", _event("hold_resolved", {"hand": 1}, 11, 1))
    model = floor.table_model("T1")
    assert model is not None
    assert (model["alerts"], model["holds"]) == ([], [])
    assert model["history"][0]["actor"] == "supervisor:sup-anna"
    assert floor.floor_model()["tables"][0]["severity"] == 0


def test_the_floor_orders_worst_first_and_flags_ids_outside_the_contract() -> None:
    floor = Floor()
    floor.apply("baccarat/v1/A/status", _status("A", "online"))
    floor.apply("baccarat/v1/B/status", _status("B", "offline"))
    floor.apply("baccarat/v1/C/health", SyntheticTable("C", backlog=12).health(1.0))
    floor.apply("baccarat/v1/C/status", _status("C", "online"))
    floor.apply(f"baccarat/v1/{EVIL}/status", _status(EVIL, "online"))
    floor.apply("baccarat/v1/A/health", b'{"queue_depth": 99}')  # not valid by the schema: unused
    rows = floor.floor_model()["tables"]
    assert [(r["table_id"], r["severity"]) for r in rows] == [("B", 3), ("C", 1), (EVIL, 0), ("A", 0)]
    assert [r["valid_id"] for r in rows] == [True, True, False, True]
    assert floor.table_model("A")["stream"]["malformed"] == 1  # type: ignore[index]


def test_only_configured_tables_and_known_topics_are_kept() -> None:
    floor = Floor(only=["T1"])
    floor.apply("baccarat/v1/T2/status", b'{"status": "online"}')
    floor.apply("baccarat/v1/T1/cmd", b"{}")
    floor.apply("elsewhere/T1/status", b"{}")
    assert floor.floor_model() == {"tables": [], "refused_unknown": 0}
    assert floor.ignored == 3
    capped = Floor()
    for n in range(MAX_TABLES + 5):
        capped.apply(f"baccarat/v1/t{n}/status", b"online")
    assert len(capped.floor_model()["tables"]) == MAX_TABLES


@given(
    suffix=st.sampled_from(["status", "health", "state", "events"]),
    payload=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(
                    [
                        "card_dealt",
                        "round_completed",
                        "alert_raised",
                        "round_held",
                        "hold_resolved",
                        "command_accepted",
                        "round_voided",
                        "shoe_started",
                    ]
                ),
                "data": st.dictionaries(
                    st.sampled_from(
                        [
                            "hand",
                            "slot",
                            "card",
                            "round",
                            "outcome",
                            "cards",
                            "alert_id",
                            "holds",
                            "actor",
                            "blocked_by",
                        ]
                    ),
                    st.none() | st.integers() | st.text(max_size=5) | st.lists(st.integers()),
                ),
                "seq": st.integers(),
                "event_id": st.text(max_size=4),
            }
        ).map(lambda v: json.dumps(v).encode()),
    ),
)
def test_any_payload_leaves_a_model_that_renders(suffix: str, payload: bytes) -> None:
    floor = Floor()
    floor.apply(f"baccarat/v1/T1/{suffix}", payload)
    json.dumps(floor.floor_model())
    json.dumps(floor.table_model("T1"))


def test_a_huge_hand_number_costs_no_memory() -> None:
    """Found when the suite was OOM-killed: a state naming hand 10**12 made the table model
    build a list with one entry per hand number."""
    floor = Floor()
    floor.apply("baccarat/v1/T1/state", json.dumps({"state": {"hand": 10**12}}).encode())
    model = floor.table_model("T1")
    assert model is not None
    assert model["shoe"]["player_pairs"] == 0
    json.dumps(model)


def test_a_model_is_built_once_per_change_and_shared_by_every_stream() -> None:
    """The floor rebuilt every table's line (roads included) under the lock the MQTT thread
    takes for every message; now a line or model is rebuilt only after its table changed."""
    floor = Floor()
    for table in ("T1", "T2"):
        floor.apply(f"baccarat/v1/{table}/status", _status(table, "online"))
        floor.apply(f"baccarat/v1/{table}/events", _event("round_opened", {"hand": 1}, 1, 1))
    first_rows = {r["table_id"]: r for r in floor.floor_model()["tables"]}
    model = floor.table_model("T1")
    assert floor.table_model("T1") is model  # nothing changed: the same build for a second stream
    card = _event("card_dealt", {"slot": "P1", "card": "9s", "round": 1}, 2, 1)
    floor.apply("baccarat/v1/T1/events", card)
    rows = {r["table_id"]: r for r in floor.floor_model()["tables"]}
    assert rows["T2"] is first_rows["T2"]  # unchanged table: its line is not rebuilt
    assert rows["T1"] is not first_rows["T1"]
    fresh = floor.table_model("T1")
    assert fresh is not None
    assert fresh["round"]["cards"] == {"P1": "9s"}  # the card is in the model at once
    assert model is not None
    assert model["round"]["cards"] == {}  # a model already handed out is never changed
