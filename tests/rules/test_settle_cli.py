"""``baccarat-edge rules settle``: a round's cards in, every bet's outcome and exact payout out."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from common.cards import ALL_CARDS
from daemon.cli import main
from daemon.engine.settle import Settler
from daemon.rules.outcome import play_round
from daemon.rules.variants import load_variant_by_name


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def settle_json(capsys: pytest.CaptureFixture[str], variant: str, player: str, banker: str) -> dict[str, Any]:
    code, out, err = run(
        capsys,
        "rules",
        "settle",
        "--variant",
        variant,
        "--player",
        *player.split(),
        "--banker",
        *banker.split(),
        "--json",
    )
    assert (code, err) == (0, "")
    report: dict[str, Any] = json.loads(out)
    return report


def bet(report: dict[str, Any], name: str) -> tuple[str, str]:
    resolution = report["bets"][name]
    assert resolution["multiplier_float"] == pytest.approx(eval_fraction(resolution["multiplier"]))
    return resolution["outcome"], resolution["multiplier"]


def eval_fraction(text: str) -> float:
    numerator, _, denominator = text.partition("/")
    return int(numerator) / int(denominator or 1)


def test_player_win(capsys: pytest.CaptureFixture[str]) -> None:
    report = settle_json(capsys, "standard", "8s Kd", "3h 3d")
    assert (report["player_total"], report["banker_total"], report["winner"]) == (8, 6, "player")
    assert (report["player_natural"], report["banker_natural"]) == (True, False)
    assert (report["player_pair"], report["banker_pair"]) == (False, True)
    assert bet(report, "Player") == ("win", "1")
    assert bet(report, "Banker") == ("lose", "-1")
    assert bet(report, "Tie") == ("lose", "-1")
    assert bet(report, "Banker Pair") == ("win", "11")
    assert bet(report, "Player Pair") == ("lose", "-1")


def test_banker_win_pays_less_commission(capsys: pytest.CaptureFixture[str]) -> None:
    report = settle_json(capsys, "standard", "7s Kd", "8h Kh")
    assert report["winner"] == "banker"
    assert bet(report, "Banker") == ("win", "19/20")
    assert report["bets"]["Banker"]["multiplier_float"] == 0.95
    assert bet(report, "Player") == ("lose", "-1")


def test_tie_pushes_player_and_banker(capsys: pytest.CaptureFixture[str]) -> None:
    report = settle_json(capsys, "standard", "7s Kd", "7h Qh")
    assert report["winner"] == "tie"
    assert bet(report, "Player") == ("push", "0")
    assert bet(report, "Banker") == ("push", "0")
    assert bet(report, "Tie") == ("win", "8")


def test_no_commission_banker_wins_on_six(capsys: pytest.CaptureFixture[str]) -> None:
    # Player 5 draws a ten (stays 5); Banker 6 stands on a third card worth 0, and wins on 6.
    report = settle_json(capsys, "no-commission", "Ks 5d Qc", "3h 3d")
    assert (report["player_total"], report["banker_total"], report["winner"]) == (5, 6, "banker")
    assert bet(report, "Banker") == ("win", "1/2")
    assert bet(report, "Super 6") == ("win", "12")
    assert bet(report, "Banker Pair") == ("win", "11")


def test_ez_dragon_7_and_panda_8(capsys: pytest.CaptureFixture[str]) -> None:
    dragon = settle_json(capsys, "ez", "Ks 5d Qc", "Kh 3d 4c")
    assert (dragon["banker_total"], dragon["winner"]) == (7, "banker")
    assert bet(dragon, "Dragon 7") == ("win", "40")
    assert bet(dragon, "Banker") == ("push", "0")  # EZ: a three-card 7 win pushes
    panda = settle_json(capsys, "ez", "Ks 5d 3c", "Kh 7d")
    assert (panda["player_total"], panda["winner"]) == (8, "player")
    assert bet(panda, "Panda 8") == ("win", "25")
    assert bet(panda, "Dragon 7") == ("lose", "-1")


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "rules", "settle", "--variant", "standard", "--player", "7s", "Kd", "--banker", "8h", "Kh"
    )
    assert code == 0
    assert "Banker  8h Kh     = 8" in out
    assert "Winner  banker by 1" in out
    banker_line = next(line for line in out.splitlines() if line.startswith("Banker "))
    assert banker_line.split() == ["Banker", "8h", "Kh", "=", "8"]
    row = next(line for line in out.splitlines() if line.startswith("Banker ") and "win" in line)
    assert row.split() == ["Banker", "win", "19/20", "0.950000"]


def test_super_round_flag(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "rules",
        "settle",
        "--variant",
        "super-98",
        "--player",
        "2s",
        "2d",
        "4c",
        "--banker",
        "Th",
        "5d",
        "Kc",
    ]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    normal = json.loads(out)
    code, out, _ = run(capsys, *argv, "--super-round", "--json")
    assert code == 0
    super_round = json.loads(out)
    assert (normal["super_round"], super_round["super_round"]) == (False, True)
    assert normal["bets"]["Player"] != super_round["bets"]["Player"]  # a win on 8 pays more


@pytest.mark.parametrize(
    ("player", "banker", "extra", "message"),
    [
        ("8s 8x", "3h 3d", [], "player: card code '8x': unknown suit 'x' (expected c d h s)"),
        ("8s", "3h 3d", [], "player has 1 card(s): a side holds 2 or 3"),
        ("2s 2d 3c 4c", "3h 3d", [], "player has 4 card(s): a side holds 2 or 3"),
        ("7s Kd 2c", "3h 3d", [], "player has 7: player stands"),
        ("3s Kd", "Th 5d", [], "player has 3: player must draw"),
        ("Ks 3d 4c", "Kh 5d", [], "banker has 5 and player's third card is 4: banker must draw"),
        ("Ks 3d Kc", "Kh 5d 2c", [], "banker has 5 and player's third card is 0: banker stands"),
        ("7s Kd", "Kh 4d", [], "player stood and banker has 4: banker must draw"),
        ("8s Kd 3c", "3h 3d", [], "player has 8 and banker has 6: a natural, neither side draws"),
        ("7s Kd", "7s Qh", ["--decks", "1"], "7s is dealt 2 times but a 1-deck shoe holds 1"),
        ("7s Kd", "7h Qh", ["--super-round"], "variant 'standard' has no super rounds"),
    ],
)
def test_invalid_round_exits_1(
    capsys: pytest.CaptureFixture[str], player: str, banker: str, extra: list[str], message: str
) -> None:
    argv = [
        "rules",
        "settle",
        "--variant",
        "standard",
        "--player",
        *player.split(),
        "--banker",
        *banker.split(),
    ]
    code, out, err = run(capsys, *argv, *extra)
    assert (code, out) == (1, "")
    assert err == f"error: {message}\n"


def test_duplicate_allowed_when_the_shoe_holds_it(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rules", "settle", "--variant", "standard", "--player", "9s", "9s", "--banker", "7h", "Qh"]
    code, out, _ = run(capsys, *argv, "--decks", "8", "--json")
    assert code == 0
    assert json.loads(out)["player_suited_pair"] is True


@pytest.mark.parametrize(
    "argv",
    [
        ["--variant", "standard", "--player", "7s", "Kd"],
        ["--variant", "standard", "--jsonl", "-", "--player", "7s", "Kd", "--banker", "7h", "Qh"],
        ["--variant", "no-such-variant", "--player", "7s", "Kd", "--banker", "7h", "Qh"],
        ["--variant", "standard", "--jsonl", "/nonexistent/rounds.jsonl"],
    ],
)
def test_usage_and_unreadable_input_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, "rules", "settle", *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ")


def test_jsonl_settles_good_lines_and_names_bad_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rounds = tmp_path / "rounds.jsonl"
    rounds.write_text(
        "\n".join(
            [
                '{"player": ["7s", "Kd"], "banker": ["8h", "Kh"], "id": "r1"}',
                '{"player": ["3s", "Kd"], "banker": ["Th", "5d"], "id": "r2"}',
                "",
                "not json",
                '{"player": ["7s", "Kd"], "banker": ["7h", "Qh"], "colour": "red"}',
                '{"player": "7s Kd", "banker": ["7h", "Qh"]}',
                '{"player": ["7s", "Kd"], "banker": ["7h", "Qh"], "super_round": "yes"}',
                '{"player": ["7s", "Kd"], "banker": ["7h", 7]}',
                '{"player": ["7s", "Kd"], "banker": ["7h", "%s"]}' % ("Q" * 500),
                "[" * 100_000 + "]" * 100_000,
                '{"player": ["7s", "Kd"], "banker": ["7h", "Qh"], "id": 42}',
            ]
        )
        + "\n"
    )
    code, out, err = run(capsys, "rules", "settle", "--variant", "standard", "--jsonl", str(rounds))
    assert code == 1
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["winner"]) for r in results] == [("r1", "banker"), (42, "tie")]
    assert results[0]["bets"]["Banker"]["multiplier"] == "19/20"
    errors = err.splitlines()
    assert [line.split(": ")[2] for line in errors] == [f"line {n}" for n in (2, 4, 5, 6, 7, 8, 9, 10)]
    assert errors[0] == f"error: {rounds}: line 2: player has 3: player must draw"
    assert "not valid JSON" in errors[1]
    assert "unknown key(s) 'colour'" in errors[2]
    assert "'player' must be a list of card codes" in errors[3]
    assert "'super_round' must be true or false" in errors[4]
    assert "banker card 7 is not a card code" in errors[5]
    assert "banker card 'QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ... is not a card code" in errors[6]
    assert errors[7].endswith("line 10: not valid JSON: nested too deeply")


def test_jsonl_all_good_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rounds = tmp_path / "rounds.jsonl"
    rounds.write_text('{"player": ["2s", "2d", "4c"], "banker": ["Th", "5d", "Kc"], "super_round": true}\n')
    code, out, err = run(capsys, "rules", "settle", "--variant", "super-98", "--jsonl", str(rounds))
    assert (code, err) == (0, "")
    (result,) = [json.loads(line) for line in out.splitlines()]
    assert "id" not in result
    assert result["super_round"] is True


@pytest.mark.parametrize(
    "variant", ["standard", "no-commission", "ez", "tiger", "super-98", "cow-cow", "seed-000"]
)
def test_matches_the_engine_settlement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: str
) -> None:
    """Random legal rounds from a shuffled 8-deck shoe: the CLI says what the engine's Settler says."""
    loaded = load_variant_by_name(variant)
    die = loaded.super_round
    rng = random.Random(f"settle-{variant}")
    shoe = list(ALL_CARDS) * 8
    rng.shuffle(shoe)
    rounds: list[tuple[list[str], list[str], bool]] = []
    position = 0
    while len(rounds) < 300:
        if len(shoe) - position < 6:
            rng.shuffle(shoe)
            position = 0
        outcome, used = play_round(shoe[position:])
        position += used
        super_round = die is not None and rng.random() < 0.5
        rounds.append(([c.code for c in outcome.player], [c.code for c in outcome.banker], super_round))
    lines = [
        json.dumps({"id": i, "player": p, "banker": b, **({"super_round": s} if die else {})})
        for i, (p, b, s) in enumerate(rounds)
    ]
    source = tmp_path / "rounds.jsonl"
    source.write_text("\n".join(lines) + "\n")
    code, out, err = run(
        capsys, "rules", "settle", "--variant", variant, "--jsonl", str(source), "--decks", "8"
    )
    assert (code, err) == (0, "")
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == len(rounds)
    settler = Settler(loaded)
    for (player, banker, super_round), result in zip(rounds, results, strict=True):
        face = None
        if die is not None:
            face = next(f for f in range(1, die.die_faces + 1) if (f in die.super_faces) == super_round)
        summary, bets = settler.settle(player, banker, 1, face)
        assert result["bets"] == bets
        assert {
            k: v for k, v in result.items() if k not in ("id", "variant", "super_round", "bets")
        } == summary
