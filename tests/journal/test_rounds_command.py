"""``baccarat-edge rounds``: the last rounds from a real journal file, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.cli import main
from daemon.journal.recall import recall_from_journal
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from tests.engine.support import cmd, engine, feed, read
from tests.journal.test_recall import _RECORD, BANKER_DRAWS, NATURAL, _deal, _table_with_every_kind_of_round


def _journal(path: Path, more_rounds: int = 0) -> Path:
    _, events = _table_with_every_kind_of_round()
    eng = engine()
    extra = feed(
        eng,
        [cmd("new_shoe", 1000, "new-2", shoe_id="S2")]
        + [read(c, 1001 + k) for k, c in enumerate(("2c", "Kd", "Kh"))],
    )
    for hand in range(more_rounds):
        extra += _deal(eng, NATURAL if hand % 2 else BANKER_DRAWS, 1100 + 60 * hand)
    journal = Journal(JournalSettings(path=path), "T1")
    journal.append([], events + extra)
    journal.close()
    return path


def test_text_names_every_round_its_cards_holds_corrections_and_void(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _journal(tmp_path / "journal.sqlite3")
    assert main(["rounds", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: the last 5 round(s), oldest first" in out
    assert "hand 1  shoe S1  COMPLETED  PLAYER 9-5" in out
    assert "  cards: P1 9s  B1 2h  P2 Kc  B2 3d\n" in out
    assert "  hold: alert S1:a1 (unneeded_card) -> acknowledged by floor-1 (command ack-1) at" in out
    assert (
        "  correction: swap P1=3c B1=2d P2=4h B2=2s -> P1=2d B1=3c P2=2s B2=4h by floor-1 (command swap-3)"
        in out
    )
    assert (
        "  voided (after it completed): card exposed by floor-1 (command void-4) at 1970-01-01T00:05:10.000Z"
        in out
    )
    assert "hand 5  shoe S1  IN_PROGRESS  no result" in out


def test_json_is_the_recall_and_last_picks_the_newest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _journal(tmp_path / "journal.sqlite3", more_rounds=12)
    assert main(["rounds", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["last"] == 10
    assert report["journal"] == str(path)
    assert report["rounds"] == recall_from_journal(path, 10)
    assert [(r["shoe_id"], r["hand"]) for r in report["rounds"]] == [("S2", h) for h in range(3, 13)]
    for record in report["rounds"]:
        _RECORD.validate(record)
    assert main(["rounds", "--json", "--last", "14", str(path)]) == 0
    hands = [(r["shoe_id"], r["hand"]) for r in json.loads(capsys.readouterr().out)["rounds"]]
    assert hands == [("S1", 4), ("S1", 5)] + [("S2", h) for h in range(1, 13)]  # across both shoes


def test_the_journal_is_found_from_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    _journal(state / "journal.sqlite3")
    config = tmp_path / "table.yaml"
    config.write_text(
        f"table_id: T7\nstate_dir: {state}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        "broker:\n  host: 127.0.0.1\n  port: 1883\n  tls: {enabled: false}\n",
        encoding="utf-8",
    )
    assert main(["rounds", "--json", "--last", "2", "--config", str(config)]) == 0
    assert [r["hand"] for r in json.loads(capsys.readouterr().out)["rounds"]] == [4, 5]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rounds", "--last", "0", "j"], "--last must be 1..100, not 0"),
        (["rounds", "--last", "101", "j"], "--last must be 1..100, not 101"),
        (["rounds", "--last", "ten", "j"], "--last must be a whole number, not 'ten'"),
    ],
)
def test_last_out_of_bounds_is_bad_usage(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_or_unreadable_journal_or_config_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rounds", str(tmp_path / "none.sqlite3")]) == 2
    assert f"error: journal {tmp_path / 'none.sqlite3'}: no such file" in capsys.readouterr().err
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not sqlite at all, just bytes\n")
    assert main(["rounds", str(junk)]) == 2
    assert "not an SQLite database" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("table_id: T7\nstate_dirr: /x\n", encoding="utf-8")
    assert main(["rounds", "--config", str(bad)]) == 2
    assert "the config cannot be used to find the journal" in capsys.readouterr().err
    assert main(["rounds", str(junk), "--config", str(bad)]) == 2
    assert "not both" in capsys.readouterr().err


def test_an_empty_journal_has_no_round_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "journal.sqlite3"
    Journal(JournalSettings(path=path), "T1").close()
    assert main(["rounds", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: no round yet\n"
