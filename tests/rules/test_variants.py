"""Variant files: the shipped ones load; bad ones are refused naming file, bet and field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.rules.main_bets import BankerBet
from daemon.rules.variants import (
    VARIANTS_DIR,
    VariantError,
    load_variant,
    load_variant_arg,
    load_variant_by_name,
    shipped_variant_names,
)

SHIPPED = ["cow-cow", "ez", "no-commission", "seed-000", "standard", "super-98", "tiger"]


def write(tmp_path: Path, data: Any, name: str = "table.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def refusal(tmp_path: Path, data: Any) -> str:
    path = write(tmp_path, data)
    with pytest.raises(VariantError) as info:
        load_variant(path)
    message = str(info.value)
    assert str(path) in message
    return message


def one_bet(**fields: Any) -> dict[str, Any]:
    """A one-bet variant (a commission Banker) with ``fields`` overriding the bet's keys."""
    return {"name": "t", "bets": [{"name": "Banker", "kind": "banker", "payout": 0.95, **fields}]}


def test_shipped_variants_load() -> None:
    assert shipped_variant_names() == SHIPPED
    assert VARIANTS_DIR.is_dir()
    for name in SHIPPED:
        variant = load_variant_by_name(name)
        assert variant.name == name
        assert variant.bets


def test_payouts_are_exact_decimals() -> None:
    banker = load_variant_by_name("standard").bet("Banker")
    assert isinstance(banker, BankerBet)
    assert banker.payout == Fraction(19, 20)
    either = load_variant_by_name("seed-000").bet("Either Natural")
    assert either.payout == Fraction(8, 5)  # type: ignore[union-attr]
    dragon = load_variant_by_name("seed-000").bet("Dragon")
    assert dragon.tie_refund == Fraction(1, 2)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("19/20", Fraction(19, 20)), ("0.95", Fraction(19, 20)), (1.05, Fraction(21, 20)), (8, Fraction(8))],
)
def test_payout_spellings(tmp_path: Path, text: object, expected: Fraction) -> None:
    variant = load_variant(write(tmp_path, one_bet(payout=text)))
    assert variant.bets[0].payout == expected  # type: ignore[union-attr]


def test_unknown_kind_names_file_bet_and_field(tmp_path: Path) -> None:
    message = refusal(tmp_path, {"name": "t", "bets": [{"name": "Lucky 7", "kind": "lucky_7", "payout": 3}]})
    assert "bet 'Lucky 7'" in message
    assert "field 'kind'" in message
    assert "unknown bet kind 'lucky_7'" in message
    assert "banker_six" in message  # lists the catalogue


def test_missing_payout(tmp_path: Path) -> None:
    data = {"name": "t", "bets": [{"name": "Tiger", "kind": "banker_six", "two_card_payout": 12}]}
    message = refusal(tmp_path, data)
    assert "bet 'Tiger' (bets[0]): field 'three_card_payout': missing" in message


def test_negative_limit(tmp_path: Path) -> None:
    message = refusal(tmp_path, one_bet(max_hand=-30))
    assert "bet 'Banker' (bets[0]): field 'max_hand'" in message
    assert "greater than 0" in message


def test_typo_in_key(tmp_path: Path) -> None:
    data = {"name": "t", "bets": [{"name": "Banker", "kind": "banker", "payot": 0.95}]}
    message = refusal(tmp_path, data)
    assert "bet 'Banker' (bets[0]): field 'payot': unknown key" in message
    assert "field 'payout': missing" in message


def test_typo_at_top_level(tmp_path: Path) -> None:
    data = one_bet()
    data["super_rund"] = {"die_faces": 12}
    assert "field 'super_rund': unknown key" in refusal(tmp_path, data)


@pytest.mark.parametrize(
    "bad", [0, -8, "abc", True, "1/0", ".nan", "inf", "-inf", [1], "1e999999999", 2_000_000, "3/x"]
)
def test_bad_payout_values(tmp_path: Path, bad: object) -> None:
    message = refusal(tmp_path, one_bet(payout=bad))
    assert "bet 'Banker' (bets[0]): field 'payout'" in message


