"""The event chain on real journal files: every event carries the hash of the one below it and
its own, across epochs; ``journal verify`` recomputes them and names the first row whose
chain breaks, for one flipped byte anywhere in a chained row."""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.journal import DeliveryEvent, Journal, JournalSettings, verify_journal
from daemon.journal.chain import envelope_members, event_hash, genesis
from daemon.mqtt.canonical import canonical_json
from daemon.mqtt.envelope import event_envelope, event_payload
from daemon.mqtt.secrets import Secret

TABLE = "T1"
HASHED_COLUMNS = ("event_id", "kind", "shoe_id", "source", "body", "epoch", "prev_hash", "hash")


def card(n: int) -> DeliveryEvent:
    return DeliveryEvent(
        kind="card_dealt",
        at=1764400000.0 + n / 8,
        data={"card": "8s", "n": n, "w": 0.5},
        shoe_id="S1",
        hand=n,
    )


def journal_with_epochs(path: Path) -> Journal:
    """Twelve events over three epochs (two restarts); the journal left open."""
    for first in (1, 5):
        journal = Journal(JournalSettings(path=path), TABLE)
        journal.append([], [card(n) for n in range(first, first + 4)])
        journal.close()
    journal = Journal(JournalSettings(path=path), TABLE)
    journal.append([], [card(n) for n in range(9, 13)])
    return journal


def test_every_event_chains_to_the_one_below_across_epochs(tmp_path: Path) -> None:
    journal = journal_with_epochs(tmp_path / "j.sqlite3")
    events = list(journal.events(origin=None))
    assert [e.seq for e in events] == list(range(1, 13))
    assert (
        events[0].prev_hash
        == genesis(TABLE)
        == hashlib.sha256(b"baccarat-edge event chain genesis\nT1").hexdigest()
    )
    for below, above in itertools.pairwise(events):
        assert above.prev_hash == below.hash
    assert len({e.epoch for e in events}) == 3  # a fresh epoch at every open
    journal.close()
    report = verify_journal(tmp_path / "j.sqlite3")
    assert report.ok, report.problems
    assert (report.chain_checked, report.chain_break_seq) == (12, None)


def test_a_server_recomputes_the_hash_from_the_wire(tmp_path: Path) -> None:
    journal = journal_with_epochs(tmp_path / "j.sqlite3")
    key = Secret(b"the events key of table T1, long", "test")
    for event in journal.events(origin=None):
        wire = json.loads(event_payload(event, TABLE, 1.0, key))
        assert wire == event_envelope(event, TABLE, 1.0, key)
        unhashed = {k: v for k, v in wire.items() if k not in ("hash", "published_at", "sig")}
        assert hashlib.sha256(canonical_json(unhashed)).hexdigest() == wire["hash"] == event.hash
        assert (wire["epoch"], wire["prev_hash"]) == (event.epoch, event.prev_hash)
    journal.close()


def test_the_hash_covers_every_member() -> None:
    members = envelope_members(
        event_id="e",
        seq=1,
        table_id=TABLE,
        shoe_id=None,
        hand=None,
        kind="k",
        ts=1.0,
        source="s",
        data={"a": 1},
    )
    base = event_hash(members, "epoch", "prev")
    for name in members:
        altered = {**members, name: "other" if members[name] != "other" else "x"}
        assert event_hash(altered, "epoch", "prev") != base, name
    assert event_hash(members, "epoch2", "prev") != base
    assert event_hash(members, "epoch", "prev2") != base


def _flip(path: Path, seq: int, column: str, offset: int) -> None:
    """Flip one character of a stored value to another printable one."""
    db = sqlite3.connect(path)
    try:
        (value,) = db.execute(f"SELECT {column} FROM events WHERE seq = ?", (seq,)).fetchone()  # noqa: S608
        text = str(value)
        i = offset % len(text)
        flipped = "0" if text[i] != "0" else "1"
        with db:
            sql = f"UPDATE events SET {column} = ? WHERE seq = ?"  # noqa: S608 - a column name of this test's
            db.execute(sql, (text[:i] + flipped + text[i + 1 :], seq))
    finally:
        db.close()


def _numeric_flip(path: Path, seq: int, column: str) -> None:
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(f"UPDATE events SET {column} = {column} + 1 WHERE seq = ?", (seq,))  # noqa: S608
    finally:
        db.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seq=st.integers(min_value=1, max_value=12),
    column=st.sampled_from(HASHED_COLUMNS),
    offset=st.integers(min_value=0, max_value=10_000),
)
def test_one_flipped_byte_anywhere_is_named_by_journal_verify(
    tmp_path_factory: object, seq: int, column: str, offset: int
) -> None:
    base = Path(str(tmp_path_factory.mktemp("flip")))  # type: ignore[attr-defined]
    path = base / "j.sqlite3"
    journal_with_epochs(path).close()
    _flip(path, seq, column, offset)
    report = verify_journal(path)
    assert report.chain_break_seq == seq, (column, offset, report.problems)
    assert any(f"event chain broken at seq {seq}" in p for p in report.problems)


def test_a_changed_time_hand_or_seq_is_named_too(tmp_path: Path) -> None:
    for column, seq in (("at", 3), ("hand", 7), ("seq", 12)):
        path = tmp_path / f"{column}.sqlite3"
        journal_with_epochs(path).close()
        _numeric_flip(path, seq, column)
        report = verify_journal(path)
        assert report.chain_break_seq is not None, column
        assert report.chain_break_seq == (13 if column == "seq" else seq), (column, report.problems)
