"""``baccarat-edge journal verify|export`` and check-config's journal check, through the CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from common.inputs import Tick
from daemon.cli import main
from daemon.journal import DeliveryEvent, Journal, JournalSettings
from tests.support.broker import free_port


def card(n: int) -> DeliveryEvent:
    return DeliveryEvent(
        kind="card_dealt", at=100.0 + n, data={"card": "8s", "n": n, "name": "Ünïcode"}, shoe_id="S1", hand=1
    )


def make_journal(path: Path, events: int, delivered: int, table: str = "T1") -> list[str]:
    journal = Journal(JournalSettings(path=path), table)
    ids = [journal.append([Tick(float(n))], [card(n)])[0].event_id for n in range(events)]
    journal.mark_delivered(range(1, delivered + 1), at=5000.0)
    journal.mark_dead_letter(delivered + 1, "refused by broker: Not authorized (0x87)")
    journal.close()
    return ids


def test_verify_a_whole_journal_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 12, delivered=5)
    assert main(["journal", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "table T1, epoch 0, 12 event(s) stored, last seq 12, 6 undelivered" in out
    assert "ok: the journal is whole" in out
    assert main(["journal", "verify", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["delivered_through"] == 6
    assert report["problems"] == []


def test_verify_a_damaged_journal_exits_1_with_reasons_and_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 12, delivered=5)
    db = sqlite3.connect(path)
    with db:
        db.execute("DELETE FROM events WHERE seq IN (9, 10)")
    db.close()
    assert main(["journal", "verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED: seq 9-10 missing: not removed by compaction" in out
    assert "up to seq 6 were delivered" in out
    assert f"baccarat-edge journal export {path}.damaged --from-seq 7" in out


@pytest.mark.parametrize("content", [None, b"", b"garbage " * 64])
def test_verify_an_unreadable_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None
) -> None:
    path = tmp_path / "j.sqlite3"
    if content is not None:
        path.write_bytes(content)
    assert main(["journal", "verify", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_export_round_trips_every_event_once_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.sqlite3"
    ids = make_journal(path, 30, delivered=10)
    assert main(["journal", "export", str(path)]) == 0
    captured = capsys.readouterr()
    assert "30 event(s) exported" in captured.err
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["seq"] for r in records] == list(range(1, 31))
    assert [r["event_id"] for r in records] == ids
    first, dead, pending = records[0], records[10], records[11]
    assert first["data"] == {"card": "8s", "n": 0, "name": "Ünïcode"}
    assert (first["kind"], first["shoe_id"], first["hand"], first["table_id"], first["origin"]) == (
        "card_dealt",
        "S1",
        1,
        "T1",
        "engine",
    )
    assert first["delivered_at"] == 5000.0
    assert isinstance(first["journaled_at"], float)
    assert dead["dead_letter"] == "refused by broker: Not authorized (0x87)"
    assert dead["delivered_at"] is None
    assert pending["delivered_at"] is None
    assert pending["dead_letter"] is None


def test_export_a_range_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "j.sqlite3"
    make_journal(path, 30, delivered=10)
    out = tmp_path / "unsent.jsonl"
    assert (
        main(["journal", "export", str(path), "--from-seq", "12", "--to-seq", "20", "--out", str(out)]) == 0
    )
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == list(range(12, 21))
    assert main(["journal", "export", str(path), "--from-seq", "5", "--to-seq", "4"]) == 2
    assert main(["journal", "export", str(tmp_path / "missing.sqlite3")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_check_config_reports_a_damaged_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "table.yaml"
    config.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        f"broker:\n  host: 127.0.0.1\n  port: {free_port()}\n  tls: {{enabled: false}}\n"
    )
    journal = tmp_path / "state" / "journal.sqlite3"
    make_journal(journal, 8, delivered=2, table="T7")

    def journal_finding() -> dict[str, object]:
        main(["check-config", str(config), "--json", "--timeout", "1", "--allow-insecure"])
        findings = json.loads(capsys.readouterr().out)["findings"]
        [finding] = [f for f in findings if f["subject"] == "journal"]
        return dict(finding)

    whole = journal_finding()
    assert whole["ok"] is True
    assert "is whole: 8 event(s), last seq 8" in str(whole["detail"])

    db = sqlite3.connect(journal)
    with db:
        db.execute("DELETE FROM events WHERE seq = 6")
    db.close()
    damaged = journal_finding()
    assert damaged["ok"] is False
    assert "seq 6 missing" in str(damaged["detail"])
    assert "journal export" in str(damaged["detail"])