def test_dragon_bonus_margin_keys_are_checked(tmp_path: Path) -> None:
    bet = {
        "name": "DB",
        "kind": "dragon_bonus",
        "side": "player",
        "margin_payouts": {12: 30},
        "natural_win_payout": 1,
    }
    message = refusal(tmp_path, {"name": "t", "bets": [bet]})
    assert "bet 'DB' (bets[0]): field 'margin_payouts.12" in message


def test_bet_names_must_be_unique(tmp_path: Path) -> None:
    data = one_bet()
    bets: list[Any] = data["bets"]
    data["bets"] = [*bets, {"name": "Banker", "kind": "player", "payout": 1}]
    assert "'Banker' is used twice" in refusal(tmp_path, data)


def test_super_round_payouts_need_the_die_settings(tmp_path: Path) -> None:
    data: dict[str, Any] = {
        "name": "t",
        "bets": [{"name": "P", "kind": "player", "payout": 1, "super_round_payout_on_8_or_9": 1.05}],
    }
    assert "super_round" in refusal(tmp_path, data)
    data["super_round"] = {"die_faces": 12, "super_faces": [8, 13]}
    assert "[13]" in refusal(tmp_path, data)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("name: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("", "must be a mapping"),
        ("name: t\nbets: []\n", "field 'bets'"),
        ("name: t\nbets: [3]\n", "bets[0]: each bet must be a mapping"),
        ("name: t\nbets:\n  - name: X\n", "bet 'X' (bets[0]): field 'kind': missing"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in refusal(tmp_path, text)


def test_missing_file_and_bad_names(tmp_path: Path) -> None:
    with pytest.raises(VariantError, match="not found"):
        load_variant(tmp_path / "absent.yaml")
    with pytest.raises(VariantError, match="not a variant name"):
        load_variant_by_name("../secrets")
    assert load_variant_arg("standard").name == "standard"
    assert load_variant_arg(str(VARIANTS_DIR / "ez.yaml")).name == "ez"


def test_offered_bets_follow_hand_limits() -> None:
    seed = load_variant_by_name("seed-000")
    on_1, on_20, on_21, on_31 = (seed.offered_bets(n) for n in (1, 20, 21, 31))
    assert len(on_1) == len(seed.bets)
    assert "Big" in on_20
    assert "Big" not in on_21
    assert "Perfect Pair" in on_21
    assert "Perfect Pair" not in on_31
    assert "Banker" in on_31
    assert "Tiger Pair" in on_31  # seed 000 gives it no limit
    assert on_31 == [b.name for b in seed.bets if b.max_hand is None]
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="hand_number"):
            seed.offered_bets(bad)


def test_super_round_probability() -> None:
    die = load_variant_by_name("super-98").super_round
    assert die is not None
    assert die.probability == Fraction(1, 6)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
bet_keys = st.sampled_from(
    ["name", "kind", "payout", "side", "max_hand", "total", "two_card_payout", "pick", "must_win", "x"]
)
kinds = st.sampled_from(["banker", "player", "pair", "tie_on_total", "first_card", "natural", "nope"])


@pytest.mark.slow
@settings(max_examples=150)
@given(
    st.dictionaries(st.sampled_from(["name", "bets", "super_round", "description"]), json_like, max_size=4),
    st.lists(st.dictionaries(bet_keys, json_like | kinds, max_size=6), max_size=3),
)
def test_garbage_is_refused_cleanly_never_crashes(top: dict[str, Any], bets: list[dict[str, Any]]) -> None:
    data: dict[str, Any] = dict(top)
    if bets:
        data["bets"] = bets
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "garbage.yaml"
        path.write_text(yaml.safe_dump(data))
        message = ""
        try:
            variant = load_variant(path)
        except VariantError as exc:
            message = str(exc)
        else:
            assert variant.bets
    if message:
        assert message.startswith(str(path))


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    text = "name: t\nbets:\n  - name: Banker\n    kind: banker\n    payout: 0.95\n    payout: 1\n"
    message = refusal(tmp_path, text)
    assert "key 'payout' is given twice" in message
    assert "line 6" in message


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"max_hand": True}, "field 'max_hand'"),
        ({"max_hand": "30"}, "field 'max_hand'"),
        ({"max_hand": 30.0}, "field 'max_hand'"),
        ({"six_payout": 0.5, "push_on_three_card_seven": 1}, "field 'push_on_three_card_seven'"),
    ],
)
def test_no_lax_coercion(tmp_path: Path, fields: dict[str, Any], fragment: str) -> None:
    """A bool where a number belongs (or "30" for 30) is a mistake to report, not to coerce."""
    assert fragment in refusal(tmp_path, one_bet(**fields))


