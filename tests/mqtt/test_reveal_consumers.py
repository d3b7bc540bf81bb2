"""The reference consumers check a squeeze table's reveals: ``EventConsumer``, ``OrderedConsumer``
and ``baccarat-edge tail`` (a subprocess, a real mosquitto, the real publisher) name a reveal that
does not match the commitment made at the deal, and exit 1 for it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.journal import Journal
from daemon.journal.records import DeliveryEvent
from daemon.mqtt.checkpoint import Checkpoint
from daemon.mqtt.consumer import EventConsumer, Verdict
from daemon.mqtt.ordered_consumer import OrderedConsumer
from daemon.mqtt.publisher import Publisher
from daemon.mqtt.reveal_check import SCHEME, RevealProblem, RevealStatus, RevealVerdict, commitment
from tests.mqtt.conftest import TABLE, make_settings
from tests.mqtt.test_ordered_consumer import KEY, envelope
from tests.mqtt.test_tail import start_tail
from tests.support.broker import MosquittoBroker

NONCE_A, NONCE_B = "a" * 32, "b" * 32


def _squeeze_data(table: str, shoe: str) -> list[tuple[str, dict[str, Any]]]:
    """Round 1: P1 (8s) is revealed as dealt; B1 (Kd) is revealed as a 9 of hearts."""
    p1 = commitment(table, shoe, 1, "P1", card="8s", nonce=NONCE_A)
    b1 = commitment(table, shoe, 1, "B1", card="Kd", nonce=NONCE_B)
    by = {"source": "server", "actor": "game_server", "command_id": "r1"}
    return [
        ("round_opened", {"hand": 1, "bets": []}),
        ("card_dealt", {"slot": "P1", "round": 1, "source": "reader", "commitment": p1, "scheme": SCHEME}),
        ("card_dealt", {"slot": "B1", "round": 1, "source": "reader", "commitment": b1, "scheme": SCHEME}),
        ("card_revealed", {"slot": "P1", "round": 1, "card": "8s", "nonce": NONCE_A, "commitment": p1,
                           "scheme": SCHEME, "revealed_by": by}),
        ("card_revealed", {"slot": "B1", "round": 1, "card": "9h", "nonce": NONCE_B, "commitment": b1,
                           "scheme": SCHEME, "revealed_by": by}),
    ]  # fmt: skip


def test_the_event_consumer_names_the_reveal_that_is_not_the_card_dealt() -> None:
    consumer = EventConsumer("T1", key=KEY)
    verdicts = []
    for seq, (kind, data) in enumerate(_squeeze_data("T1", "S1"), start=1):
        received = consumer.feed(envelope(seq, kind=kind, data=data))
        assert received.verdict is Verdict.NEW
        verdicts.append(received.reveal)
    assert verdicts[:3] == [None, None, None]
    assert verdicts[3] is not None
    assert verdicts[3].status is RevealStatus.VERIFIED
    assert verdicts[4] is not None
    assert verdicts[4].problem is RevealProblem.MISMATCH
    assert consumer.stats.reveal_problems == 1


def test_the_ordered_consumer_checks_reveals_in_seq_order_whatever_the_arrival(tmp_path: Path) -> None:
    consumer = OrderedConsumer("T1", Checkpoint(tmp_path / "c.sqlite3", "T1"), KEY)
    stream = [envelope(seq, kind=k, data=d) for seq, (k, d) in enumerate(_squeeze_data("T1", "S1"), start=1)]
    reveals: list[RevealVerdict] = []
    for env in reversed(stream):  # the reveals arrive before their deals: held until in order
        reveals.extend(consumer.feed(env, now=0.0).reveals)
    assert [(v.slot, v.status) for v in reveals] == [
        ("P1", RevealStatus.VERIFIED),
        ("B1", RevealStatus.FAILED),
    ]
    assert reveals[1].problem is RevealProblem.MISMATCH
    assert consumer.reveal_problems == [f"table T1: {reveals[1].describe()}"]
    assert "reveal_mismatch: shoe S1 round 1 slot B1: card 9h" in consumer.reveal_problems[0]
    consumer.checkpoint.close()


@pytest.mark.mosquitto
def test_tail_says_each_reveal_and_exits_1_on_a_mismatch(
    mosquitto: MosquittoBroker,
    keys: dict[str, Path],
    journal: Journal,
    make_publisher: Callable[..., Publisher],
) -> None:
    tail = start_tail(mosquitto.port, keys, "--count", "5", "--timeout", "60")
    events = [
        DeliveryEvent(kind=kind, at=1_764_400_000.0 + n, data=data, shoe_id="S1", hand=1, source="reader")
        for n, (kind, data) in enumerate(_squeeze_data(TABLE, "S1"))
    ]
    journal.append([], events)
    make_publisher(make_settings(mosquitto.port, keys), TABLE, journal)
    out, err = tail.communicate(timeout=60)
    assert len(out.splitlines()) == 5
    assert "REVEAL VERIFIED: shoe S1 round 1 slot P1: verified" in err
    assert "REVEAL PROBLEM reveal_mismatch: shoe S1 round 1 slot B1: card 9h" in err
    assert "reveals: 1 verified, 0 unchecked, 1 failed" in err
    assert tail.returncode == 1, err


def test_consume_reports_a_failed_reveal_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``consume``'s closing report (its shard member's consumers as the test left them)."""
    from types import SimpleNamespace

    from daemon.commands.consume import _report

    consumer = OrderedConsumer("T1", Checkpoint(tmp_path / "c.sqlite3", "T1"), KEY)
    for seq, (kind, data) in enumerate(_squeeze_data("T1", "S1"), start=1):
        consumer.feed(envelope(seq, kind=kind, data=data), now=0.0)
    member = SimpleNamespace(consumers={"T1": consumer}, failure=None)
    assert _report(member, SimpleNamespace(handed=5, repeats=0)) == 1
    err = capsys.readouterr().err
    assert "consume: table T1: reveal_mismatch: shoe S1 round 1 slot B1: card 9h" in err
    assert "1 reveals failed their commitment" in err
    consumer.checkpoint.close()
