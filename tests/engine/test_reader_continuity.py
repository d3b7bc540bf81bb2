"""Reader continuity (issue 21): in either game flow, a reader that names no slot
(line, keyboard wedge) going away, coming back or reporting an error while a round is dealt holds
that round, naming it and why; an Angel Eye reader keeps its slot-based handling."""

from __future__ import annotations

from common.inputs import DeviceConnection, DeviceTarget, ReaderSignal, ReaderSignalKind
from daemon.engine.events import Event
from daemon.engine.table import Engine
from tests.engine.support import (
    alerts,
    assert_legal,
    assert_restores,
    bet,
    cmd,
    deal,
    engine,
    feed,
    of_kind,
    read,
    start_shoe,
    window,
)

NATURAL = ("8c", "2d", "Kh", "3s")


def _round_under_way(eng: Engine) -> list[Event]:
    out = start_shoe(eng)
    out += bet(eng, "1", 10)
    out += deal(eng, NATURAL[:2], 20)
    return out


def test_a_slotless_reader_unplugged_mid_round_holds_it() -> None:
    eng = window()
    out = _round_under_way(eng)
    out += feed(eng, [DeviceConnection(False, 22, detail="cable pulled")])
    out += feed(eng, [DeviceConnection(True, 26, detail="reopened")])
    (gap,) = alerts(out, "reader_gap")
    assert (gap.data["hand"], gap.data["holds"]) == (1, 1)
    assert gap.data["details"]["reason"] == "disconnected"
    assert gap.data["details"]["round_id"] == "1"
    assert gap.data["details"]["cards"] == {"P1": "8c", "B1": "2d"}
    # the dealer's P2/B2 went unseen; P3/B3 read now land in P2/B2: held, never settled silently
    out += deal(eng, ("Kh", "9d"), 27)
    assert not of_kind(out, "round_completed")
    (held,) = of_kind(out, "round_held")
    assert f"alert {gap.data['alert_id']}" in held.data["blocked_by"]
    assert_legal(out, 8)
    assert_restores(eng, out)


def test_a_reconnect_mid_round_holds_it_and_each_device_holds_a_round_once() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [DeviceConnection(False, 5, "reader", "gone")])  # between rounds: nothing held
    assert not alerts(out, "reader_gap")
    out += bet(eng, "1", 10)
    out += deal(eng, NATURAL[:2], 20, device="second")
    out += feed(eng, [DeviceConnection(True, 21, "reader", "back")])
    out += feed(
        eng, [DeviceConnection(False, 22, "reader", "gone"), DeviceConnection(True, 23, "reader", "back")]
    )
    out += feed(eng, [DeviceConnection(False, 24, "second", "gone")])
    gaps = alerts(out, "reader_gap")
    assert [(a.data["device"], a.data["details"]["reason"]) for a in gaps] == [
        ("reader", "reconnected"),
        ("second", "disconnected"),
    ]
    assert all(a.data["holds"] == 1 for a in gaps)


def test_a_slotless_reader_error_mid_round_holds_it() -> None:
    eng = window()
    out = _round_under_way(eng)
    out += feed(eng, [ReaderSignal(ReaderSignalKind.ERROR_RAISED, 22, code=7, device="reader")])
    (gap,) = alerts(out, "reader_gap")
    assert gap.data["details"]["reason"] == "error"
    assert gap.data["holds"] == 1


def test_an_angel_eye_reader_keeps_its_slot_based_handling() -> None:
    eng = window()
    out = start_shoe(eng)
    out += bet(eng, "1", 10)
    out += feed(
        eng,
        [
            read("8c", 20, target=DeviceTarget.P1, transmission_id="1"),
            read("2d", 21, target=DeviceTarget.B1, transmission_id="2"),
        ],
    )
    out += feed(eng, [DeviceConnection(False, 22, detail="gone"), DeviceConnection(True, 23, detail="back")])
    assert not alerts(out, "reader_gap")


def test_continuity_between_rounds_holds_nothing() -> None:
    eng = window()
    out = start_shoe(eng)
    out += feed(eng, [DeviceConnection(False, 5, detail="gone"), DeviceConnection(True, 6, detail="back")])
    plain = engine()
    out2 = start_shoe(plain)
    out2 += feed(plain, [DeviceConnection(False, 7, detail="gone"), DeviceConnection(True, 8, detail="back")])
    assert not alerts(out, "reader_gap")
    assert not alerts(out2, "reader_gap")
    assert not of_kind(out2, "round_held")


def test_a_cards_only_table_holds_a_round_its_slotless_reader_lost_continuity_in() -> None:
    """``cards_only`` as ``betting_window``: P1/B1 read, the reader out while P2/B2 are dealt, P3/B3
    read after it is back would sit in P2/B2: the round is held, never settled silently."""
    plain = engine()
    out = start_shoe(plain)
    out += deal(plain, NATURAL[:2], 20)
    out += feed(plain, [DeviceConnection(False, 22, detail="cable pulled")])
    out += feed(plain, [DeviceConnection(True, 26, detail="reopened")])
    (gap,) = alerts(out, "reader_gap")
    assert (gap.data["hand"], gap.data["holds"]) == (1, 1)
    assert gap.data["details"] == {
        "reason": "disconnected",
        "round_id": None,
        "cards": {"P1": "8c", "B1": "2d"},
        "detail": "cable pulled",
    }
    out += deal(plain, ("Kh", "9d"), 27)
    assert not of_kind(out, "round_completed")
    (held,) = of_kind(out, "round_held")
    assert f"alert {gap.data['alert_id']}" in held.data["blocked_by"]
    # the supervisor puts the round's physical cards in place and it completes with them
    physical = {"P1": "8c", "B1": "2d", "P2": "5h", "B2": "4c", "P3": "Kh"}
    out += feed(plain, [cmd("rearrange", 40, "fix", hand=1, cards=physical)])
    out += feed(plain, [cmd("resolve_hold", 41, "ok", hand=1)])
    (done,) = of_kind(out, "round_completed")
    assert done.data["cards"] == physical
    assert_legal(out, 8)
    assert_restores(plain, out)


def test_a_cards_only_reader_error_mid_round_holds_it_an_angel_eye_one_does_not() -> None:
    plain = engine()
    out = start_shoe(plain)
    out += deal(plain, NATURAL[:2], 20)
    out += feed(plain, [ReaderSignal(ReaderSignalKind.ERROR_RAISED, 22, code=7, device="reader")])
    (gap,) = alerts(out, "reader_gap")
    assert (gap.data["details"]["reason"], gap.data["holds"]) == ("error", 1)
    eye = engine()
    out2 = start_shoe(eye)
    out2 += feed(
        eye,
        [
            read("8c", 20, target=DeviceTarget.P1, transmission_id="1"),
            read("2d", 21, target=DeviceTarget.B1, transmission_id="2"),
            DeviceConnection(False, 22, detail="gone"),
            DeviceConnection(True, 23, detail="back"),
        ],
    )
    assert not alerts(out2, "reader_gap")
    assert alerts(out2, "reader_disconnected")