@pytest.mark.parametrize(
    ("bet", "fragment"),
    [
        (
            {"kind": "perfect_pair", "side": "player", "payout": 25, "both_payout": 200},
            "both_payout only applies to side: either",
        ),
        ({"kind": "first_card", "pick": "tie", "payout": 8, "tie_refund": 0.5}, "tie_refund only applies"),
        ({"kind": "first_card", "pick": "dragon", "payout": 1, "tie_refund": 1.5}, "between 0 and 1"),
        ({"kind": "cow_cow", "side": "player", "commission_on_nine": 1}, "below 1"),
        ({"kind": "tie_on_total", "total": 10, "payout": 40}, "field 'total'"),
        ({"kind": "natural_total", "side": "player", "total": 7, "payout": 8}, "field 'total'"),
        ({"kind": "pair", "side": "dealer", "payout": 11}, "field 'side'"),
    ],
)
def test_meaningless_combinations_are_refused(tmp_path: Path, bet: dict[str, Any], fragment: str) -> None:
    message = refusal(tmp_path, {"name": "t", "bets": [{"name": "X", **bet}]})
    assert "bet 'X' (bets[0])" in message
    assert fragment in message


HOUSE = """\
name: house
description: A casino's own pay table.
bets:
  - name: Banker
    kind: banker
    payout: 0.95
  - name: Big
    kind: big
    payout: 0.5
    max_hand: 30
"""

# The same pay table: comments, flow style, key order, 19/20 for 0.95, another description.
HOUSE_REFORMATTED = """\
# edited by the floor manager, pay table unchanged
description: "Reworded"
name: house
bets:
  - {kind: banker, name: Banker, payout: 19/20}   # 5% commission
  - kind: big
    max_hand: 30
    payout: 1/2
    name: Big
"""


def test_digest_ignores_comments_layout_and_description(tmp_path: Path) -> None:
    first = load_variant(write(tmp_path, HOUSE, "a.yaml"))
    again = load_variant(write(tmp_path, HOUSE_REFORMATTED, "b.yaml"))
    assert again.description != first.description
    assert again.digest == first.digest
    assert re.fullmatch(r"[0-9a-f]{64}", first.digest)


@pytest.mark.parametrize(
    ("old", "new"),
    [("payout: 0.95", "payout: 0.96"), ("max_hand: 30", "max_hand: 40"), ("name: Big", "name: Grand")],
)
def test_digest_changes_with_any_payout_limit_or_bet(tmp_path: Path, old: str, new: str) -> None:
    first = load_variant(write(tmp_path, HOUSE, "a.yaml"))
    edited = load_variant(write(tmp_path, HOUSE.replace(old, new), "b.yaml"))
    assert edited.name == first.name
    assert edited.digest != first.digest


def test_digest_is_the_same_in_another_process() -> None:
    """No hash randomisation: a digest journalled before a restart is met again after it."""
    here = {name: load_variant_by_name(name).digest for name in SHIPPED}
    script = (
        "import json; from daemon.rules.variants import load_variant_by_name as l; "
        f"print(json.dumps({{n: l(n).digest for n in {SHIPPED!r}}}))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        command = [sys.executable, "-c", script]
        out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        assert json.loads(out.stdout) == here
    assert len(set(here.values())) == len(SHIPPED)
