"""Engine-state snapshots in the journal: a restart folds only the events after the newest one.

Real journal files: a few 1-deck shoes dealt through the engine and journaled one input per
append, as the daemon does, with the daemon's :class:`SnapshotTaker`. The state a snapshot
restores is always compared with the fold of every event; a missing, stale, corrupt or
foreign snapshot falls back to that fold (with a log line), and ``journal verify`` re-folds
and compares on demand.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import structlog

from common.inputs import DeviceConnection, EngineInput
from daemon.cli import main as cli_main
from daemon.engine.events import Event
from daemon.engine.settings import TableSettings
from daemon.engine.table import Engine
from daemon.journal.records import ORIGIN_DELIVERY
from daemon.journal.settings import JournalSettings
from daemon.journal.snapshots import KEEP, row_digest
from daemon.journal.store import Journal
from daemon.rules.variants import load_variant_by_name
from daemon.service.engine_restore import (
    SnapshotTaker,
    drop_snapshots,
    restore_from_journal,
    verify_snapshots,
)
from tests.engine.reference import deal_shoe, shuffled_shoe
from tests.support.broker import free_port

TABLE = "T-SNAP"
SETTINGS = TableSettings(decks=1)
VARIANT = load_variant_by_name("standard")


def dealt_inputs(shoes: int, seed: int = 7) -> list[EngineInput]:
    """``shoes`` clean 1-deck shoes, then half a shoe; the reader drops away in the second
    shoe and never comes back (an alert open across shoes)."""
    rng = random.Random(seed)
    out: list[EngineInput] = []
    for n in range(shoes + 1):
        cards = shuffled_shoe(1, rng)
        inputs = deal_shoe(SETTINGS, VARIANT, cards, len(cards) - 12, shoe_id=f"S{n + 1}").inputs
        shifted: list[EngineInput] = [i._replace(at=i.at + n * 10_000.0) for i in inputs]
        if n == 1:
            shifted.insert(5, DeviceConnection(connected=False, at=shifted[4].at + 0.5, device="cam-x"))
        out += shifted if n < shoes else shifted[: len(shifted) // 2]
    return out


def deal_into(path: Path, inputs: list[EngineInput], settings: TableSettings = SETTINGS) -> Engine:
    """Deal ``inputs`` through an engine into a journal at ``path``, as the engine thread does."""
    engine = Engine(settings, VARIANT)
    journal = Journal(JournalSettings(path=path), TABLE)
    taker = SnapshotTaker(journal)
    try:
        for inp in inputs:
            taker.after_append(engine, journal.append([inp], engine.handle(inp)))
    finally:
        journal.close()
    return engine


def full_fold(journal: Journal, settings: TableSettings = SETTINGS) -> Engine:
    return Engine.restore(settings, VARIANT, [Event.from_dict(e.body) for e in journal.events()])


def restore(path: Path, settings: TableSettings = SETTINGS) -> tuple[Any, list[Any]]:
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        with structlog.testing.capture_logs() as logs:
            restored = restore_from_journal(journal, settings, VARIANT)
        assert restored.engine.state.comparable() == full_fold(journal, settings).state.comparable()
    finally:
        journal.close()
    return restored, logs


def sql(path: Path, statement: str, *args: Any) -> list[Any]:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        return db.execute(statement, args).fetchall()
    finally:
        db.close()


def resign(path: Path) -> None:
    """Store each snapshot row's checksum for what it holds now: a snapshot that was wrong when
    it was written (a fault of the software, not of the storage) carries a matching checksum."""
    rows = sql(path, "SELECT id, seq, event_id, body_sha256, key, taken_at, body FROM snapshots")
    for row_id, seq, event_id, body_sha256, key, taken_at, body in rows:
        digest = row_digest(
            seq=seq, event_id=event_id, body_sha256=body_sha256, key=key, taken_at=taken_at, body=body
        )
        sql(path, "UPDATE snapshots SET row_sha256 = ? WHERE id = ?", digest, row_id)


def test_a_restart_folds_only_the_events_after_the_newest_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    live = deal_into(path, dealt_inputs(3))
    snapshots = sql(path, "SELECT seq FROM snapshots ORDER BY seq")
    # (a shoe's end is appended with its certificate: the snapshot covers that, the append's last)
    ends = sql(path, "SELECT seq FROM events WHERE kind = 'shoe_certificate' ORDER BY seq")
    assert [s for (s,) in snapshots] == [e for (e,) in ends][-KEEP:]  # one per shoe end, newest kept
    restored, logs = restore(path)
    last_snapshot = snapshots[-1][0]
    assert restored.snapshot_seq == last_snapshot
    total = sql(path, "SELECT count(*) FROM events")[0][0]
    assert restored.events_folded == total - last_snapshot  # the half shoe after it only
    assert restored.events_folded < total / 5
    assert restored.engine.state.comparable() == live.state.comparable()
    assert restored.engine.snapshot() == live.snapshot()
    assert "cam-x" in restored.engine.state.disconnected  # state older than the shoe is kept
    (line,) = [entry for entry in logs if entry["event"] == "engine_restored"]
    assert line["from_snapshot_seq"] == last_snapshot
    assert line["events"] == restored.events_folded
    # the restored engine deals on exactly like the live one
    more = dealt_inputs(4, seed=7)[len(dealt_inputs(3, seed=7)) :]
    for inp in more[:20]:
        assert restored.engine.handle(inp) == live.handle(inp)


def _fell_back(restored: Any, logs: list[Any], why: str) -> None:
    assert restored.snapshot_seq is None
    (warning,) = [entry for entry in logs if entry["event"] == "engine_snapshot_unusable"]
    assert any(why in reason for reason in warning["reasons"]), warning["reasons"]


def test_a_snapshot_taken_under_other_table_settings_is_never_used(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    other = SETTINGS.model_copy(update={"duplicate_memory": SETTINGS.duplicate_memory + 1})
    restored, logs = restore(path, other)
    _fell_back(restored, logs, "the table settings changed")
    # the full fold stored a snapshot under the new settings: the next start uses it
    again, _ = restore(path, other)
    assert again.snapshot_seq == restored.last_seq
    assert again.events_folded == 0


def test_a_corrupt_snapshot_falls_back_to_the_full_fold(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    sql(path, "UPDATE snapshots SET body = substr(body, 1, 200)")
    resign(path)
    restored, logs = restore(path)
    _fell_back(restored, logs, "cannot be read")


def test_a_snapshot_the_events_cannot_be_folded_onto_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    (body,) = sql(path, "SELECT body FROM snapshots ORDER BY seq DESC LIMIT 1")[0]
    data = json.loads(body)
    data["state"]["reader_devices"] = 5  # decodes, but the next read cannot be noted in it
    sql(path, "UPDATE snapshots SET body = ? WHERE seq = (SELECT max(seq) FROM snapshots)", json.dumps(data))
    resign(path)
    restored, logs = restore(path)
    assert restored.snapshot_seq is not None  # the older snapshot was used
    (warning,) = [entry for entry in logs if entry["event"] == "engine_snapshot_unusable"]
    assert "folding the events after it failed (TypeError" in warning["reasons"][0]
    assert "the snapshot at seq" in warning["action"]
    report = verify_snapshots(path)
    assert any("differs from the fold of the events in reader_devices" in p for p in report.problems)


def test_a_snapshot_of_other_events_is_never_used(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    newest, older = (s for (s,) in sql(path, "SELECT seq FROM snapshots ORDER BY seq DESC"))
    # the newest covers an event whose body is not the one it was taken after (e.g. a journal
    # restored from another copy); the older one covers an event that is gone
    # (a space after the kind's string: the same event, another body)
    respaced = """UPDATE events SET body = replace(body, '"shoe_certificate"', '"shoe_certificate" ')
        WHERE seq = ?"""
    sql(path, respaced, newest)
    sql(path, "UPDATE events SET delivered_at = 1.0")
    sql(path, "DELETE FROM events WHERE seq = ?", older)
    restored, logs = restore(path)
    _fell_back(restored, logs, "its body differs")
    _fell_back(restored, logs, "is not in the journal")


def test_no_snapshot_is_a_full_fold_then_one_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    assert drop_snapshots(path) == 2
    restored, logs = restore(path)
    assert restored.snapshot_seq is None
    assert not [entry for entry in logs if entry["event"] == "engine_snapshot_unusable"]  # nothing was wrong
    assert sql(path, "SELECT seq FROM snapshots") == [(restored.last_seq,)]


def test_a_full_fold_reports_its_progress(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    drop_snapshots(path)
    journal = Journal(JournalSettings(path=path), TABLE)
    read: list[int] = []
    try:
        restored = restore_from_journal(journal, SETTINGS, VARIANT, progress=read.append, progress_every=100)
        assert read == list(range(100, restored.events_folded + 1, 100))
        again = restore_from_journal(journal, SETTINGS, VARIANT, progress=read.append, progress_every=100)
    finally:
        journal.close()
    assert again.events_folded == 0  # from the snapshot the full fold stored
    assert read == list(range(100, restored.events_folded + 1, 100))


def test_verify_refolds_and_finds_a_snapshot_that_disagrees(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(3))
    report = verify_snapshots(path)
    assert report.problems == []
    assert len(report.checked) == KEEP
    assert cli_main(["journal", "verify", str(path)]) == 0
    assert f"{KEEP} engine snapshot(s) equal to the fold" in capsys.readouterr().out
    # a snapshot that decodes but holds a wrong count: the start path cannot see it (its covered
    # event is right), verify does
    (body,) = sql(path, "SELECT body FROM snapshots ORDER BY seq DESC LIMIT 1")[0]
    data = json.loads(body)
    data["state"]["cards_out"] += 1
    sql(path, "UPDATE snapshots SET body = ? WHERE seq = (SELECT max(seq) FROM snapshots)", json.dumps(data))
    resign(path)
    report = verify_snapshots(path)
    (problem,) = report.problems
    assert "differs from the fold of the events in cards_out" in problem
    assert cli_main(["journal", "verify", str(path)]) == 1
    assert "cards_out" in capsys.readouterr().out
    assert cli_main(["journal", "drop-snapshots", str(path)]) == 0
    assert verify_snapshots(path).problems == []


def test_verify_after_compaction_checks_each_snapshot_against_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(4))
    oldest = sql(path, "SELECT min(seq) FROM snapshots")[0][0]
    sql(path, "UPDATE events SET delivered_at = 1.0")
    sql(path, "DELETE FROM events WHERE seq < ?", oldest - 5)
    sql(path, "INSERT INTO compacted_seqs(first_seq, last_seq) VALUES (1, ?)", oldest - 6)
    report = verify_snapshots(path)
    assert report.problems == []
    assert report.checked == [s for (s,) in sql(path, "SELECT seq FROM snapshots ORDER BY seq")]
    assert any("were compacted" in note for note in report.notes)


def test_check_config_can_verify_the_snapshots(tmp_path: Path, capsys: Any) -> None:
    config = tmp_path / "table.yaml"
    config.write_text(
        f"table_id: {TABLE}\nstate_dir: {tmp_path / 'state'}\ntable: {{decks: 1}}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        f"broker:\n  host: 127.0.0.1\n  port: {free_port()}\n  tls: {{enabled: false}}\n"
    )
    path = tmp_path / "state" / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))

    def finding() -> dict[str, Any]:
        argv = ["check-config", str(config), "--json", "--timeout", "1", "--allow-insecure"]
        cli_main([*argv, "--verify-snapshots"])
        findings = json.loads(capsys.readouterr().out)["findings"]
        (found,) = [f for f in findings if f["subject"] == "journal snapshots"]
        return dict(found)

    assert finding() == {
        "subject": "journal snapshots",
        "ok": True,
        "warning": False,
        "detail": "2 equal to the fold of the events",
    }
    (body,) = sql(path, "SELECT body FROM snapshots ORDER BY seq DESC LIMIT 1")[0]
    data = json.loads(body)
    data["state"]["hand"] += 1
    sql(path, "UPDATE snapshots SET body = ? WHERE seq = (SELECT max(seq) FROM snapshots)", json.dumps(data))
    resign(path)
    wrong = finding()
    assert wrong["ok"] is False
    assert "differs from the fold of the events in hand" in str(wrong["detail"])


def test_a_flipped_value_that_keeps_the_json_valid_is_an_alert_and_a_fold(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    live = deal_into(path, dealt_inputs(2))
    (newest, body) = sql(path, "SELECT seq, body FROM snapshots ORDER BY seq DESC LIMIT 1")[0]
    count = json.loads(body)["state"]["cards_out"]
    flipped = body.replace(f'"cards_out":{count}', f'"cards_out":{count ^ 1}')
    assert flipped != body
    json.loads(flipped)  # still valid JSON, still a readable checkpoint: only the checksum sees it
    sql(path, "UPDATE snapshots SET body = ? WHERE seq = ?", flipped, newest)
    restored, logs = restore(path)
    # the damaged newest row is skipped; the older one (intact) is used and the rest folded
    assert restored.snapshot_seq is not None
    assert restored.snapshot_seq < newest
    assert restored.engine.state.comparable() == live.state.comparable()
    (warning,) = [entry for entry in logs if entry["event"] == "engine_snapshot_unusable"]
    assert "checksum does not match" in warning["reasons"][0]
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        alerts = [
            e
            for e in journal.events(origin=ORIGIN_DELIVERY)
            if e.data.get("code") == "engine_snapshot_unusable"
        ]
    finally:
        journal.close()
    (alert,) = alerts
    assert alert.kind == "alert_raised"
    assert alert.data["snapshot_seq"] == newest
    assert "checksum does not match" in alert.data["reason"]
    assert alert.data["severity"] == "warning"
    # verify names the damaged row too
    assert any("checksum does not match" in p for p in verify_snapshots(path).problems)


def test_every_damaged_row_means_a_fold_from_the_events(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    live = deal_into(path, dealt_inputs(3))
    sql(path, "UPDATE snapshots SET taken_at = taken_at + 1")  # a field other than the body
    restored, logs = restore(path)
    _fell_back(restored, logs, "checksum does not match")
    assert restored.engine.state.comparable() == live.state.comparable()
    again, _ = restore(path)  # the fold stored a checked snapshot
    assert again.snapshot_seq == restored.last_seq


def test_rows_from_before_checksums_are_not_used_once_then_replaced(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    deal_into(path, dealt_inputs(2))
    # the table as an older version made it: no checksum column
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("ALTER TABLE snapshots DROP COLUMN row_sha256")
    finally:
        db.close()
    restored, logs = restore(path)  # the open adds the column; the old rows have no checksum
    _fell_back(restored, logs, "stored without a checksum")
    journal = Journal(JournalSettings(path=path), TABLE)
    try:
        codes = [e.data.get("code") for e in journal.events(origin=ORIGIN_DELIVERY)]
    finally:
        journal.close()
    assert "engine_snapshot_unusable" not in codes  # an upgrade, not damage: a log line only
    again, _ = restore(path)
    assert again.snapshot_seq == restored.last_seq
