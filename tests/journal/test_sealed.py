"""A squeeze table's sealed cards in a real journal: kept whole (a restart folds them back), never
in the hashed, signed, published or logged form of an event; ``journal export`` marks reveals."""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path

from common.inputs import CardRead, EngineInput
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.squeeze import SEALED
from daemon.engine.table import Engine
from daemon.journal import Journal, JournalSettings, verify_journal
from daemon.journal.chain import envelope_members, event_hash
from daemon.journal.export import export_events
from daemon.mqtt.audit import audit_payload
from daemon.mqtt.envelope import event_payload
from daemon.mqtt.secrets import Secret
from daemon.service.journal_writer import log_fields
from tests.engine.support import cmd, read, variant

TABLE = "T1"
CARD = re.compile(r'"[2-9TJQKA][cdhs]"')
SETTINGS = TableSettings.model_validate({"reveal": {"mode": "squeeze"}})


def nonce(n: int) -> str:
    return f"{n:032x}"


def squeeze_shoe(journal: Journal) -> Engine:
    """A shoe whose first round is dealt and half revealed, journaled input by input."""
    eng = Engine(SETTINGS, variant(), table_id=TABLE)
    inputs: list[EngineInput] = [cmd("new_shoe", 1, "n", shoe_id="S1")]
    inputs += [
        read(c, 2 + k, nonce=nonce(k)) for k, c in enumerate(["2c", "Kd", "Kh", "2s", "3d", "Ah", "4c"])
    ]
    inputs += [cmd("reveal", 20, "r1", slots=["P1", "P2"])]
    for inp in inputs:
        journal.append([inp], eng.handle(inp))
    return eng


def test_the_chain_hash_signature_and_envelope_cover_the_data_without_its_sealed_member(
    tmp_path: Path,
) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    squeeze_shoe(journal)
    key = Secret(b"the events key of table T1, long", "test")
    stored = list(journal.events(origin=None))
    assert any(SEALED in e.data for e in stored)  # the journal keeps the cards
    for event in stored:
        payload = event_payload(event, TABLE, 1.0, key)
        envelope = json.loads(payload)
        assert SEALED not in envelope["data"]
        members = {
            k: v
            for k, v in envelope.items()
            if k not in ("hash", "sig", "published_at", "epoch", "prev_hash")
        }
        assert event_hash(members, envelope["epoch"], envelope["prev_hash"]) == envelope["hash"]
        if event.kind == "card_dealt" and event.data["slot"] != "indicator":
            assert CARD.search(payload.decode()) is None
            assert CARD.search(json.dumps(log_fields(event.data))) is None
        assert members == envelope_members(
            event_id=event.event_id,
            seq=event.seq,
            table_id=TABLE,
            shoe_id=event.shoe_id,
            hand=event.hand,
            kind=event.kind,
            ts=event.at,
            source=event.source,
            data=event.data,
        )
    journal.close()
    assert verify_journal(tmp_path / "j.sqlite3").ok


def test_a_restart_mid_squeeze_folds_the_sealed_cards_back_from_the_journal(tmp_path: Path) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    live = squeeze_shoe(journal)
    stored = [Event.from_dict(e.body) for e in journal.events(origin=None)]
    restored = Engine.restore(SETTINGS, variant(), stored, table_id=TABLE)
    assert restored.state.comparable() == live.state.comparable()
    out = restored.handle(cmd("reveal", 30, "r2", slots=["B1", "B2"]))
    assert [e.data["card"] for e in out if e.kind == "card_revealed"] == ["3d", "4c"]
    assert not any(e.kind == "round_completed" for e in out)  # P 3, B 7: the Player's third card is due
    assert restored.snapshot()["round"]["next_slot"] == "P3"  # every dealt card shown: the draw is known
    journal.close()


def test_the_export_keeps_the_sealed_cards_and_marks_each_reveal(tmp_path: Path) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    squeeze_shoe(journal)
    journal.close()
    out = io.StringIO()
    export_events(tmp_path / "j.sqlite3", out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    dealt = {
        line["data"]["slot"]: line
        for line in lines
        if line["kind"] == "card_dealt" and "round" in line["data"]
    }
    revealed_seqs = {line["data"]["slot"]: line["seq"] for line in lines if line["kind"] == "card_revealed"}
    assert dealt["P1"]["revealed"] == {"at": 20.0, "seq": revealed_seqs["P1"]}
    assert dealt["B1"]["revealed"] is None
    assert dealt["B1"]["data"][SEALED]["card"] == "3d"


def test_a_round_voided_before_its_reveal_goes_to_the_audit_topic_only(tmp_path: Path) -> None:
    journal = Journal(JournalSettings(path=tmp_path / "j.sqlite3"), TABLE)
    eng = squeeze_shoe(journal)
    void = cmd("void_round", 30, "v", reason="exposed")
    journaled = journal.append([void], eng.handle(void))
    (voided,) = [e for e in journaled if e.kind == "round_voided"]
    envelope = json.loads(event_payload(voided, TABLE, 1.0, None))
    assert envelope["data"]["cards"] == {"P1": "2s", "B1": None, "P2": "Ah", "B2": None}
    audit_bytes = audit_payload(voided, TABLE, None)
    assert audit_bytes is not None
    audit = json.loads(audit_bytes)
    assert audit["kind"] == "round_voided_unrevealed"
    assert audit["seq"] == voided.seq
    assert {slot: c["card"] for slot, c in audit["cards"].items()} == {"B1": "3d", "B2": "4c"}
    others = [e for e in journaled if e is not voided]
    assert all(audit_payload(e, TABLE, None) is None for e in others)
    journal.close()


def test_an_open_tables_reads_carry_no_nonce() -> None:
    eng = Engine(TableSettings(), variant())
    eng.handle(cmd("new_shoe", 1, "n", shoe_id="S1"))
    (dealt,) = eng.handle(CardRead(read("2c", 2).card, 2.0))
    assert "nonce" not in dealt.data["read"]
    assert "commitment" not in dealt.data


def test_journal_verify_finds_a_sealed_card_swapped_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(JournalSettings(path=path), TABLE)
    squeeze_shoe(journal)
    journal.close()
    db = sqlite3.connect(path)
    seq, body = db.execute(
        "SELECT seq, body FROM events WHERE kind = 'card_dealt' AND body LIKE '%\"P1\"%' ORDER BY seq LIMIT 1"
    ).fetchone()
    event = json.loads(body)
    event["data"][SEALED]["card"] = "Kc"  # the hash does not cover it: its commitment does
    db.execute("UPDATE events SET body = ? WHERE seq = ?", (json.dumps(event), seq))
    db.commit()
    db.close()
    report = verify_journal(path)
    assert not report.ok
    assert any(f"seq {seq}" in p and "commitment" in p for p in report.problems), report.problems
