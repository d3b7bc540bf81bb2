"""The ``baccarat-edge rules`` command."""

from __future__ import annotations

import json
from math import perm
from pathlib import Path

import pytest

from daemon.cli import main
from daemon.rules.enumerate import enumerate_shoe
from tests.rules.support import REQUIRED_KEYS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_enumerate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rules", "enumerate", "--decks", "1", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["decks"] == 1
    assert report["total"] == perm(52, 6)
    assert set(REQUIRED_KEYS) <= set(report["counts"])
    assert report["counts"] == enumerate_shoe(1).counts


def test_enumerate_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rules", "enumerate", "--decks", "8")
    assert code == 0
    assert "4,998,398,275,503,360" in out
    assert "2,292,252,566,437,888" in out  # banker_win, readable with separators
    assert "perfect_pair_either" in out


def test_rtp_json_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rules", "rtp", "--variant", "standard", "--decks", "8", "--json")
    assert code == 0
    report = json.loads(out)
    banker = next(b for b in report["bets"] if b["name"] == "Banker")
    assert round(banker["rtp"]["percent"], 2) == 98.94
    assert report["super_round"] is None


def test_rtp_table_by_file_with_super_round(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[2] / "config" / "variants" / "super-98.yaml"
    code, out, _ = run(capsys, "rules", "rtp", "--variant", str(path), "--decks", "6")
    assert code == 0
    assert "probability 1/6" in out
    assert "Super 6+" in out


def test_bad_variant_is_reported_not_raised(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbets:\n  - name: Lucky\n    kind: lucky_seven\n    payout: 3\n")
    code, out, err = run(capsys, "rules", "rtp", "--variant", str(bad))
    assert code == 2
    assert out == ""
    assert "bet 'Lucky' (bets[0]): field 'kind': unknown bet kind 'lucky_seven'" in err
    code, out, err = run(capsys, "rules", "check", str(bad))
    assert code == 1
    assert out == ""
    assert str(bad) in err


def test_check_and_list_shipped_variants(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).resolve().parents[2] / "config" / "variants"
    code, out, _ = run(capsys, "rules", "check", *sorted(str(p) for p in folder.glob("*.yaml")))
    assert code == 0
    assert out.count(": ok, variant") == 7
    code, out, _ = run(capsys, "rules", "variants")
    assert code == 0
    assert "seed-000" in out


@pytest.mark.parametrize("decks", ["0", "9", "eight"])
def test_decks_are_validated(capsys: pytest.CaptureFixture[str], decks: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["rules", "enumerate", "--decks", decks])
    assert info.value.code == 2
    assert "--decks" in capsys.readouterr().err
